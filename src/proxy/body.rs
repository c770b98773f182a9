//! Body wrappers of the request path: the client's request body with an idle timer (a body that
//! stalls is aborted instead of holding two connections), and the response body that keeps its
//! connection counted as busy until it has been sent.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use super::access_log::Entry;
use super::balance::Picked;
use super::conn::InFlight;
use super::error::{ClientBodyError, ProxyError};
use super::{BoxError, ProxyBody};
use crate::metrics::Metrics;

/// The error a stalled request body ends with.
#[derive(Debug, thiserror::Error)]
#[error("request body sent no data for {0:?}")]
pub struct BodyIdle(pub Duration);

/// What happened to a request body, read by the request's handler once the exchange failed:
/// the failure is then the client's (408, 413), not the backend's.
#[derive(Debug, Default)]
pub struct BodyFlags {
    /// The body sent nothing for the idle limit.
    pub idle: AtomicBool,
    /// The body passed its size limit; holds the limit plus one (0: not passed).
    over: AtomicU64,
    /// Body bytes received so far (for the access log).
    received: AtomicU64,
}

impl BodyFlags {
    /// A failed exchange whose client body stalled (`idle_limit`) or passed its size limit is
    /// the client's fault (408, 413), not the backend's.
    pub fn blame<T>(
        &self,
        served: Result<T, ProxyError>,
        idle_limit: Duration,
        metrics: &Metrics,
    ) -> Result<T, ProxyError> {
        match served {
            Err(_) if self.idle.load(Ordering::Acquire) => Err(ProxyError::BodyTimeout(idle_limit)),
            Err(_) => match self.passed_limit() {
                Some(max) => {
                    metrics.policy_denied.with_label_values(&["body"]).inc();
                    Err(ProxyError::RequestBodyTooLarge(max))
                }
                None => served,
            },
            ok => ok,
        }
    }

    /// The size limit the body passed, if it did.
    pub fn passed_limit(&self) -> Option<u64> {
        match self.over.load(Ordering::Acquire) {
            0 => None,
            n => Some(n - 1),
        }
    }
}

/// The client's request body, aborted with [`BodyIdle`] when no frame arrives for the limit
/// while someone is waiting for one; its other errors are marked [`ClientBodyError`], so a
/// malformed body is blamed on the client (400), never on the backend. The timer runs only while the body is polled and pending,
/// so a slow upstream that does not read is not blamed on the client. The timer is made the
/// first time the body waits: most requests have no body and never need one. With a size
/// limit ([`ClientBody::limit_size`]) it fails with [`super::policy::TooLarge`] at the frame
/// that passes it.
pub struct ClientBody {
    inner: Incoming,
    limit: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
    armed: bool,
    flags: Arc<BodyFlags>,
    max: Option<u64>,
    seen: u64,
}

impl ClientBody {
    /// Wraps `inner`; `flags` tell whether the body was aborted for idleness or size.
    pub fn new(inner: Incoming, limit: Duration, flags: Arc<BodyFlags>) -> Self {
        Self {
            inner,
            limit,
            sleep: None,
            armed: false,
            flags,
            max: None,
            seen: 0,
        }
    }

    /// Fails the body once more than `max` bytes arrived.
    pub fn limit_size(&mut self, max: u64) {
        self.max = Some(max);
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
                if let Some(data) = frame.as_ref().and_then(|f| f.as_ref().ok()?.data_ref()) {
                    this.seen = this.seen.saturating_add(data.len() as u64);
                    this.flags.received.store(this.seen, Ordering::Relaxed);
                    if let Some(max) = this.max.filter(|max| this.seen > *max) {
                        this.flags
                            .over
                            .store(max.saturating_add(1), Ordering::Release);
                        return Poll::Ready(Some(Err(super::policy::TooLarge(max).into())));
                    }
                }
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
                    this.flags.idle.store(true, Ordering::Release);
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
/// the connection ended), and writes the request's access log line then.
pub(crate) struct Tracked {
    inner: ProxyBody,
    _in_flight: InFlight,
    /// The endpoint that answered: the request counts as in flight on it until the body is sent.
    _endpoint: Option<Picked>,
    /// The access log line to complete and write when the body is done.
    log: Option<(Box<Entry>, Arc<BodyFlags>)>,
}

impl Tracked {
    pub(crate) fn new(
        inner: ProxyBody,
        in_flight: InFlight,
        endpoint: Option<Picked>,
        log: Option<(Box<Entry>, Arc<BodyFlags>)>,
    ) -> Self {
        Self {
            inner,
            _in_flight: in_flight,
            _endpoint: endpoint,
            log,
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some((entry, flags)) = self.log.as_mut() {
            entry.request_bytes = flags.received.load(Ordering::Relaxed);
            entry.emit();
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
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let (Some((entry, _)), Poll::Ready(Some(Ok(frame)))) = (this.log.as_mut(), &polled) {
            if let Some(data) = frame.data_ref() {
                entry.response_bytes += data.len() as u64;
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
