//! `RequestMirror` in the data plane: the request body is teed, chunk by chunk, into one bounded
//! channel per mirror, and each mirror's copy is sent on a task of its own, fire and forget.
//! A mirror that cannot keep up loses its copy (its request is aborted); the main request is
//! never delayed, never fails because of a mirror, and never waits for a mirror's answer.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use crate::proxy::body::ClientBody;
use bytes::Bytes;
use http::Request;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use crate::proxy::body::BoxError;
use crate::proxy::body::{empty_upstream_body, UpstreamBody};
use crate::proxy::upstream::client::Upstreams;
use crate::table::UpstreamProtocol;

/// Body chunks buffered per mirror before the mirror loses its copy.
pub const MIRROR_QUEUE_CHUNKS: usize = 16;

/// A mirrored exchange (connect, send, read the answer) is abandoned after this long.
pub const MIRROR_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a mirror's copy of the body ended before the original did.
#[derive(Debug, thiserror::Error)]
#[error("mirror copy lost: the mirror fell behind or the request body ended early")]
pub struct MirrorLost;

/// The sending side of one mirror's copy.
struct Sink {
    tx: mpsc::Sender<Bytes>,
    complete: Arc<AtomicBool>,
}

impl Sink {
    /// Marks the copy complete; dropping the sink then ends the mirror's body cleanly.
    fn finish(self) {
        self.complete.store(true, Ordering::Release);
    }
}

/// The main request's body: passes every frame through and offers each data chunk to the
/// mirrors without waiting (`try_send`).
pub struct TeeBody {
    inner: ClientBody,
    sinks: Vec<Sink>,
}

impl TeeBody {
    fn finish_all(&mut self) {
        for s in self.sinks.drain(..) {
            s.finish();
        }
    }
}

impl Body for TeeBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    // A full or closed channel drops that mirror's sink: its copy is lost.
                    this.sinks.retain(|s| s.tx.try_send(data.clone()).is_ok());
                }
                // A sized body may never be polled past its last chunk.
                if this.inner.is_end_stream() {
                    this.finish_all();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(e)) => {
                this.sinks.clear();
                Poll::Ready(Some(Err(e)))
            }
            None => {
                this.finish_all();
                Poll::Ready(None)
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

/// One mirror's copy of the body, fed by a [`TeeBody`]. Ends with [`MirrorLost`] when the tee
/// dropped it before the original body was complete.
pub struct MirrorBody {
    rx: mpsc::Receiver<Bytes>,
    complete: Arc<AtomicBool>,
    hint: SizeHint,
}

impl Body for MirrorBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match ready!(this.rx.poll_recv(cx)) {
            Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            None if this.complete.load(Ordering::Acquire) => Poll::Ready(None),
            None => Poll::Ready(Some(Err(Box::new(MirrorLost)))),
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.hint
    }
}

/// Splits `body` into the main request's body and `copies` mirror bodies.
pub fn tee(body: ClientBody, copies: usize) -> (UpstreamBody, Vec<UpstreamBody>) {
    if body.is_end_stream() {
        let empty = empty_upstream_body;
        return (body.boxed_unsync(), (0..copies).map(|_| empty()).collect());
    }
    let hint = body.size_hint();
    let mut sinks = Vec::with_capacity(copies);
    let mut bodies = Vec::with_capacity(copies);
    for _ in 0..copies {
        let (tx, rx) = mpsc::channel(MIRROR_QUEUE_CHUNKS);
        let complete = Arc::new(AtomicBool::new(false));
        sinks.push(Sink {
            tx,
            complete: complete.clone(),
        });
        bodies.push(MirrorBody { rx, complete, hint }.boxed_unsync());
    }
    let main = TeeBody { inner: body, sinks }.boxed_unsync();
    (main, bodies)
}

/// Sends one mirror request on its own task and discards the answer (read to the end so the
/// connection can be reused), all within [`MIRROR_TIMEOUT`].
pub fn spawn_mirror(
    upstreams: Upstreams,
    protocol: UpstreamProtocol,
    endpoint: std::net::SocketAddr,
    tls: Option<crate::proxy::upstream::tls::UpstreamTls>,
    req: Request<UpstreamBody>,
) {
    tokio::spawn(async move {
        let exchange = async {
            let resp = upstreams
                .send(protocol, endpoint, tls.as_ref(), req)
                .await
                .map_err(|e| e.error)?;
            let mut body = resp.into_body();
            while let Some(frame) = body.frame().await {
                if frame.is_err() {
                    break;
                }
            }
            Ok::<_, crate::proxy::error::ProxyError>(())
        };
        match tokio::time::timeout(MIRROR_TIMEOUT, exchange).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::debug!(%endpoint, %error, "mirror request failed"),
            Err(_) => tracing::debug!(%endpoint, "mirror request timed out"),
        }
    });
}
