//! What the upstream phase did with a request, for the access log (`retries`, `upstreamTime`)
//! and the request tracer (each attempt: the endpoint, why the balancer picked it, how it
//! ended and what came next). Attempts are written down only for a request the tracer follows.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::proxy::upstream::balance::Why;
use crate::proxy::upstream::decide::{Decision, Stop};

/// The upstream phase's account of one request.
#[derive(Debug, Default)]
pub(crate) struct Trail {
    /// Attempts after the first.
    pub retries: u32,
    /// From the first attempt's start to the response head that stands (or the last failure).
    pub upstream_time: Option<Duration>,
    /// Every attempt, when the tracer follows the request; `None` records nothing.
    pub attempts: Option<Vec<Attempt>>,
    /// Set when a check before the upstream phase answered the request itself (an external
    /// authorizer's denial): the access log's `decision`.
    pub answered_by: Option<&'static str>,
}

/// One attempt, as `edgeplane trace` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    pub endpoint: SocketAddr,
    /// Why the balancer picked the endpoint.
    pub picked: String,
    /// `answered 503`, or the failure.
    pub ended: String,
    /// `retried (status) after 25ms`, `not retried: retry attempts used up`, or nothing when
    /// the attempt's answer stood.
    pub next: Option<String>,
    /// Microseconds from the attempt's start to its end.
    pub took_us: u64,
}

impl Trail {
    /// A trail that writes down every attempt (the request tracer follows the request).
    pub(crate) fn recording() -> Self {
        Self {
            attempts: Some(Vec::new()),
            ..Self::default()
        }
    }

    /// Writes down an attempt at `endpoint` begun at `began`, when attempts are recorded;
    /// `ended` is only called then.
    pub(crate) fn attempt(
        &mut self,
        endpoint: SocketAddr,
        why: Why,
        began: Instant,
        ended: impl FnOnce() -> String,
    ) {
        if let Some(attempts) = self.attempts.as_mut() {
            attempts.push(Attempt {
                endpoint,
                picked: why.to_string(),
                ended: ended(),
                next: None,
                took_us: u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX),
            });
        }
    }

    /// Notes what the retry decision made of the last attempt.
    pub(crate) fn decided(&mut self, decision: &Decision) {
        let Some(last) = self.attempts.as_mut().and_then(|a| a.last_mut()) else {
            return;
        };
        last.next = Some(match decision {
            Decision::Retry { reason, after } => {
                format!("retried ({}) after {after:?}", reason.label())
            }
            Decision::Stop(stop) => format!("not retried: {}", stop.describe()),
        });
    }
}

impl Stop {
    /// What the tracer says of a request not tried again.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Final => "the answer or failure is not one to retry",
            Self::AttemptsExhausted => "retry attempts used up",
            Self::BudgetExhausted => "the Service's retry budget is used up",
            Self::Deadline => "the backoff would pass the request timeout",
            Self::OutOfTime => "the backoff would pass the retries' time budget",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::upstream::balance::{PickedBy, Tier};
    use crate::proxy::upstream::decide::Reason;

    const WHY: Why = Why {
        by: PickedBy::RoundRobin,
        tier: Tier::Fresh,
        terminating: false,
    };

    #[test]
    fn a_recording_trail_keeps_each_attempt_and_its_sequel() {
        let mut trail = Trail::recording();
        let a: SocketAddr = "10.0.0.1:80".parse().unwrap();
        trail.attempt(a, WHY, Instant::now(), || "answered 503".into());
        trail.decided(&Decision::Retry {
            reason: Reason::Status,
            after: Duration::from_millis(25),
        });
        trail.attempt(a, WHY, Instant::now(), || "answered 503".into());
        trail.decided(&Decision::Stop(Stop::AttemptsExhausted));
        let attempts = trail.attempts.unwrap();
        assert_eq!(attempts.len(), 2);
        assert_eq!(attempts[0].picked, "round robin");
        assert_eq!(
            attempts[0].next.as_deref(),
            Some("retried (status) after 25ms")
        );
        assert_eq!(
            attempts[1].next.as_deref(),
            Some("not retried: retry attempts used up")
        );
    }

    #[test]
    fn a_plain_trail_records_nothing_and_never_formats() {
        let mut trail = Trail::default();
        trail.attempt("10.0.0.1:80".parse().unwrap(), WHY, Instant::now(), || {
            unreachable!("formatted for nobody")
        });
        trail.decided(&Decision::Stop(Stop::Final));
        assert!(trail.attempts.is_none());
    }
}
