//! When a failed attempt is tried again: the decision itself ([`decide`], a pure function of
//! the attempt's end, the rule's `retry`, the attempts made, the budget and the time left), the
//! limits of the retry budget (kept per Service by
//! [`crate::proxy::upstream::balance::Backends::retry_permit`]: retries in flight stay within a
//! share of its requests in flight, so retries never multiply an outage), the request bodies
//! kept for replay (only small ones), and the backoff between attempts.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, Method, Request, Uri, Version};
use http_body::Body;
use http_body_util::{BodyExt, Full};

use crate::proxy::error::{Fault, ProxyError, TimeoutKind};
use crate::proxy::upstream::client::UpstreamBody;
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

/// Why an attempt is tried again: the `reason` label of `edgeplane_upstream_retries_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Nothing was sent (connect refused or timed out, TLS handshake failed).
    Unsent,
    /// The response status is one the rule's `retry.codes` lists.
    Status,
    /// The attempt's `backendRequest` or upstream response timeout passed.
    Timeout,
    /// The exchange broke after the request was sent (reset, closed).
    Error,
}

impl Reason {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Unsent => "unsent",
            Self::Status => "status",
            Self::Timeout => "timeout",
            Self::Error => "error",
        }
    }
}

/// A failed exchange as the retry decision sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The rule's `timeouts.request` passed: the request as a whole is over.
    RequestTimeout,
    /// The attempt's own timeout passed (`backendRequest`, the upstream response timeout).
    AttemptTimeout,
    /// The backend's fault: connect, TLS or exchange failure.
    Upstream,
    /// Anything else (the client's body broke, no endpoint...): never tried again.
    Other,
}

impl Failure {
    /// The class of `error` (already reclassified by [`ProxyError::blame_client_body`]).
    pub fn of(error: &ProxyError) -> Self {
        match error {
            ProxyError::Timeout {
                kind: TimeoutKind::Request,
                ..
            } => Self::RequestTimeout,
            ProxyError::Timeout { .. } => Self::AttemptTimeout,
            e if e.fault() == Fault::Upstream => Self::Upstream,
            _ => Self::Other,
        }
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The backend answered with this status.
    Answered(u16),
    /// The exchange failed; `unsent` when none of the request reached the backend.
    Failed { failure: Failure, unsent: bool },
}

/// Everything the decision needs besides how the attempt ended.
#[derive(Debug, Clone, Copy)]
pub struct Attempts<'a> {
    /// The rule's `retry`, if any.
    pub policy: Option<&'a RetryPolicy>,
    /// Retries already made (0 after the first attempt).
    pub retries: u32,
    /// The request was kept whole and is safe to send again after the backend saw it.
    pub replayable: bool,
    /// The Service's retry budget has room for one more retry.
    pub budget: bool,
    /// Some endpoint of the Service has not been tried yet.
    pub fresh_endpoint: bool,
    /// Time left before the rule's `timeouts.request` passes (`None`: no such timeout).
    pub left: Option<Duration>,
    /// In `[0, 1)`: how much of the backoff's jitter applies.
    pub jitter: f64,
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// Send the request again after `after`.
    Retry { reason: Reason, after: Duration },
    /// Give the client what the attempt ended with, or the request timeout.
    Stop(Stop),
}

/// Why an attempt is not tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Answered with a status not to retry, or failed in a way that is never retried.
    Final,
    /// The rule's `retry.attempts` (or [`DEFAULT_UNSENT_RETRIES`]) are used up.
    AttemptsExhausted,
    /// The Service's retry budget has no room (counted as `budget_exhausted`).
    BudgetExhausted,
    /// The backoff would end after the rule's `timeouts.request`: the client gets a 504.
    Deadline,
}

/// Retries allowed after the first attempt: the rule's `retry.attempts`, or
/// [`DEFAULT_UNSENT_RETRIES`] (unsent requests only) without a `retry`.
pub fn max_retries(policy: Option<&RetryPolicy>) -> u32 {
    policy.map_or(DEFAULT_UNSENT_RETRIES, |p| p.attempts)
}

