//! `TrafficPolicy` spec mappings between `v1alpha1` (flat, one target) and `v1beta1`
//! (grouped, a target list). Each direction gives the closest value the target version can
//! hold; [`super::convert`] keeps the rest. Pure.

use serde_json::Value;

use super::traffic_policy as beta;
use super::v1alpha1::traffic_policy as alpha;

/// `v1alpha1` spec to `v1beta1`. One struct literal, a field of `v1beta1` per entry: long by
/// design, so that where every `v1alpha1` field lands reads in one place.
pub fn up(spec: Value) -> Result<Value, String> {
    let a: alpha::TrafficPolicySpec = serde_json::from_value(spec).map_err(|e| e.to_string())?;
    let any = |xs: &[bool]| xs.iter().any(|x| *x);
    let b = beta::TrafficPolicySpec {
        target_refs: vec![a.target_ref],
        timeouts: any(&[
            a.request_timeout.is_some(),
            a.backend_request_timeout.is_some(),
        ])
        .then_some(beta::PolicyTimeouts {
            request: a.request_timeout,
            backend_request: a.backend_request_timeout,
        }),
        retry: any(&[
            a.retries.is_some(),
            !a.retry_on.is_empty(),
            a.retry_backoff.is_some(),
            a.retry_budget_percent.is_some(),
        ])
        .then(|| beta::PolicyRetry {
            attempts: a.retries,
            codes: a.retry_on,
            backoff: a.retry_backoff,
            budget: a.retry_budget_percent.map(|percent| beta::RetryBudget {
                percent: Some(percent),
                min_retries: None,
            }),
        }),
        load_balancer: any(&[
            a.load_balancing.is_some(),
            a.hash_header.is_some(),
            a.hash_cookie.is_some(),
            a.hash_source_ip.is_some(),
        ])
        .then(|| beta::LoadBalancerPolicy {
            algorithm: a.load_balancing.unwrap_or_default(),
            hash: any(&[
                a.hash_header.is_some(),
                a.hash_cookie.is_some(),
                a.hash_source_ip.is_some(),
            ])
            .then_some(beta::HashKey {
                header: a.hash_header,
                cookie: a.hash_cookie,
                query_parameter: None,
                source_ip: a.hash_source_ip,
                path: None,
                path_and_query: None,
            }),
        }),
        circuit_breaker: any(&[
            a.max_connections.is_some(),
            a.max_pending_requests.is_some(),
            a.max_requests.is_some(),
        ])
        .then_some(beta::CircuitBreakerPolicy {
            max_connections: a.max_connections,
            max_pending_requests: a.max_pending_requests,
            max_requests: a.max_requests,
        }),
        outlier_detection: any(&[
            a.eject_after_errors.is_some(),
            a.ejection_time.is_some(),
            a.max_ejection_percent.is_some(),
        ])
        .then_some(beta::OutlierDetectionPolicy {
            consecutive_errors: a.eject_after_errors,
            base_ejection_time: a.ejection_time,
            max_ejection_percent: a.max_ejection_percent,
        }),
        rate_limit: a.requests_per_second.map(|requests| beta::RateLimitPolicy {
            requests,
            unit: beta::RateLimitUnit::Second,
            burst: a.burst,
            key: None,
        }),
        basic_auth: a.basic_auth_secret.map(|name| beta::BasicAuthPolicy {
            secret_ref: beta::LocalObjectKeyRef { name, key: None },
            realm: a.realm,
        }),
        jwt: any(&[
            a.jwt_issuer.is_some(),
            !a.jwt_audiences.is_empty(),
            a.jwks_secret.is_some(),
        ])
        .then(|| beta::JwtPolicy {
            providers: vec![beta::JwtProvider {
                name: "default".to_owned(),
                issuer: a.jwt_issuer.unwrap_or_default(),
                audiences: a.jwt_audiences,
                jwks: beta::JwksSource {
                    secret_ref: a
                        .jwks_secret
                        .map(|name| beta::LocalObjectKeyRef { name, key: None }),
                    config_map_ref: None,
                },
                claims_to_headers: vec![],
            }],
            optional: None,
        }),
        ip_access: any(&[!a.allow_cidrs.is_empty(), !a.deny_cidrs.is_empty()]).then_some({
            beta::IpAccessPolicy {
                allow: a.allow_cidrs,
                deny: a.deny_cidrs,
            }
        }),
        body_limits: any(&[
            a.max_request_body_bytes.is_some(),
            a.max_response_body_bytes.is_some(),
        ])
        .then_some(beta::BodyLimitsPolicy {
            max_request_bytes: a.max_request_body_bytes,
            max_response_bytes: a.max_response_body_bytes,
        }),
        // v1alpha1 has no external authorization: a round trip restores it from the
        // conversion annotation.
        external_auth: None,
        // Nor a concurrency limit: restored the same way.
        concurrency_limit: None,
        // Nor error pages: restored the same way.
        error_pages: None,
    };
    serde_json::to_value(b).map_err(|e| e.to_string())
}

