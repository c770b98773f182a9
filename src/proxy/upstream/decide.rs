//! The retry decision, a pure function ([`decide`]) of how an attempt ended, the rule's
//! `retry`, the retries made, the Service's retry budget and the time left before the request
//! timeout and the retries' time budget: retry after a wait, or stop and say why. `forward`
//! does the I/O around it.

use std::time::Duration;

use crate::proxy::error::{Fault, ProxyError, TimeoutKind};
use crate::proxy::upstream::retry::{backoff, DEFAULT_UNSENT_RETRIES};
use crate::table::RetryPolicy;

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
    /// Time left of the `retry`'s time budget ([`RetryPolicy::within`], counted from the
    /// first attempt; `None`: no budget).
    pub within_left: Option<Duration>,
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
    /// The backoff would end after the retries' time budget: the client gets what the
    /// attempt ended with.
    OutOfTime,
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
    if attempts.within_left.is_some_and(|left| after >= left) {
        return Decision::Stop(Stop::OutOfTime);
    }
    Decision::Retry { reason, after }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::upstream::retry::DEFAULT_BACKOFF;

    fn policy(codes: &[u16], attempts: u32) -> RetryPolicy {
        RetryPolicy {
            codes: codes.to_vec(),
            attempts,
            backoff: Some(Duration::from_millis(100)),
            within: None,
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
            within_left: None,
            jitter: 0.0,
        }
    }

    #[test]
    fn no_retry_starts_past_the_retries_time_budget() {
        let p = policy(&[503], 5);
        let mut a = attempts(Some(&p));
        a.within_left = Some(Duration::from_millis(150));
        assert!(matches!(
            decide(Ended::Answered(503), &a),
            Decision::Retry { .. }
        ));
        a.within_left = Some(Duration::from_millis(50));
        assert_eq!(
            decide(Ended::Answered(503), &a),
            Decision::Stop(Stop::OutOfTime)
        );
        a.within_left = Some(Duration::ZERO);
        assert_eq!(decide(BROKEN, &a), Decision::Stop(Stop::OutOfTime));
    }

    const BROKEN: Ended = Ended::Failed {
        failure: Failure::Upstream,
        unsent: false,
    };

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
}
