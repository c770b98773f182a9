//! What a request holds until its response body is done: the connection's in-flight mark (its
//! idle timer and the drain read it), the endpoint that answered, the connection's upstream slot,
//! and the access log line: written when the body ends, or with `499` when the client went away
//! before the response head was ready.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::metrics::BackendSeries;
use crate::proxy::access_log::{AccessLogger, Entry};
use crate::proxy::body::{BodyFlags, BoxError, ProxyBody};
use crate::proxy::upstream::balance::Picked;

/// Requests in flight on one connection and since when it has had none. Requests only update
/// the count and the time; nothing is woken per request. The idle timer reads them when it
/// fires and sleeps again until the earliest moment the connection can have been idle long
/// enough, so a busy connection costs one timer per idle period, not one per request.
pub(crate) struct Activity {
    state: Mutex<(usize, Instant)>,
}

impl Activity {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new((0, Instant::now())),
        })
    }

    fn lock(&self) -> MutexGuard<'_, (usize, Instant)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks a request in flight until the returned mark drops.
    pub(crate) fn start(self: &Arc<Self>) -> InFlight {
        self.lock().0 += 1;
        InFlight(self.clone())
    }

    /// The moment the connection will have been idle for `limit`, if nothing starts meanwhile;
    /// `None` while a request is in flight.
    fn idle_deadline(&self, limit: Duration) -> Option<Instant> {
        let (busy, since) = *self.lock();
        (busy == 0).then(|| since + limit)
    }

    /// Resolves once no request has been in flight for `limit`. While requests are in flight
    /// it looks again every `limit`: a request ending between two looks has ended after the
    /// first, so the next look comes before its idle period is over.
    pub(crate) async fn idle_for(&self, limit: Duration) {
        let mut at = self
            .idle_deadline(limit)
            .unwrap_or_else(|| Instant::now() + limit);
        loop {
            tokio::time::sleep_until(at).await;
            let now = Instant::now();
            match self.idle_deadline(limit) {
                Some(due) if due <= now => return,
                Some(due) => at = due,
                None => at = now + limit,
            }
        }
    }
}

/// One request in flight, until its response body is dropped.
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.0 = state.0.saturating_sub(1);
        if state.0 == 0 {
            state.1 = Instant::now();
        }
    }
}

/// What a response holds until its body is sent.
#[derive(Default)]
pub(crate) struct Held {
    /// The endpoint that answered: the request counts as in flight on it.
    pub endpoint: Option<Picked>,
    /// One of the client connection's upstream slots (`--max-upstream-per-client`): the
    /// upstream connection stays busy until the body is through.
    pub share: Option<OwnedSemaphorePermit>,
    /// The index of the rule's backendRef the request went to.
    pub backend: Option<usize>,
    /// The backend's series and the request body's flags: the body bytes each way are added
    /// to its byte counters when the response body is done.
    pub counted: Option<(Arc<BackendSeries>, Arc<BodyFlags>)>,
    /// The request's place under its TrafficPolicy's concurrency limit: the request counts as
    /// in progress for its client until the body is through or the request is cancelled.
    pub concurrency: Option<crate::proxy::policy::Slot>,
}

/// Nginx's status for a request its client abandoned: nothing was sent, but the line says why.
pub(crate) const CLIENT_CLOSED_STATUS: u16 = 499;

/// The access log line of a request whose response head is not ready yet. A request is
/// cancelled when its client goes away (an HTTP/1.1 connection closed, an HTTP/2 stream reset or
/// its connection lost): its future is dropped mid-exchange, and this guard writes the line then,
/// with status 499 and decision `client_closed`, so that no request leaves without a trace.
pub(crate) struct Unanswered {
    /// `None` once handed on ([`Unanswered::answered`]) or left unwritten ([`Unanswered::discard`]).
    entry: Option<Box<Entry>>,
    flags: Arc<BodyFlags>,
    logger: AccessLogger,
}

impl Unanswered {
    pub(crate) fn new(entry: Entry, flags: Arc<BodyFlags>, logger: AccessLogger) -> Self {
        Self {
            entry: Some(Box::new(entry)),
            flags,
            logger,
        }
    }

    /// The line still being filled in.
    pub(crate) fn entry(&mut self) -> Option<&mut Entry> {
        self.entry.as_deref_mut()
    }

    /// The response head is ready: the line moves to the response body ([`Tracked`]).
    pub(crate) fn answered(mut self) -> Option<(Box<Entry>, Arc<BodyFlags>, AccessLogger)> {
        let entry = self.entry.take()?;
        Some((entry, self.flags.clone(), self.logger.clone()))
    }

    /// The request's rule writes no line (an Ingress's `enable-access-log: "false"`).
    pub(crate) fn discard(mut self) {
        self.entry = None;
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if let Some(mut entry) = self.entry.take() {
            entry.status = Some(CLIENT_CLOSED_STATUS);
            entry.decision = Some(crate::proxy::decision::CLIENT_CLOSED);
            entry.request_bytes = self.flags.received.load(Ordering::Relaxed);
            entry.finish(&self.logger);
        }
    }
}

/// A response body that holds its connection's in-flight mark until hyper drops it (sent, or
/// the connection ended), and writes the request's access log line then.
pub(crate) struct Tracked {
    inner: ProxyBody,
    _in_flight: InFlight,
    held: Held,
    /// Response body bytes sent so far.
    sent: u64,
    /// The access log line to complete and write when the body is done.
    log: Option<(Box<Entry>, Arc<BodyFlags>, AccessLogger)>,
}

impl Tracked {
    pub(crate) fn new(
        inner: ProxyBody,
        in_flight: InFlight,
        held: Held,
        log: Option<(Box<Entry>, Arc<BodyFlags>, AccessLogger)>,
    ) -> Self {
        Self {
            inner,
            _in_flight: in_flight,
            held,
            sent: 0,
            log,
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some((backend, flags)) = &self.held.counted {
            backend.response_bytes.inc_by(self.sent);
            backend
                .request_bytes
                .inc_by(flags.received.load(Ordering::Relaxed));
        }
        if let Some((mut entry, flags, logger)) = self.log.take() {
            entry.request_bytes = flags.received.load(Ordering::Relaxed);
            entry.finish(&logger);
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
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                this.sent += data.len() as u64;
                if let Some((entry, _, _)) = this.log.as_mut() {
                    entry.response_bytes += data.len() as u64;
                }
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
