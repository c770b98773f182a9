//! When a failed attempt is tried again: the retry budget of each Service (retries in flight
//! stay within a share of its active requests, so retries never multiply an outage), the
//! request bodies kept for replay (only small ones), and the backoff between attempts.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, Method, Request, Uri, Version};
use http_body::Body;
use http_body_util::{BodyExt, Full};

use super::error::ProxyError;
use super::upstream::UpstreamBody;
use crate::table::{RetryPolicy, ServiceKey};

/// Largest request body kept for replay. A bigger body streams to the backend as it comes and
/// its request is retried only when none of it was sent.
pub const MAX_REPLAY_BODY: u64 = 64 * 1024;

/// Retries after a failure that sent nothing (connect refused, TLS handshake failure) when the
/// rule has no `retry` of its own.
pub const DEFAULT_UNSENT_RETRIES: u32 = 2;

/// Wait before the first retry when the rule's `retry` sets no `backoff`.
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(25);

/// The longest wait between two attempts, as a multiple of the first.
const MAX_BACKOFF_FACTOR: u32 = 10;

/// The budget's share of active requests that may be retries in flight, and its floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLimits {
    /// Percent of a Service's active requests (e.g. 20).
    pub percent: u32,
    /// Retries always allowed in flight however few requests are active.
    pub min_concurrent: usize,
}

impl Default for BudgetLimits {
    fn default() -> Self {
        Self {
            percent: 20,
            min_concurrent: 3,
        }
    }
}

/// Retry budgets by Service, shared across tables.
#[derive(Debug, Default)]
pub struct RetryBudgets {
    limits: BudgetLimits,
    services: RwLock<HashMap<ServiceKey, Arc<Budget>>>,
}

/// One Service's active requests and retries in flight.
#[derive(Debug, Default)]
pub struct Budget {
    active: AtomicUsize,
    retries: AtomicUsize,
}

impl RetryBudgets {
    pub fn new(limits: BudgetLimits) -> Self {
        Self {
            limits,
            services: RwLock::default(),
        }
    }

    /// Counts one request as active on `service` until the guard drops.
    pub fn enter(&self, service: &ServiceKey) -> Active {
        let budget = self.budget(service);
        budget.active.fetch_add(1, Ordering::Relaxed);
        Active {
            budget,
            limits: self.limits,
        }
    }

    fn budget(&self, service: &ServiceKey) -> Arc<Budget> {
        if let Some(b) = self
            .services
            .read()
            .ok()
            .and_then(|m| m.get(service).cloned())
        {
            return b;
        }
        match self.services.write() {
            Ok(mut m) => {
                // Services that left every table and have nothing active are forgotten here,
                // so the map holds only Services in use.
                if m.len() >= 1024 {
                    m.retain(|_, b| Arc::strong_count(b) > 1);
                }
                m.entry(service.clone()).or_default().clone()
            }
            Err(_) => Arc::default(),
        }
    }
}

/// A request active on a Service; it may ask the Service's budget for a retry.
#[derive(Debug)]
pub struct Active {
    budget: Arc<Budget>,
    limits: BudgetLimits,
}

