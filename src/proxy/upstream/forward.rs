//! Phase 8 of a request: the upstream exchange, the I/O around the retry decision. Picks an
//! endpoint of the Service (balancer, session, health), sends the request within the rule's
//! timeouts, reports the outcome to the endpoint's passive health state, and asks
//! [`decide::decide`] whether to go again (what is safe to retry is said there). Every retry goes
//! to another endpoint when there is one and needs the Service's retry budget.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use http::{Request, Response};
use http_body::Body;

use crate::metrics::{BackendSeries, Metrics};
use crate::proxy::body::UpstreamBody;
use crate::proxy::error::{Fault, ProxyError, TimeoutKind};
use crate::proxy::upstream::balance::Backends;
use crate::proxy::upstream::balance::{hash_key, Outcome, PickRequest, Picked};
use crate::proxy::upstream::client::SendError;
use crate::proxy::upstream::client::Upstreams;
use crate::proxy::upstream::decide::{self, Attempts, Decision, Ended, Failure, Stop};
use crate::proxy::upstream::h1::SendIdle;
use crate::proxy::upstream::pool::ResponseBody;
use crate::proxy::upstream::retry::{self, idempotent};
use crate::proxy::upstream::tls::UpstreamTls;
use crate::proxy::upstream::trail::Trail;
use crate::table::{RetryPolicy, ServiceBackend, Timeouts, UpstreamProtocol};
use prometheus::Histogram;

tokio::task_local! {
    /// Where the connection pools put the time a new upstream connection took, while an
    /// attempt of a request whose backend has series runs (the pools are shared by every
    /// backend and know only endpoints).
    pub(crate) static CONNECT_TIMES: Histogram;
}

/// Observes a connection's opening time into the attempt's backend, if it has series.
pub(crate) fn observe_connect(took: std::time::Duration) {
    let _ = CONNECT_TIMES.try_with(|h| h.observe(took.as_secs_f64()));
}

/// What the upstream phase works with, borrowed from the proxy's shared state.
pub(crate) struct Upstream<'a> {
    /// Endpoint choice, health and the retry budgets.
    pub backends: &'a Backends,
    /// The pooled clients.
    pub clients: &'a Upstreams,
    pub metrics: &'a Metrics,
    /// The proxy's upstream response timeout (`--upstream-timeout`).
    pub response_timeout: Duration,
}

/// Everything an exchange needs besides the request.
pub(crate) struct Exchange<'a> {
    /// The client's address: the key of source-IP hashing.
    pub client: IpAddr,
    pub service: &'a ServiceBackend,
    pub protocol: UpstreamProtocol,
    pub tls: Option<&'a UpstreamTls>,
    pub timeouts: Timeouts,
    /// The rule's send idle limit ([`crate::table::RuleFilters::backend_send_idle`]).
    pub send_idle: Option<Duration>,
    /// The rule's `retry`, if any.
    pub retry: Option<&'a RetryPolicy>,
    /// The endpoint the request's session is bound to.
    pub pinned: Option<SocketAddr>,
    /// A protocol upgrade: its body is a tunnel, never kept for replay.
    pub upgrade: bool,
    /// When the request arrived (`timeouts.request` counts from here).
    pub start: Instant,
    /// The backend's series (connect and first-byte times, timeouts), when the table has
    /// them.
    pub series: Option<&'a BackendSeries>,
}

/// How one attempt ended. The common variant is the large one on purpose: boxing it would
/// allocate on every request.
#[allow(clippy::large_enum_variant)]
enum Attempted {
    /// With a response that stands.
    Done(Response<ResponseBody>, Picked),
    /// With what the client gets if it is not tried again, how it ended, and the request
    /// when none of it reached the backend, or when the pool gave back a request it sent
    /// ([`SendError::sent`]). Boxed: the rare path.
    Again(Box<Again>),
}

/// What a failed attempt leaves: what the client gets if it is not tried again, how it ended,
/// and the request given back unsent or sent.
type Again = (
    Failed,
    Ended,
    Option<Box<Request<UpstreamBody>>>,
    Option<Box<Request<UpstreamBody>>>,
);

/// A failed attempt: what the client gets if it is not tried again.
enum Failed {
    /// Boxed: failures are the rare path, and the response head is large.
    Response(Box<(Response<ResponseBody>, Picked)>),
    Error(ProxyError),
}

impl Failed {
    /// What the client gets: the response as it came, or the error.
    fn into_result(self) -> Result<(Response<ResponseBody>, Picked), ProxyError> {
        match self {
            Self::Response(answered) => Ok(*answered),
            Self::Error(error) => Err(error),
        }
    }
}