/// `v1beta1` spec to `v1alpha1`: the first target, the first JWT provider, rate limits of
/// other units as the per-second rate that lets at least as many requests through.
pub fn down(spec: Value) -> Result<Value, String> {
    let b: beta::TrafficPolicySpec = serde_json::from_value(spec).map_err(|e| e.to_string())?;
    let timeouts = b.timeouts.unwrap_or_default();
    let retry = b.retry.unwrap_or_default();
    let lb = b.load_balancer;
    let hash = lb.as_ref().and_then(|l| l.hash.clone()).unwrap_or_default();
    let breaker = b.circuit_breaker.unwrap_or_default();
    let outlier = b.outlier_detection.unwrap_or_default();
    let provider = b
        .jwt
        .and_then(|j| j.providers.into_iter().next())
        .unwrap_or_default();
    let ip = b.ip_access.unwrap_or_default();
    let body = b.body_limits.unwrap_or_default();
    let a = alpha::TrafficPolicySpec {
        target_ref: b.target_refs.into_iter().next().unwrap_or_default(),
        request_timeout: timeouts.request,
        backend_request_timeout: timeouts.backend_request,
        retries: retry.attempts,
        retry_on: retry.codes,
        retry_backoff: retry.backoff,
        retry_budget_percent: retry.budget.and_then(|b| b.percent),
        load_balancing: lb.map(|l| l.algorithm),
        hash_header: hash.header,
        hash_cookie: hash.cookie,
        hash_source_ip: hash.source_ip,
        max_connections: breaker.max_connections,
        max_pending_requests: breaker.max_pending_requests,
        max_requests: breaker.max_requests,
        eject_after_errors: outlier.consecutive_errors,
        ejection_time: outlier.base_ejection_time,
        max_ejection_percent: outlier.max_ejection_percent,
        requests_per_second: b.rate_limit.as_ref().map(|r| match r.unit {
            beta::RateLimitUnit::Second => r.requests,
            beta::RateLimitUnit::Minute => r.requests.div_ceil(60),
            beta::RateLimitUnit::Hour => r.requests.div_ceil(3600),
        }),
        burst: b.rate_limit.and_then(|r| r.burst),
        basic_auth_secret: b.basic_auth.as_ref().map(|a| a.secret_ref.name.clone()),
        realm: b.basic_auth.and_then(|a| a.realm),
        jwt_issuer: (!provider.issuer.is_empty()).then_some(provider.issuer),
        jwt_audiences: provider.audiences,
        jwks_secret: provider.jwks.secret_ref.map(|r| r.name),
        allow_cidrs: ip.allow,
        deny_cidrs: ip.deny,
        max_request_body_bytes: body.max_request_bytes,
        max_response_body_bytes: body.max_response_bytes,
    };
    serde_json::to_value(a).map_err(|e| e.to_string())
}