impl Active {
    /// A retry in flight, if the budget allows one more: fewer retries in flight than
    /// `percent` of active requests, or than the floor.
    pub fn try_retry(&self) -> Option<RetryPermit> {
        let active = self.budget.active.load(Ordering::Relaxed);
        let share = active * self.limits.percent as usize / 100;
        let allowed = share.max(self.limits.min_concurrent);
        let taken = self.budget.retries.fetch_add(1, Ordering::AcqRel);
        if taken < allowed {
            Some(RetryPermit {
                budget: self.budget.clone(),
            })
        } else {
            self.budget.retries.fetch_sub(1, Ordering::AcqRel);
            None
        }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.budget.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One retry in flight, counted against its Service's budget until dropped.
#[derive(Debug)]
pub struct RetryPermit {
    budget: Arc<Budget>,
}

impl Drop for RetryPermit {
    fn drop(&mut self) {
        self.budget.retries.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A request kept whole so it can be sent again.
#[derive(Debug, Clone)]
pub struct Replay {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    body: Bytes,
}

impl Replay {
    /// A new copy of the request.
    pub fn request(&self) -> Request<UpstreamBody> {
        let body = Full::new(self.body.clone())
            .map_err(|never| match never {})
            .boxed_unsync();
        let mut req = Request::new(body);
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.version_mut() = self.version;
        *req.headers_mut() = self.headers.clone();
        req
    }
}

/// Reads the body of `req` when it is small enough to keep ([`MAX_REPLAY_BODY`], known from
/// `Content-Length` or an empty body) and returns the request with a [`Replay`]; a larger or
/// unsized body is left streaming and the request gets no replay.
pub async fn keep(
    req: Request<UpstreamBody>,
) -> Result<(Request<UpstreamBody>, Option<Replay>), ProxyError> {
    let length = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if req.body().is_end_stream() {
        let replay = Replay {
            method: req.method().clone(),
            uri: req.uri().clone(),
            version: req.version(),
            headers: req.headers().clone(),
            body: Bytes::new(),
        };
        return Ok((req, Some(replay)));
    }
    if length.is_none_or(|n| n > MAX_REPLAY_BODY) {
        return Ok((req, None));
    }
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| ProxyError::ClientBody(e.to_string()))?
        .to_bytes();
    let replay = Replay {
        method: parts.method,
        uri: parts.uri,
        version: parts.version,
        headers: parts.headers,
        body,
    };
    Ok((replay.request(), Some(replay)))
}

/// Whether a request with `method` may be sent again after the backend saw it (RFC 9110 9.2.2).
pub fn idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// Wait before retry number `retry` (1-based): the policy's backoff doubling with each retry,
/// capped at ten times the first, never less than the backoff itself, plus up to 25% jitter.
pub fn backoff(policy: Option<&RetryPolicy>, retry: u32) -> Duration {
    let base = policy.and_then(|p| p.backoff).unwrap_or(DEFAULT_BACKOFF);
    let doubled = base.saturating_mul(1u32 << retry.saturating_sub(1).min(16));
    let wait = doubled.min(base.saturating_mul(MAX_BACKOFF_FACTOR));
    wait + wait.mul_f64(fastrand::f64() * 0.25)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ServiceKey {
        ServiceKey {
            namespace: "ns".into(),
            name: "svc".into(),
            port: 80,
        }
    }

    #[test]
    fn the_budget_allows_its_floor_then_a_share_of_active_requests() {
        let budgets = RetryBudgets::new(BudgetLimits {
            percent: 20,
            min_concurrent: 2,
        });
        let first = budgets.enter(&key());
        let a = first.try_retry().expect("within the floor");
        let b = first.try_retry().expect("within the floor");
        assert!(first.try_retry().is_none(), "floor of 2 reached");
        drop(a);
        let _c = first.try_retry().expect("a retry ended, one more fits");
        drop(b);
        // 20 active requests: 20% is 4 retries in flight.
        let others: Vec<Active> = (0..19).map(|_| budgets.enter(&key())).collect();
        let permits: Vec<RetryPermit> = (0..3).filter_map(|_| first.try_retry()).collect();
        assert_eq!(permits.len(), 3, "4 allowed, 1 already in flight");
        assert!(others[0].try_retry().is_none());
    }

    #[test]
    fn backoff_doubles_up_to_its_cap_and_never_undercuts_the_policy() {
        let policy = RetryPolicy {
            codes: vec![500],
            attempts: 5,
            backoff: Some(Duration::from_millis(100)),
        };
        for (retry, low) in [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1000), (9, 1000)] {
            let wait = backoff(Some(&policy), retry);
            let low = Duration::from_millis(low);
            assert!(
                wait >= low && wait <= low.mul_f64(1.25),
                "{retry}: {wait:?}"
            );
        }
        assert!(backoff(None, 1) >= DEFAULT_BACKOFF);
    }

    #[tokio::test]
    async fn small_bodies_are_kept_and_large_ones_stream() {
        let req = |len: usize| {
            Request::post("/")
                .header(header::CONTENT_LENGTH, len)
                .body(
                    Full::new(Bytes::from(vec![b'x'; len]))
                        .map_err(|never| match never {})
                        .boxed_unsync(),
                )
                .expect("request")
        };
        let (sent, replay) = keep(req(10)).await.expect("kept");
        let replay = replay.expect("small body kept");
        let again = replay.request().into_body().collect().await.expect("body");
        assert_eq!(again.to_bytes().len(), 10);
        assert_eq!(sent.headers()[header::CONTENT_LENGTH], "10");
        let (_, none) = keep(req(MAX_REPLAY_BODY as usize + 1))
            .await
            .expect("streams");
        assert!(none.is_none());
    }
}
