//! Body wrappers of the request path: the client's request body with an idle timer and a
//! minimum data rate (a body that stalls, or trickles a byte now and then, is aborted instead of
//! holding two connections), the client's body as either server side reads it ([`RequestBody`]:
//! hyper for HTTP/2, this proxy's own decoder for HTTP/1.1), and the response body that keeps its connection counted as busy
//! until it has been sent.

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

use crate::metrics::Metrics;
use crate::proxy::error::{ClientBodyError, ProxyError};
use crate::proxy::h1wire::RecvBody;

/// Boxed error of a streamed body.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Body of every response the proxy sends: upstream bodies stream through, own answers are short.
pub type ProxyBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// Body of every request sent upstream: the client's body, possibly teed to mirrors.
pub type UpstreamBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// An empty upstream body: for a request the proxy makes, or one given back to be sent again.
pub fn empty_upstream_body() -> UpstreamBody {
    use http_body_util::BodyExt;
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A client's request body as the connection that received it reads it: hyper's for HTTP/2,
/// the own HTTP/1.1 decoder's, or none (a head that says the request has no body).
pub enum RequestBody {
    Hyper(Incoming),
    H1(RecvBody),
    Empty,
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Self::Hyper(b) => Pin::new(b).poll_frame(cx).map_err(Into::into),
            Self::H1(b) => Pin::new(b).poll_frame(cx).map_err(Into::into),
            Self::Empty => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Hyper(b) => b.is_end_stream(),
            Self::H1(b) => b.is_end_stream(),
            Self::Empty => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Hyper(b) => b.size_hint(),
            Self::H1(b) => b.size_hint(),
            Self::Empty => SizeHint::with_exact(0),
        }
    }
}

/// The error a body ends with when it passes its limit.
#[derive(Debug, thiserror::Error)]
#[error("body larger than {0} bytes")]
pub struct TooLarge(pub u64);

/// The error a stalled request body ends with.
#[derive(Debug, thiserror::Error)]
#[error("request body sent no data for {0:?}")]
pub struct BodyIdle(pub Duration);

/// The error of a request body slower than the minimum data rate.
#[derive(Debug, thiserror::Error)]
#[error("request body slower than {} bytes/s", .0.bytes_per_second)]
pub struct BodyTooSlow(pub MinRate);

/// The slowest a request body may arrive, averaged over the time the proxy waits for it, once
/// the grace period is over: a client that sends a byte just before every idle timeout would
/// otherwise hold a connection (and its upstream connection) for as long as it likes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinRate {
    /// Bytes per second; 0 turns the check off.
    pub bytes_per_second: u64,
    /// Waiting time before the rate counts: slow starts (TCP slow start, a phone waking its
    /// radio) are not punished.
    pub grace: Duration,
}

impl MinRate {
    /// No minimum: gRPC streams may be quiet between messages for as long as the idle limit.
    pub const OFF: MinRate = MinRate {
        bytes_per_second: 0,
        grace: Duration::ZERO,
    };

    /// How long a body that has sent `seen` bytes may have been waited for in total.
    fn allowed_wait(&self, seen: u64) -> Option<Duration> {
        if self.bytes_per_second == 0 {
            return None;
        }
        let earned = Duration::from_secs_f64(seen as f64 / self.bytes_per_second as f64);
        Some(self.grace.max(earned))
    }
}

/// What happened to a request body, read by the request's handler once the exchange failed:
/// the failure is then the client's (408, 413), not the backend's.
#[derive(Debug, Default)]
pub struct BodyFlags {
    /// The body sent nothing for the idle limit.
    pub idle: AtomicBool,
    /// The body arrived slower than the minimum data rate.
    slow: AtomicBool,
    /// The body passed its size limit; holds the limit plus one (0: not passed).
    over: AtomicU64,
    /// Body bytes received so far (for the access log).
    pub(crate) received: AtomicU64,
}

