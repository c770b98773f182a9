//! The policy checks of a request ([`PolicyState::check_request`]), the state they keep across
//! tables, and the declared body size checks.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;

use http::HeaderMap;

use super::body::content_length;
use super::concurrency::{Concurrency, Slot};
use super::hashing::HashLimits;
use super::ip::client_ip;
use super::{basic, hashing, ip, jwt, ratelimit};

use http::Request;

use crate::metrics::Metrics;
use crate::proxy::body::ClientBody;
use crate::proxy::error::ProxyError;
use crate::proxy::trusted::TrustedProxies;
use crate::table::{RateLimitKey, RequestPolicy, RouteRef, RouteRule, VirtualHost};
use ratelimit::{KeyValue, RateLimits};

/// Policy state shared by every connection and kept across tables.
#[derive(Debug)]
pub(crate) struct PolicyState {
    rates: RateLimits,
    in_progress: Arc<Concurrency>,
    verified: basic::Verified,
    hashing: hashing::HashPool,
}

/// `Retry-After` of a request refused because the basic-auth pool is full: a queue drains in
/// well under a second at the default limits.
const HASHING_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// The policy in effect for a request: the rule's settings over the host's. Borrowed when only
/// one of them has a policy, so requests under one policy allocate nothing here.
pub(crate) fn effective<'a>(
    rule: Option<&'a Arc<RequestPolicy>>,
    host: Option<&'a Arc<RequestPolicy>>,
) -> Option<Cow<'a, RequestPolicy>> {
    match (rule, host) {
        (None, None) => None,
        (Some(one), None) | (None, Some(one)) => Some(Cow::Borrowed(&**one)),
        (Some(rule), Some(host)) => Some(Cow::Owned(rule.over(host))),
    }
}

/// The external authorization checks a request is under, in order: its effective
/// TrafficPolicy's `externalAuth` (the rule's, else its host's), then the rule's
/// `ExternalAuth` filters.
pub(crate) fn external_auths<'a>(
    rule: &'a RouteRule,
    vhost: &'a VirtualHost,
) -> impl Iterator<Item = &'a crate::table::ExternalAuth> {
    let policy = rule
        .filters
        .policy
        .as_ref()
        .and_then(|p| p.external_auth.as_ref())
        .or_else(|| vhost.policy.as_ref()?.external_auth.as_ref());
    policy
        .into_iter()
        .chain(
            rule.filters
                .external_auth
                .iter()
                .flat_map(|list| list.iter()),
        )
        .map(|a| &**a)
}

/// What a policy check needs to know of the request besides its headers.
pub(crate) struct Subject<'a> {
    /// The client address ([`client_ip`]).
    pub client: IpAddr,
    /// The matched route, for per-route rate limits.
    pub route: &'a RouteRef,
}

impl PolicyState {
    /// Fresh state, with bcrypt verifications bounded by `hashing`.
    pub(crate) fn new(hashing: HashLimits, metrics: Arc<Metrics>) -> Self {
        Self {
            rates: RateLimits::default(),
            in_progress: Arc::default(),
            verified: basic::Verified::default(),
            hashing: hashing::HashPool::new(hashing, metrics),
        }
    }

    /// Runs every check of `policy` in order; the first refusal is the answer, counted in
    /// `edgeplane_policy_denied_total{reason}`. JWT claims may be added to `headers`. Under a
    /// concurrency limit, the request's place, to hold until its response is done.
    pub(crate) async fn check(
        &self,
        policy: &RequestPolicy,
        subject: &Subject<'_>,
        headers: &mut HeaderMap,
        metrics: &Metrics,
    ) -> Result<Option<Slot>, ProxyError> {
        let denied = |reason: &str, err: ProxyError| {
            metrics.policy_denied.with_label_values(&[reason]).inc();
            Err(err)
        };
        if let Some(access) = &policy.ip_access {
            if let Some(name) = &access.refuse_all {
                return denied("invalid_policy", ProxyError::PolicyInvalid(name.clone()));
            }
            if !ip::allowed(access, subject.client) {
                return denied("ip", ProxyError::IpDenied(subject.client));
            }
        }
        if let Some(limit) = &policy.rate_limit {
            let key = match &limit.key {
                RateLimitKey::ClientIp => KeyValue::Ip(subject.client),
                RateLimitKey::Header(name) => KeyValue::Bytes(
                    headers
                        .get(name.as_str())
                        .map_or(&b""[..], |v| v.as_bytes()),
                ),
                RateLimitKey::Route => {
                    KeyValue::Route(subject.route.namespace(), subject.route.name())
                }
            };
            if let Err(retry_after) = self.rates.take(limit, key) {
                return denied("rate_limit", ProxyError::RateLimited { retry_after });
            }
        }
        // Taken before authentication, as nginx's `limit_conn`; a later refusal drops it.
        let slot = match &policy.concurrency_limit {
            Some(limit) => match self.in_progress.acquire(limit, subject.client) {
                Some(slot) => Some(slot),
                None => {
                    let err = ProxyError::ConcurrencyLimited(limit.per_client);
                    return denied("concurrency_limit", err);
                }
            },
            None => None,
        };
        // Two credentials: one could be verified and the other believed by the backend.
        if (policy.basic_auth.is_some() || policy.jwt.is_some())
            && headers
                .get_all(http::header::AUTHORIZATION)
                .iter()
                .nth(1)
                .is_some()
        {
            return denied(
                "duplicate_authorization",
                ProxyError::DuplicateAuthorization,
            );
        }
        if let Some(auth) = &policy.basic_auth {
            let checked = basic::check(auth, headers, &self.verified, &self.hashing, metrics).await;
            match checked {
                Ok(()) => {}
                Err(basic::BasicError::Busy) => {
                    return Err(ProxyError::AuthBusy {
                        retry_after: HASHING_RETRY_AFTER,
                    })
                }
                Err(e) => {
                    let err = ProxyError::Unauthorized {
                        challenge: basic::challenge(auth),
                        reason: e.to_string(),
                    };
                    return denied("basic_auth", err);
                }
            }
        }
        if let Some(auth) = &policy.jwt {
            if let Err(e) = jwt::check(auth, headers) {
                let err = ProxyError::Unauthorized {
                    challenge: jwt::challenge(&e),
                    reason: e.to_string(),
                };
                return denied("jwt", err);
            }
        }
        Ok(slot)
    }
}

