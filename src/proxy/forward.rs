//! Phase 8 of a request: the upstream exchange. Picks an endpoint of the Service (balancer,
//! session, health), sends the request within the rule's timeouts, and reports the outcome to
//! the endpoint's passive health state.

use std::future::Future;
use std::time::{Duration, Instant};

use http::{Request, Response};

use super::balance::{hash_key, Outcome, PickRequest, Picked};
use super::error::ProxyError;
use super::pool::ResponseBody;
use super::service::Handler;
use super::upstream::UpstreamBody;
use super::upstream_tls::UpstreamTls;
use crate::table::{ServiceBackend, Timeouts, UpstreamProtocol};

/// Everything an exchange needs besides the request.
pub(super) struct Exchange<'a> {
    pub service: &'a ServiceBackend,
    pub protocol: UpstreamProtocol,
    pub tls: Option<&'a UpstreamTls>,
    pub timeouts: Timeouts,
    /// When the request arrived (`timeouts.request` counts from here).
    pub start: Instant,
}

impl Handler {
    /// Sends `req` to an endpoint of the exchange's Service and returns the response head with
    /// the endpoint it came from (held while the body streams).
    pub(super) async fn forward(
        &self,
        exchange: Exchange<'_>,
        req: Request<UpstreamBody>,
    ) -> Result<(Response<ResponseBody>, Picked), ProxyError> {
        let hash = hash_key(&exchange.service.balance, req.headers(), self.peer.ip());
        let pick = PickRequest {
            hash,
            ..PickRequest::default()
        };
        let picked = self.shared.backends.pick(exchange.service, &pick)?;
        let send = self
            .shared
            .upstreams
            .send(exchange.protocol, picked.addr, exchange.tls, req);
        let upstream_limit = self.shared.options.upstream_response_timeout;
        let sent = within_timeouts(send, exchange.timeouts, upstream_limit, exchange.start)
            .await
            .map_err(ProxyError::blame_client_body);
        match sent {
            Ok(resp) => {
                picked.report(outcome_of(resp.status().as_u16()));
                Ok((resp, picked))
            }
            Err(err) => {
                if err.fault() == super::Fault::Upstream {
                    picked.report(Outcome::Failure);
                }
                Err(err)
            }
        }
    }
}

/// What a response status says of the endpoint's health: gateway errors count against it.
fn outcome_of(status: u16) -> Outcome {
    match status {
        502..=504 => Outcome::Failure,
        _ => Outcome::Success,
    }
}

/// The upstream exchange, bounded by the rule's `timeouts.request` (counted from the start of
/// the request) and `timeouts.backendRequest` (counted from now), and by the proxy's `upstream`
/// response timeout (from now) whichever ends first.
pub(super) async fn within_timeouts<T>(
    exchange: impl Future<Output = Result<T, ProxyError>>,
    timeouts: Timeouts,
    upstream: Duration,
    start: Instant,
) -> Result<T, ProxyError> {
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
        .map_err(|_| ProxyError::Timeout { which, after })?
}
