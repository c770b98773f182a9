//! Phase 8 of a request: the upstream exchange. Picks an endpoint of the Service (balancer,
//! session, health), sends the request within the rule's timeouts, reports the outcome to the
//! endpoint's passive health state, and tries again where that is safe: a request none of which
//! was sent (refused connection, failed TLS handshake) on any method; a body-less idempotent
//! request whose exchange broke before the response (a pooled connection the backend had
//! closed); and under the rule's `retry` a listed status, a backend timeout or a broken
//! exchange of an idempotent request whose body was kept ([`retry::MAX_REPLAY_BODY`]). Every retry goes to another endpoint when
//! there is one and needs the Service's retry budget.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use http::{Request, Response};
use http_body::Body;

use crate::metrics::Metrics;
use crate::proxy::error::{Fault, ProxyError};
use crate::proxy::upstream::balance::Backends;
use crate::proxy::upstream::balance::{hash_key, Outcome, PickRequest, Picked};
use crate::proxy::upstream::client::Upstreams;
use crate::proxy::upstream::client::{SendError, UpstreamBody};
use crate::proxy::upstream::pool::ResponseBody;
use crate::proxy::upstream::retry::{self, idempotent, DEFAULT_UNSENT_RETRIES};
use crate::proxy::upstream::tls::UpstreamTls;
use crate::table::{RetryPolicy, ServiceBackend, Timeouts, UpstreamProtocol};

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
    /// The rule's `retry`, if any.
    pub retry: Option<&'a RetryPolicy>,
    /// The endpoint the request's session is bound to.
    pub pinned: Option<SocketAddr>,
    /// A protocol upgrade: its body is a tunnel, never kept for replay.
    pub upgrade: bool,
    /// When the request arrived (`timeouts.request` counts from here).
    pub start: Instant,
}

/// Why an attempt is tried again: the `reason` label of `edgeplane_upstream_retries_total`.
#[derive(Debug, Clone, Copy)]
enum Reason {
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
    fn label(self) -> &'static str {
        match self {
            Self::Unsent => "unsent",
            Self::Status => "status",
            Self::Timeout => "timeout",
            Self::Error => "error",
        }
    }
}

/// A failed attempt: what the client gets if it is not tried again.
enum Failed {
    /// Boxed: failures are the rare path, and the response head is large.
    Response(Box<(Response<ResponseBody>, Picked)>),
    Error(ProxyError),
}