impl Upstream<'_> {
    /// Sends `req` to an endpoint of the exchange's Service, retrying as the module says, and
    /// returns the response head with the endpoint it came from (held while the body streams).
    /// `trail` gets the retries, the upstream time and, when it records them, the attempts.
    pub(crate) async fn forward(
        &self,
        exchange: Exchange<'_>,
        req: Request<UpstreamBody>,
        trail: &mut Trail,
    ) -> Result<(Response<ResponseBody>, Picked), ProxyError> {
        let began = Instant::now();
        let result = self.attempts(exchange, req, trail).await;
        trail.upstream_time = Some(began.elapsed());
        result
    }

    /// The attempts of [`Upstream::forward`].
    async fn attempts(
        &self,
        exchange: Exchange<'_>,
        req: Request<UpstreamBody>,
        trail: &mut Trail,
    ) -> Result<(Response<ResponseBody>, Picked), ProxyError> {
        let service = exchange.service;
        let policy = exchange.retry;
        let safe = idempotent(req.method());
        let bodyless_safe = !exchange.upgrade && safe && req.body().is_end_stream();
        // Without a `retry`, a body-less idempotent request goes again when its exchange broke
        // (a pooled connection the backend had closed). The HTTP/1.1 pool gives such a request
        // back when its exchange fails (`SendError::sent`), so nothing is copied beforehand.
        let given_back =
            policy.is_none() && bodyless_safe && exchange.protocol == UpstreamProtocol::Http1;
        // Under a `retry`, small bodies are kept (a status or a timeout is retried after the
        // request was consumed); without one, body-less idempotent requests the pool does not
        // give back.
        let keep = !exchange.upgrade && (policy.is_some() || (bodyless_safe && !given_back));
        let (mut req, replay) = if keep {
            retry::keep(req).await?
        } else {
            (req, None)
        };
        // Kept, and safe to send again after the backend saw it.
        let replayable = replay.as_ref().filter(|_| safe);
        let deadline = exchange.timeouts.request.map(|d| exchange.start + d);
        // Computed once: every attempt of a hashed request looks up the same key.
        let hash = hash_key(&service.balance, req.headers(), req.uri(), exchange.client);
        let mut tried: Vec<SocketAddr> = Vec::new();
        let mut retries = 0;
        // The retries' time budget counts from the first attempt.
        let within = policy.and_then(|p| p.within).map(|d| Instant::now() + d);
        let mut _permit = None;
        loop {
            let pick = PickRequest {
                hash,
                pinned: exchange.pinned.filter(|_| tried.is_empty()),
                exclude: &tried,
            };
            let picked = self.backends.pick(service, &pick)?;
            tried.push(picked.addr);
            let (addr, why, began) = (picked.addr, picked.why, Instant::now());
            let (failed, ended, unsent, sent) = match self
                .attempt(&exchange, picked, req, replayable.is_some())
                .await
            {
                Attempted::Done(resp, picked) => {
                    trail.attempt(addr, why, began, || answered(&resp));
                    return Ok((resp, picked));
                }
                Attempted::Again(again) => *again,
            };
            trail.attempt(addr, why, began, || match &failed {
                Failed::Response(answer) => answered(&answer.0),
                Failed::Error(error) => error.to_string(),
            });
            // Safe to send again after the backend saw it: kept, or given back.
            let sent = sent.filter(|_| safe);
            let again = replayable.is_some() || sent.is_some();
            // The budget is asked only for a retry the attempts allow.
            let wanted = decide::reason(ended, policy, again).is_some()
                && retries < decide::max_retries(policy);
            let permit = wanted
                .then(|| {
                    self.backends
                        .retry_permit(&service.service, service.limits.as_deref())
                })
                .flatten();
            let attempts = Attempts {
                policy,
                retries,
                replayable: again,
                budget: permit.is_some(),
                fresh_endpoint: service.endpoints.iter().any(|e| !tried.contains(e)),
                left: deadline.map(|d| d.saturating_duration_since(Instant::now())),
                within_left: within.map(|d| d.saturating_duration_since(Instant::now())),
                jitter: fastrand::f64(),
            };
            let decision = decide::decide(ended, &attempts);
            trail.decided(&decision);
            let (reason, wait) = match decision {
                Decision::Retry { reason, after } => (reason, after),
                Decision::Stop(Stop::Deadline) => {
                    if let Some(series) = exchange.series {
                        series.timeouts.inc();
                    }
                    return Err(ProxyError::Timeout {
                        kind: TimeoutKind::Request,
                        after: exchange.timeouts.request.unwrap_or_default(),
                    });
                }
                Decision::Stop(stop) => {
                    if stop == Stop::BudgetExhausted {
                        self.count_retry(service, "budget_exhausted");
                    }
                    return failed.into_result();
                }
            };
            // `decide` retries only unsent or replayable requests.
            req = match (unsent, sent, replayable) {
                (Some(unsent), _, _) => *unsent,
                (None, Some(sent), _) => *sent,
                (None, None, Some(kept)) => kept.request(),
                (None, None, None) => return failed.into_result(),
            };
            retries += 1;
            trail.retries = retries;
            drop(failed);
            tokio::time::sleep(wait).await;
            self.count_retry(service, reason.label());
            _permit = permit;
        }
    }

    /// One attempt at `picked`: the response when it stands (no retry would be asked for),
    /// else what the client gets if it is not tried again, how it ended and, when none of it
    /// reached the backend, the request.
    async fn attempt(
        &self,
        exchange: &Exchange<'_>,
        picked: Picked,
        mut req: Request<UpstreamBody>,
        replayable: bool,
    ) -> Attempted {
        if let Some(idle) = exchange.send_idle {
            req.extensions_mut().insert(SendIdle(idle));
        }
        // Boxed: the exchange's state is the largest part of a request's future, and every
        // layer above would hold it and move it into place again. Boxed before the timer
        // takes it, so that the timer and its map move a pointer, not the exchange.
        let send = Box::pin(
            self.clients
                .send(exchange.protocol, picked.addr, exchange.tls, req),
        );
        let sent = within_timeouts(
            send,
            exchange.timeouts,
            self.response_timeout,
            exchange.start,
        );
        let began = Instant::now();
        let sent = match exchange.series {
            Some(series) => CONNECT_TIMES.scope(series.connect.clone(), sent).await,
            None => sent.await,
        };
        if let Some(series) = exchange.series {
            match &sent {
                Ok(_) => series.first_byte.observe(began.elapsed().as_secs_f64()),
                Err(SendError {
                    error: ProxyError::Timeout { .. },
                    ..
                }) => series.timeouts.inc(),
                Err(_) => {}
            }
        }
        match sent {
            Ok(resp) => {
                let status = resp.status().as_u16();
                picked.report(outcome_of(status));
                let ended = Ended::Answered(status);
                if decide::reason(ended, exchange.retry, replayable).is_none() {
                    return Attempted::Done(resp, picked);
                }
                Attempted::Again(Box::new((
                    Failed::Response(Box::new((resp, picked))),
                    ended,
                    None,
                    None,
                )))
            }
            Err(SendError {
                error,
                unsent,
                sent,
            }) => {
                let error = error.blame_client_body();
                if error.fault() == Fault::Upstream {
                    picked.report(Outcome::Failure);
                }
                let ended = Ended::Failed {
                    failure: Failure::of(&error),
                    unsent: unsent.is_some(),
                };
                Attempted::Again(Box::new((Failed::Error(error), ended, unsent, sent)))
            }
        }
    }

    fn count_retry(&self, service: &ServiceBackend, reason: &str) {
        // A rare path: the label is formatted here, not held.
        self.metrics
            .upstream_retries
            .with_label_values(&[&service.service.to_string(), reason])
            .inc();
    }
}

