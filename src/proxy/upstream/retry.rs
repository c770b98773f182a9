//! What retries need besides the decision (`decide`): the limits of the retry budget (kept per
//! Service by [`crate::proxy::upstream::balance::Backends::retry_permit`]: retries in flight
//! stay within a share of its requests in flight, so retries never multiply an outage), the
//! request bodies kept for replay (only small ones), and the backoff between attempts.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, Method, Request, Uri, Version};
use http_body::Body;
use http_body_util::{BodyExt, Full};

use crate::proxy::body::UpstreamBody;
use crate::proxy::error::ProxyError;
use crate::table::RetryPolicy;

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
/// capped at ten times the first, never less than the backoff itself, plus up to 25% jitter
/// (`jitter` in `[0, 1)` picks how much).
pub fn backoff(policy: Option<&RetryPolicy>, retry: u32, jitter: f64) -> Duration {
    let base = policy.and_then(|p| p.backoff).unwrap_or(DEFAULT_BACKOFF);
    let doubled = base.saturating_mul(1u32 << retry.saturating_sub(1).min(16));
    let wait = doubled.min(base.saturating_mul(MAX_BACKOFF_FACTOR));
    wait + wait.mul_f64(jitter.clamp(0.0, 1.0) * 0.25)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_and_never_undercuts_the_policy() {
        let policy = RetryPolicy {
            codes: vec![500],
            attempts: 5,
            backoff: Some(Duration::from_millis(100)),
            within: None,
        };
        for (retry, low) in [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1000), (9, 1000)] {
            let low = Duration::from_millis(low);
            assert_eq!(backoff(Some(&policy), retry, 0.0), low, "{retry}");
            let most = backoff(Some(&policy), retry, 0.999);
            assert!(most > low && most <= low.mul_f64(1.25), "{retry}: {most:?}");
        }
        assert_eq!(backoff(None, 1, 0.0), DEFAULT_BACKOFF);
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