impl BodyFlags {
    /// A failed exchange whose client body stalled (`idle_limit`), trickled (below `rate`) or
    /// passed its size limit is the client's fault (408, 413), not the backend's.
    pub fn blame<T>(
        &self,
        served: Result<T, ProxyError>,
        (idle_limit, rate): (Duration, MinRate),
        metrics: &Metrics,
    ) -> Result<T, ProxyError> {
        match served {
            Err(_) if self.idle.load(Ordering::Acquire) => Err(ProxyError::BodyTimeout(idle_limit)),
            Err(_) if self.slow.load(Ordering::Acquire) => Err(ProxyError::BodyTooSlow(rate)),
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
/// while someone is waiting for one, and with [`BodyTooSlow`] when the bytes received fall
/// behind the minimum rate over the time spent waiting for them; its other errors are marked
/// [`ClientBodyError`], so a malformed body is blamed on the client (400), never on the
/// backend. The timers run only while the body is polled and pending, so a slow upstream that
/// does not read is not blamed on the client. The timer is made the first time the body waits:
/// most requests have no body and never need one. With a size limit
/// ([`ClientBody::limit_size`]) it fails with [`TooLarge`] at the frame that
/// passes it.
pub struct ClientBody {
    inner: RequestBody,
    limit: Duration,
    rate: MinRate,
    sleep: Option<Pin<Box<Sleep>>>,
    /// When the current wait began; `None` while not waiting.
    waiting_since: Option<Instant>,
    /// Time spent waiting for frames before the current wait.
    waited: Duration,
    /// Whether the armed deadline is the rate's (else the idle limit's).
    rate_deadline: bool,
    flags: Arc<BodyFlags>,
    max: Option<u64>,
    seen: u64,
    /// Frames read ahead (external authorization's body forwarding), handed out again first.
    replay: std::collections::VecDeque<Frame<Bytes>>,
}

impl ClientBody {
    /// Wraps `inner`; `flags` tell whether the body was aborted for idleness, slowness or size.
    pub fn new(
        inner: RequestBody,
        (limit, rate): (Duration, MinRate),
        flags: Arc<BodyFlags>,
    ) -> Self {
        Self {
            inner,
            limit,
            rate,
            sleep: None,
            waiting_since: None,
            waited: Duration::ZERO,
            rate_deadline: false,
            flags,
            max: None,
            seen: 0,
            replay: Default::default(),
        }
    }

    /// Arms the timer for a wait beginning `now`: the idle limit, or sooner the moment the
    /// bytes seen so far stop paying for the total time waited.
    fn arm(&mut self, now: Instant) {
        let idle = now + self.limit;
        let by_rate = self
            .rate
            .allowed_wait(self.seen)
            .map(|allowed| now + allowed.saturating_sub(self.waited));
        let (deadline, rate) = match by_rate {
            Some(r) if r < idle => (r, true),
            _ => (idle, false),
        };
        self.rate_deadline = rate;
        self.waiting_since = Some(now);
        match &mut self.sleep {
            Some(sleep) => sleep.as_mut().reset(deadline),
            None => self.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
    }

    /// Fails the body once more than `max` bytes arrived.
    pub fn limit_size(&mut self, max: u64) {
        self.max = Some(max);
    }

    /// Puts `frames`, read ahead of the backend, back in front of the rest of the body.
    pub fn replay(&mut self, frames: Vec<Frame<Bytes>>) {
        self.replay.extend(frames);
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
        if let Some(frame) = this.replay.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some(since) = this.waiting_since.take() {
                    this.waited += since.elapsed();
                }
                if let Some(data) = frame.as_ref().and_then(|f| f.as_ref().ok()?.data_ref()) {
                    this.seen = this.seen.saturating_add(data.len() as u64);
                    this.flags.received.store(this.seen, Ordering::Relaxed);
                    if let Some(max) = this.max.filter(|max| this.seen > *max) {
                        this.flags
                            .over
                            .store(max.saturating_add(1), Ordering::Release);
                        return Poll::Ready(Some(Err(TooLarge(max).into())));
                    }
                }
                Poll::Ready(
                    frame.map(|f| f.map_err(|e| -> BoxError { Box::new(ClientBodyError(e)) })),
                )
            }
            Poll::Pending => {
                if this.waiting_since.is_none() {
                    this.arm(Instant::now());
                }
                let Some(sleep) = this.sleep.as_mut() else {
                    return Poll::Pending;
                };
                if sleep.as_mut().poll(cx).is_ready() {
                    if this.rate_deadline {
                        this.flags.slow.store(true, Ordering::Release);
                        return Poll::Ready(Some(Err(BodyTooSlow(this.rate).into())));
                    }
                    this.flags.idle.store(true, Ordering::Release);
                    return Poll::Ready(Some(Err(BodyIdle(this.limit).into())));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.replay.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let ahead: u64 = self
            .replay
            .iter()
            .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
            .sum();
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(ahead));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(ahead));
        }
        hint
    }
}