impl Upstream<'_> {
    /// Sends `req` to an endpoint of the exchange's Service, retrying as the module says, and
    /// returns the response head with the endpoint it came from (held while the body streams).
    pub(crate) async fn forward(
        &self,
        exchange: Exchange<'_>,
        req: Request<UpstreamBody>,
    ) -> Result<(Response<ResponseBody>, Picked), ProxyError> {
        let service = exchange.service;
        let policy = exchange.retry;
        // Under a `retry`, small bodies are kept; without one, only body-less idempotent
        // requests, so one that broke on a pooled connection can go again.
        let keep = !exchange.upgrade
            && (policy.is_some() || (req.body().is_end_stream() && idempotent(req.method())));
        let (mut req, replay) = if keep {
            retry::keep(req).await?
        } else {
            (req, None)
        };
        // Kept, and safe to send again after the backend saw it.
        let replayable = replay.as_ref().filter(|_| idempotent(req.method()));
        let max_retries = policy.map_or(DEFAULT_UNSENT_RETRIES, |p| p.attempts);
        let deadline = exchange.timeouts.request.map(|d| exchange.start + d);
        // Computed once: every attempt of a hashed request looks up the same key.
        let hash = hash_key(
            &service.balance,
            req.headers(),
            req.uri().query(),
            exchange.client,
        );
        let mut tried: Vec<SocketAddr> = Vec::new();
        let mut retries = 0;
        let mut _permit = None;
        loop {
            let pick = PickRequest {
                hash,
                pinned: exchange.pinned.filter(|_| tried.is_empty()),
                exclude: &tried,
            };
            let picked = self.backends.pick(service, &pick)?;
            tried.push(picked.addr);
            let send = self
                .clients
                .send(exchange.protocol, picked.addr, exchange.tls, req);
            let upstream_limit = self.response_timeout;
            let sent = within_timeouts(send, exchange.timeouts, upstream_limit, exchange.start);
            let (failed, reason, next) = match sent.await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    picked.report(outcome_of(status));
                    match replayable {
                        Some(r) if policy.is_some_and(|p| p.retries_status(status)) => (
                            Failed::Response(Box::new((resp, picked))),
                            Reason::Status,
                            r.request(),
                        ),
                        _ => return Ok((resp, picked)),
                    }
                }
                Err(SendError { error, unsent }) => {
                    let error = error.blame_client_body();
                    if error.fault() == Fault::Upstream {
                        picked.report(Outcome::Failure);
                    }
                    let reason = match &error {
                        ProxyError::Timeout {
                            which: "request", ..
                        } => None,
                        ProxyError::Timeout { .. } => Some(Reason::Timeout),
                        e if e.fault() == Fault::Upstream => Some(Reason::Error),
                        _ => None,
                    };
                    match (unsent, reason, replayable) {
                        (Some(unsent), _, _) => (Failed::Error(error), Reason::Unsent, unsent),
                        (None, Some(reason), Some(r))
                            if policy.is_some() || matches!(reason, Reason::Error) =>
                        {
                            (Failed::Error(error), reason, r.request())
                        }
                        _ => return Err(error),
                    }
                }
            };
            let permit = (retries < max_retries)
                .then(|| {
                    self.backends
                        .retry_permit(&service.service, service.limits.as_deref())
                })
                .flatten();
            let Some(permit) = permit else {
                if retries < max_retries {
                    self.count_retry(service, "budget_exhausted");
                }
                return match failed {
                    Failed::Response(answered) => Ok(*answered),
                    Failed::Error(error) => Err(error),
                };
            };
            retries += 1;
            // A request that never left goes at once to another endpoint; anything else waits.
            let fresh_endpoint = service.endpoints.iter().any(|e| !tried.contains(e));
            let wait = match reason {
                Reason::Unsent if policy.is_none() && fresh_endpoint => Duration::ZERO,
                _ => retry::backoff(policy, retries),
            };
            if let Some(deadline) = deadline {
                if Instant::now() + wait >= deadline {
                    let after = exchange.timeouts.request.unwrap_or_default();
                    return Err(ProxyError::Timeout {
                        which: "request",
                        after,
                    });
                }
            }
            drop(failed);
            tokio::time::sleep(wait).await;
            self.count_retry(service, reason.label());
            _permit = Some(permit);
            req = next;
        }
    }

    fn count_retry(&self, service: &ServiceBackend, reason: &str) {
        self.metrics
            .upstream_retries
            .with_label_values(&[&service.service.to_string(), reason])
            .inc();
    }
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
pub(crate) async fn within_timeouts<T, E: From<ProxyError>>(
    exchange: impl Future<Output = Result<T, E>>,
    timeouts: Timeouts,
    upstream: Duration,
    start: Instant,
) -> Result<T, E> {
    let now = Instant::now();
    let (at, which, after) = [
        timeouts.request.map(|d| (start + d, "request", d)),
        timeouts
            .backend_request
            .map(|d| (now + d, "backendRequest", d)),
        Some((now + upstream, "upstream response", upstream)),
    ]
    .into_iter()
    .flatten()
    .min_by_key(|(at, _, _)| *at)
    .unwrap_or((now + upstream, "upstream response", upstream));
    tokio::time::timeout_at(at.into(), exchange)
        .await
        .map_err(|_| E::from(ProxyError::Timeout { which, after }))?
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
