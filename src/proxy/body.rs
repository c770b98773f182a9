//! Body wrappers of the request path: the client's request body with an idle timer (a body that
//! stalls is aborted instead of holding two connections), and the response body that keeps its
//! connection counted as busy until it has been sent.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use super::balance::Picked;
use super::conn::InFlight;
use super::error::ClientBodyError;
use super::{BoxError, ProxyBody};

/// The error a stalled request body ends with.
#[derive(Debug, thiserror::Error)]
#[error("request body sent no data for {0:?}")]
pub struct BodyIdle(pub Duration);

/// The client's request body, aborted with [`BodyIdle`] when no frame arrives for the limit
/// while someone is waiting for one; its other errors are marked [`ClientBodyError`], so a
/// malformed body is blamed on the client (400), never on the backend. The timer runs only while the body is polled and pending,
/// so a slow upstream that does not read is not blamed on the client. The timer is made the
/// first time the body waits: most requests have no body and never need one.
pub struct ClientBody {
    inner: Incoming,
    limit: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
    armed: bool,
    timed_out: Arc<AtomicBool>,
}

impl ClientBody {
    /// Wraps `inner`; `timed_out` turns true if the body is aborted for idleness.
    pub fn new(inner: Incoming, limit: Duration, timed_out: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            limit,
            sleep: None,
            armed: false,
            timed_out,
        }
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.armed = false;
                Poll::Ready(
                    frame.map(|f| f.map_err(|e| -> BoxError { Box::new(ClientBodyError(e)) })),
                )
            }
            Poll::Pending => {
                if !this.armed {
                    let deadline = Instant::now() + this.limit;
                    match &mut this.sleep {
                        Some(sleep) => sleep.as_mut().reset(deadline),
                        None => this.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
                    }
                    this.armed = true;
                }
                let Some(sleep) = this.sleep.as_mut() else {
                    return Poll::Pending;
                };
                if sleep.as_mut().poll(cx).is_ready() {
                    this.timed_out.store(true, Ordering::Release);
                    return Poll::Ready(Some(Err(BodyIdle(this.limit).into())));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that holds its connection's in-flight mark until hyper drops it (sent, or
/// the connection ended).
pub(crate) struct Tracked {
    inner: ProxyBody,
    _in_flight: InFlight,
    /// The endpoint that answered: the request counts as in flight on it until the body is sent.
    _endpoint: Option<Picked>,
}

impl Tracked {
    pub(crate) fn new(inner: ProxyBody, in_flight: InFlight, endpoint: Option<Picked>) -> Self {
        Self {
            inner,
            _in_flight: in_flight,
            _endpoint: endpoint,
        }
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