/// 413 when the declared body is over `max`; counted as a `body` refusal.
pub(crate) fn check_declared_body(
    headers: &HeaderMap,
    max: u64,
    metrics: &Metrics,
) -> Result<(), ProxyError> {
    match content_length(headers) {
        Some(n) if n > max => {
            metrics.policy_denied.with_label_values(&["body"]).inc();
            Err(ProxyError::RequestBodyTooLarge(max))
        }
        _ => Ok(()),
    }
}

/// What the policy phase needs of the connection a request came on.
pub(crate) struct Caller<'a> {
    /// The connection's peer.
    pub peer: IpAddr,
    /// Whose forwarded headers name the client (`--trusted-proxies` or the listener's).
    pub trusted: &'a TrustedProxies,
    /// The listener's request body limit, if it sets one.
    pub max_request_body: Option<u64>,
}

impl PolicyState {
    /// Phase 5b: the TrafficPolicy of the rule over its host's: access checks, then the body
    /// limit (the policy's or the listener's, the lower one).
    pub(crate) async fn check_request(
        &self,
        caller: Caller<'_>,
        req: &mut Request<ClientBody>,
        rule: &RouteRule,
        vhost: &VirtualHost,
        metrics: &Metrics,
    ) -> Result<Admitted, ProxyError> {
        let effective = effective(rule.filters.policy.as_ref(), vhost.policy.as_ref());
        let mut body_limit = caller.max_request_body;
        let mut response_limit = None;
        let mut slot = None;
        if let Some(p) = effective.as_deref() {
            let subject = Subject {
                client: client_ip(caller.peer, caller.trusted, req.headers()),
                route: &rule.route,
            };
            slot = self.check(p, &subject, req.headers_mut(), metrics).await?;
            body_limit = match (body_limit, p.max_request_body) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            response_limit = p.max_response_body;
        }
        if let Some(max) = body_limit {
            check_declared_body(req.headers(), max, metrics)?;
            req.body_mut().limit_size(max);
        }
        Ok(Admitted {
            response_limit,
            slot,
        })
    }
}

/// What a request that passed the policy phase carries on.
#[derive(Debug)]
pub(crate) struct Admitted {
    /// The policy's response body limit.
    pub response_limit: Option<u64>,
    /// Its place under the policy's concurrency limit, held until the response is done.
    pub slot: Option<Slot>,
}

/// 502 when the upstream response declares a body over the policy's limit `max`: nothing has
/// been sent to the client yet, so it gets a clean error instead of a cut body.
pub(crate) fn check_declared_response<B>(
    resp: &http::Response<B>,
    max: Option<u64>,
) -> Result<(), ProxyError> {
    match max {
        Some(max) if content_length(resp.headers()).is_some_and(|n| n > max) => {
            Err(ProxyError::ResponseBodyTooLarge(max))
        }
        _ => Ok(()),
    }
}

/// JWT validation exactly as the request path does it, on a bare token: the accepting
/// provider's name and the token's claims, or why it is refused. For fuzzing and tests.
pub fn validate_jwt(
    auth: &crate::table::JwtAuth,
    token: &str,
    now: u64,
) -> Result<(String, serde_json::Map<String, serde_json::Value>), String> {
    jwt::validate(auth, token, now)
        .map(|(provider, claims)| (provider.name.clone(), claims))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::IpAccess;

    #[tokio::test]
    async fn route_keyed_limits_count_each_route_apart() {
        let policy = RequestPolicy {
            rate_limit: Some(Arc::new(crate::table::RateLimit {
                id: "default/p".into(),
                requests: 1,
                per: std::time::Duration::from_secs(60),
                capacity: 1,
                key: RateLimitKey::Route,
            })),
            ..Default::default()
        };
        let metrics = Metrics::new();
        let state = PolicyState::new(HashLimits::default(), metrics.clone());
        let route = |name: &str| RouteRef::new("HTTPRoute", "default", name);
        let (a, b) = (route("a"), route("b"));
        let mut headers = HeaderMap::new();
        let mut results = Vec::new();
        for route in [&a, &a, &b] {
            let subject = Subject {
                client: "192.0.2.1".parse().unwrap(),
                route,
            };
            let checked = state.check(&policy, &subject, &mut headers, &metrics).await;
            results.push(checked.is_ok());
        }
        assert_eq!(results, [true, false, true]);
    }

    #[test]
    fn the_rule_overrides_the_host_setting_by_setting() {
        let host = Arc::new(RequestPolicy {
            ip_access: Some(Arc::new(IpAccess::default())),
            max_request_body: Some(10),
            ..Default::default()
        });
        let rule = Arc::new(RequestPolicy {
            max_request_body: Some(5),
            ..Default::default()
        });
        assert!(effective(None, None).is_none());
        let merged = effective(Some(&rule), Some(&host)).unwrap();
        assert_eq!(merged.max_request_body, Some(5));
        assert!(merged.ip_access.is_some());
        assert!(matches!(
            effective(None, Some(&host)),
            Some(Cow::Borrowed(_))
        ));
    }
}