/// How the tracer says an attempt was answered.
fn answered<B>(resp: &Response<B>) -> String {
    format!("answered {}", resp.status().as_u16())
}

/// What a response status says of the endpoint's health: any 5xx counts against it (as
/// Envoy's consecutive-5xx detection does); a 4xx is the client's doing.
fn outcome_of(status: u16) -> Outcome {
    match status {
        500..=599 => Outcome::Failure,
        _ => Outcome::Success,
    }
}

/// One attempt, bounded by the rule's `timeouts.request` (counted from the start of the
/// request) and `timeouts.backendRequest` (counted from now), and by the proxy's `upstream`
/// response timeout (from now) whichever ends first.
///
/// A plain function returning the timer around `exchange`, not an `async fn`: an `async fn`
/// keeps its argument and the timer that took it side by side in its state, twice the
/// exchange's size in every request's future.
pub(crate) fn within_timeouts<T, E: From<ProxyError>>(
    exchange: impl Future<Output = Result<T, E>>,
    timeouts: Timeouts,
    upstream: Duration,
    start: Instant,
) -> impl Future<Output = Result<T, E>> {
    let now = Instant::now();
    let (at, kind, after) = [
        timeouts
            .request
            .map(|d| (start + d, TimeoutKind::Request, d)),
        timeouts
            .backend_request
            .map(|d| (now + d, TimeoutKind::BackendRequest, d)),
        Some((now + upstream, TimeoutKind::UpstreamResponse, upstream)),
    ]
    .into_iter()
    .flatten()
    .min_by_key(|(at, _, _)| *at)
    .unwrap_or((now + upstream, TimeoutKind::UpstreamResponse, upstream));
    tokio::time::timeout_at(at.into(), exchange)
        .map(move |sent| sent.unwrap_or_else(|_| Err(E::from(ProxyError::Timeout { kind, after }))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_5xx_counts_against_the_endpoint_and_nothing_else_does() {
        for status in [500, 501, 502, 503, 504, 599] {
            assert_eq!(outcome_of(status), Outcome::Failure, "{status}");
        }
        for status in [200, 204, 301, 404, 429, 499] {
            assert_eq!(outcome_of(status), Outcome::Success, "{status}");
        }
    }
}