/// Why the attempt may go again, if it may at all (attempts, budget and time aside): a request
/// none of which was sent, on any method; a replayable request whose status the rule's `retry`
/// lists, or whose attempt timed out under a `retry`; a replayable request whose exchange broke
/// (also without a `retry`: a pooled connection the backend had closed).
pub fn reason(ended: Ended, policy: Option<&RetryPolicy>, replayable: bool) -> Option<Reason> {
    match ended {
        Ended::Answered(status) => (replayable && policy.is_some_and(|p| p.retries_status(status)))
            .then_some(Reason::Status),
        Ended::Failed { unsent: true, .. } => Some(Reason::Unsent),
        Ended::Failed { failure, .. } => {
            let reason = match failure {
                Failure::AttemptTimeout => Reason::Timeout,
                Failure::Upstream => Reason::Error,
                Failure::RequestTimeout | Failure::Other => return None,
            };
            (replayable && (policy.is_some() || reason == Reason::Error)).then_some(reason)
        }
    }
}

/// The retry decision: whether the attempt may go again ([`reason`]), whether attempts and the
/// budget are left, and how long to wait: a request that never left goes at once to an endpoint
/// not tried yet when the rule has no `retry`; anything else waits the [`backoff`]. A wait that
/// would end after the rule's request timeout stops with [`Stop::Deadline`].
pub fn decide(ended: Ended, attempts: &Attempts<'_>) -> Decision {
    let Some(reason) = reason(ended, attempts.policy, attempts.replayable) else {
        return Decision::Stop(Stop::Final);
    };
    if attempts.retries >= max_retries(attempts.policy) {
        return Decision::Stop(Stop::AttemptsExhausted);
    }
    if !attempts.budget {
        return Decision::Stop(Stop::BudgetExhausted);
    }
    let after = match reason {
        Reason::Unsent if attempts.policy.is_none() && attempts.fresh_endpoint => Duration::ZERO,
        _ => backoff(attempts.policy, attempts.retries + 1, attempts.jitter),
    };
    if attempts.left.is_some_and(|left| after >= left) {
        return Decision::Stop(Stop::Deadline);
    }
    Decision::Retry { reason, after }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(codes: &[u16], attempts: u32) -> RetryPolicy {
        RetryPolicy {
            codes: codes.to_vec(),
            attempts,
            backoff: Some(Duration::from_millis(100)),
        }
    }

    fn attempts(policy: Option<&RetryPolicy>) -> Attempts<'_> {
        Attempts {
            policy,
            retries: 0,
            replayable: true,
            budget: true,
            fresh_endpoint: true,
            left: None,
            jitter: 0.0,
        }
    }

    const BROKEN: Ended = Ended::Failed {
        failure: Failure::Upstream,
        unsent: false,
    };

    #[test]
    fn backoff_doubles_up_to_its_cap_and_never_undercuts_the_policy() {
        let policy = policy(&[500], 5);
        for (retry, low) in [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1000), (9, 1000)] {
            let low = Duration::from_millis(low);
            assert_eq!(backoff(Some(&policy), retry, 0.0), low, "{retry}");
            let most = backoff(Some(&policy), retry, 0.999);
            assert!(most > low && most <= low.mul_f64(1.25), "{retry}: {most:?}");
        }
        assert_eq!(backoff(None, 1, 0.0), DEFAULT_BACKOFF);
    }

    #[test]
    fn a_listed_status_is_retried_after_the_backoff_and_others_are_final() {
        let p = policy(&[503], 2);
        let a = attempts(Some(&p));
        assert_eq!(
            decide(Ended::Answered(503), &a),
            Decision::Retry {
                reason: Reason::Status,
                after: Duration::from_millis(100)
            }
        );
        for status in [200, 404, 500, 502] {
            assert_eq!(
                decide(Ended::Answered(status), &a),
                Decision::Stop(Stop::Final),
                "{status}"
            );
        }
        // Without a `retry`, no status is retried.
        assert_eq!(
            decide(Ended::Answered(503), &attempts(None)),
            Decision::Stop(Stop::Final)
        );
        let second = Attempts { retries: 1, ..a };
        assert_eq!(
            decide(Ended::Answered(503), &second),
            Decision::Retry {
                reason: Reason::Status,
                after: Duration::from_millis(200)
            }
        );
    }

    #[test]
    fn attempts_and_budget_run_out() {
        let p = policy(&[503], 2);
        let spent = Attempts {
            retries: 2,
            ..attempts(Some(&p))
        };
        assert_eq!(
            decide(Ended::Answered(503), &spent),
            Decision::Stop(Stop::AttemptsExhausted)
        );
        let broke = Attempts {
            budget: false,
            ..attempts(Some(&p))
        };
        assert_eq!(
            decide(Ended::Answered(503), &broke),
            Decision::Stop(Stop::BudgetExhausted)
        );
        // Without a `retry`, unsent requests get the default attempts.
        let unsent = Ended::Failed {
            failure: Failure::Upstream,
            unsent: true,
        };
        let default_spent = Attempts {
            retries: DEFAULT_UNSENT_RETRIES,
            ..attempts(None)
        };
        assert_eq!(
            decide(unsent, &default_spent),
            Decision::Stop(Stop::AttemptsExhausted)
        );
    }

    #[test]
    fn timeouts_retry_only_under_a_policy_and_never_past_the_request_timeout() {
        let p = policy(&[], 3);
        let attempt_timeout = Ended::Failed {
            failure: Failure::AttemptTimeout,
            unsent: false,
        };
        assert_eq!(
            decide(attempt_timeout, &attempts(Some(&p))),
            Decision::Retry {
                reason: Reason::Timeout,
                after: Duration::from_millis(100)
            }
        );
        assert_eq!(
            decide(attempt_timeout, &attempts(None)),
            Decision::Stop(Stop::Final)
        );
        let request_timeout = Ended::Failed {
            failure: Failure::RequestTimeout,
            unsent: false,
        };
        assert_eq!(
            decide(request_timeout, &attempts(Some(&p))),
            Decision::Stop(Stop::Final)
        );
        let late = Attempts {
            left: Some(Duration::from_millis(100)),
            ..attempts(Some(&p))
        };
        assert_eq!(decide(BROKEN, &late), Decision::Stop(Stop::Deadline));
        let in_time = Attempts {
            left: Some(Duration::from_millis(101)),
            ..late
        };
        assert!(matches!(
            decide(BROKEN, &in_time),
            Decision::Retry {
                reason: Reason::Error,
                ..
            }
        ));
    }

    #[test]
    fn a_body_that_cannot_be_replayed_goes_again_only_when_none_of_it_was_sent() {
        let p = policy(&[503], 2);
        let kept_none = Attempts {
            replayable: false,
            ..attempts(Some(&p))
        };
        assert_eq!(
            decide(Ended::Answered(503), &kept_none),
            Decision::Stop(Stop::Final)
        );
        assert_eq!(decide(BROKEN, &kept_none), Decision::Stop(Stop::Final));
        let unsent = Ended::Failed {
            failure: Failure::Upstream,
            unsent: true,
        };
        assert!(matches!(
            decide(unsent, &kept_none),
            Decision::Retry {
                reason: Reason::Unsent,
                ..
            }
        ));
    }

    #[test]
    fn an_unsent_request_goes_at_once_to_a_fresh_endpoint_without_a_policy() {
        let unsent = Ended::Failed {
            failure: Failure::Upstream,
            unsent: true,
        };
        assert_eq!(
            decide(unsent, &attempts(None)),
            Decision::Retry {
                reason: Reason::Unsent,
                after: Duration::ZERO
            }
        );
        let all_tried = Attempts {
            fresh_endpoint: false,
            ..attempts(None)
        };
        assert_eq!(
            decide(unsent, &all_tried),
            Decision::Retry {
                reason: Reason::Unsent,
                after: DEFAULT_BACKOFF
            }
        );
        // A broken exchange is retried without a policy too (a closed pooled connection),
        // but a client-side failure never is.
        assert!(matches!(
            decide(BROKEN, &attempts(None)),
            Decision::Retry {
                reason: Reason::Error,
                ..
            }
        ));
        let other = Ended::Failed {
            failure: Failure::Other,
            unsent: false,
        };
        assert_eq!(decide(other, &attempts(None)), Decision::Stop(Stop::Final));
    }

    #[test]
    fn failures_are_classed_by_their_error() {
        let t = |kind| ProxyError::Timeout {
            kind,
            after: Duration::from_secs(1),
        };
        assert_eq!(
            Failure::of(&t(TimeoutKind::Request)),
            Failure::RequestTimeout
        );
        assert_eq!(
            Failure::of(&t(TimeoutKind::BackendRequest)),
            Failure::AttemptTimeout
        );
        assert_eq!(
            Failure::of(&t(TimeoutKind::UpstreamResponse)),
            Failure::AttemptTimeout
        );
        let addr = "127.0.0.1:1".parse().expect("address");
        assert_eq!(
            Failure::of(&ProxyError::ConnectTimeout { addr }),
            Failure::Upstream
        );
        assert_eq!(
            Failure::of(&ProxyError::ClientBody("x".into())),
            Failure::Other
        );
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
