//! One TrafficPolicy checked and compiled, setting by setting, to what the table carries: the
//! checks the CRD's validation makes (targets, Service-scoped vs request-scoped settings, value
//! ranges, durations, CIDRs) and the references it cannot make (Secrets, ConfigMaps). A policy
//! that fails a check contributes nothing, except that its access controls fail closed: its
//! `basicAuth` and `jwt` become deny-all (401) and its `ipAccess` refuses every address (403),
//! so a broken policy never opens what it was meant to protect. Pure.

use std::sync::Arc;
use std::time::Duration;

use crate::kinds::httproute::{HttpRouteRulesRetry, HttpRouteRulesTimeouts};

use super::auth;
use super::ext_auth;
use super::Setting;
use crate::kinds::crd::traffic_policy::{
    LoadBalancerAlgorithm, RateLimitKeyType, RateLimitUnit, TrafficPolicySpec,
};
use crate::kinds::crd::TrafficPolicy;
use crate::kinds::routes::RouteKindId;
use crate::snapshot::{namespace_of, Snapshot};
use crate::status::GATEWAY_GROUP;
use crate::table::{
    Balance, ConcurrencyLimit, HashOn, IpAccess, RateLimit, RateLimitKey, RequestPolicy,
    RetryPolicy, ServiceLimits, Timeouts,
};
use crate::translate::common::duration::{compile_timeouts, parse_duration};
use crate::translate::gateways::proxy_config::parse_cidr;
use crate::translate::routes::resilience::compile_retry;

/// Most targets of one policy (the CRD's limit).
pub const MAX_TARGETS: usize = 16;

/// What a target reference names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetKind {
    Gateway,
    HttpRoute,
    Service,
}

impl TargetKind {
    /// The kind's group and name, as a reference spells them.
    pub fn group_kind(self) -> (&'static str, &'static str) {
        match self {
            Self::Gateway => (GATEWAY_GROUP, "Gateway"),
            Self::HttpRoute => (GATEWAY_GROUP, RouteKindId::HttpRoute.as_str()),
            Self::Service => ("", "Service"),
        }
    }
}

/// One valid target of a policy, in the policy's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    pub kind: TargetKind,
    pub namespace: String,
    pub name: String,
    /// A Gateway listener, an HTTPRoute rule name, a Service port name.
    pub section: Option<String>,
}

/// Every setting of one policy, compiled. `sets` lists the settings the policy contributes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Compiled {
    pub sets: Vec<Setting>,
    pub timeouts: Timeouts,
    pub retry: Option<RetryPolicy>,
    pub request: RequestPolicy,
    pub balance: Option<Balance>,
    pub limits: ServiceLimits,
}

/// A policy compiled: its targets, what it contributes, and why it is invalid if it is.
#[derive(Debug)]
pub struct CompiledPolicy {
    pub targets: Vec<Target>,
    pub compiled: Compiled,
    /// The first failed check, naming its field; the policy then contributes only its access
    /// controls, as deny-all.
    pub error: Option<String>,
}

/// Checks and compiles `policy`, reading its Secrets and ConfigMaps from `snapshot`.
pub fn compile_policy(snapshot: &Snapshot, policy: &TrafficPolicy) -> CompiledPolicy {
    let ns = namespace_of(&policy.metadata);
    let name = policy.metadata.name.as_deref().unwrap_or("");
    let spec = &policy.spec;
    let mut targets = Vec::new();
    let mut error = None;
    if spec.target_refs.is_empty() || spec.target_refs.len() > MAX_TARGETS {
        error = Some(format!(
            "spec.targetRefs: must name 1 to {MAX_TARGETS} targets"
        ));
    }
    for (i, t) in spec.target_refs.iter().enumerate() {
        let kind = match (t.group.as_str(), t.kind.as_str()) {
            (GATEWAY_GROUP, "Gateway") => TargetKind::Gateway,
            (GATEWAY_GROUP, k) if k == RouteKindId::HttpRoute.as_str() => TargetKind::HttpRoute,
            ("" | "core", "Service") => TargetKind::Service,
            (g, k) => {
                error.get_or_insert_with(|| {
                    format!(
                        "spec.targetRefs[{i}]: {k} of group {g:?} cannot be targeted (Gateway, HTTPRoute or Service)"
                    )
                });
                continue;
            }
        };
        if kind == TargetKind::Service && t.section_name.is_some() {
            error.get_or_insert_with(|| {
                format!("spec.targetRefs[{i}].sectionName: only allowed on Gateway and HTTPRoute targets")
            });
        }
        targets.push(Target {
            kind,
            namespace: ns.to_owned(),
            name: t.name.clone(),
            section: t.section_name.clone(),
        });
    }
    let mut compiled = Compiled::default();
    if error.is_none() {
        if let Err(e) =
            scope(spec, &targets).and_then(|()| settings(snapshot, ns, name, spec, &mut compiled))
        {
            error = Some(e);
        }
    }
    if error.is_some() {
        compiled = deny_all(spec, ns, name);
    }
    CompiledPolicy {
        targets,
        compiled,
        error,
    }
}

/// What an invalid policy contributes: only its access controls, each refusing every request.
fn deny_all(spec: &TrafficPolicySpec, ns: &str, name: &str) -> Compiled {
    let mut out = Compiled::default();
    if spec.ip_access.is_some() {
        let refused = IpAccess::refusing_all(format!("{ns}/{name}"));
        out.request.ip_access = Some(Arc::new(refused));
        out.sets.push(Setting::IpAccess);
    }
    if let Some(b) = &spec.basic_auth {
        out.request.basic_auth = Some(Arc::new(auth::deny_basic_auth(b)));
        out.sets.push(Setting::BasicAuth);
    }
    if let Some(j) = &spec.jwt {
        out.request.jwt = Some(Arc::new(auth::deny_jwt(j)));
        out.sets.push(Setting::Jwt);
    }
    if let Some(a) = &spec.external_auth {
        out.request.external_auth = Some(Arc::new(ext_auth::deny(ns, name, a)));
        out.sets.push(Setting::ExternalAuth);
    }
    out
}

/// Service-scoped settings need only Service targets; request-scoped ones only Gateway and
/// HTTPRoute targets.
fn scope(spec: &TrafficPolicySpec, targets: &[Target]) -> Result<(), String> {
    let services = targets.iter().all(|t| t.kind == TargetKind::Service);
    let requests = targets.iter().all(|t| t.kind != TargetKind::Service);
    let budget = spec
        .retry
        .as_ref()
        .and_then(|r| r.budget.as_ref())
        .is_some();
    let service_scoped = [
        ("loadBalancer", spec.load_balancer.is_some()),
        ("circuitBreaker", spec.circuit_breaker.is_some()),
        ("outlierDetection", spec.outlier_detection.is_some()),
        ("retry.budget", budget),
    ];
    if !services {
        if let Some((field, _)) = service_scoped.iter().find(|(_, set)| *set) {
            return Err(format!(
                "spec.{field}: valid only when every targetRef is a Service"
            ));
        }
    }
    let retry_request = spec
        .retry
        .as_ref()
        .is_some_and(|r| r.attempts.is_some() || !r.codes.is_empty() || r.backoff.is_some());
    let request_scoped = [
        ("timeouts", spec.timeouts.is_some()),
        ("retry", retry_request),
        ("rateLimit", spec.rate_limit.is_some()),
        ("concurrencyLimit", spec.concurrency_limit.is_some()),
        ("basicAuth", spec.basic_auth.is_some()),
        ("jwt", spec.jwt.is_some()),
        ("ipAccess", spec.ip_access.is_some()),
        ("bodyLimits", spec.body_limits.is_some()),
        ("externalAuth", spec.external_auth.is_some()),
        ("errorPages", spec.error_pages.is_some()),
    ];
    if !requests {
        if let Some((field, _)) = request_scoped.iter().find(|(_, set)| *set) {
            return Err(format!(
                "spec.{field}: valid only when every targetRef is a Gateway or an HTTPRoute"
            ));
        }
    }
    Ok(())
}

/// A count that must be at least `min`.
fn at_least(field: &str, value: Option<u32>, min: u32) -> Result<Option<u32>, String> {
    match value {
        Some(v) if v < min => Err(format!("spec.{field}: {v} is less than {min}")),
        v => Ok(v),
    }
}

/// A percentage, 0 to 100.
fn percent(field: &str, value: Option<u32>) -> Result<Option<u32>, String> {
    match value {
        Some(v) if v > 100 => Err(format!("spec.{field}: {v} is not a percentage (0 to 100)")),
        v => Ok(v),
    }
}

/// Compiles every setting `spec` sets into `out`.
fn settings(
    snapshot: &Snapshot,
    ns: &str,
    name: &str,
    spec: &TrafficPolicySpec,
    out: &mut Compiled,
) -> Result<(), String> {
    resilience(spec, out)?;
    if let Some(rl) = &spec.rate_limit {
        out.request.rate_limit = Some(Arc::new(rate_limit(ns, name, rl)?));
        out.sets.push(Setting::RateLimit);
    }
    if let Some(cl) = &spec.concurrency_limit {
        let per_client = at_least("concurrencyLimit.perClient", Some(cl.per_client), 1)?;
        out.request.concurrency_limit = Some(Arc::new(ConcurrencyLimit {
            id: format!("{ns}/{name}"),
            per_client: per_client.unwrap_or(1),
        }));
        out.sets.push(Setting::ConcurrencyLimit);
    }
    if let Some(b) = &spec.basic_auth {
        let compiled = auth::basic_auth(snapshot, ns, b)
            .map_err(|e| format!("spec.basicAuth.secretRef: {e}"))?;
        out.request.basic_auth = Some(Arc::new(compiled));
        out.sets.push(Setting::BasicAuth);
    }
    if let Some(j) = &spec.jwt {
        out.request.jwt = Some(Arc::new(auth::jwt(snapshot, ns, j)?));
        out.sets.push(Setting::Jwt);
    }
    if let Some(ip) = &spec.ip_access {
        if ip.allow.is_empty() && ip.deny.is_empty() {
            return Err("spec.ipAccess: must set allow or deny".into());
        }
        let list = |field: &str, values: &[String]| {
            values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    parse_cidr(v)
                        .ok_or_else(|| format!("spec.ipAccess.{field}[{i}]: invalid CIDR {v:?}"))
                })
                .collect::<Result<Vec<_>, String>>()
        };
        out.request.ip_access = Some(Arc::new(IpAccess {
            allow: list("allow", &ip.allow)?,
            deny: list("deny", &ip.deny)?,
            refuse_all: None,
        }));
        out.sets.push(Setting::IpAccess);
    }
    if let Some(b) = &spec.body_limits {
        out.request.max_request_body = b.max_request_bytes;
        out.request.max_response_body = b.max_response_bytes;
        out.sets.push(Setting::BodyLimits);
    }
    if let Some(a) = &spec.external_auth {
        let compiled = ext_auth::external_auth(snapshot, ns, name, a)?;
        out.request.external_auth = Some(Arc::new(compiled));
        out.sets.push(Setting::ExternalAuth);
    }
    if let Some(e) = &spec.error_pages {
        let compiled = ext_auth::error_pages(snapshot, ns, name, e)?;
        out.request.error_pages = Some(Arc::new(compiled));
        out.sets.push(Setting::ErrorPages);
    }
    Ok(())
}

/// Compiles the resilience settings `spec` sets into `out`: timeouts, retries and their
/// budget, load balancing, circuit breaking, outlier detection.
fn resilience(spec: &TrafficPolicySpec, out: &mut Compiled) -> Result<(), String> {
    if let Some(t) = &spec.timeouts {
        let spec_form = HttpRouteRulesTimeouts {
            request: t.request.clone(),
            backend_request: t.backend_request.clone(),
        };
        out.timeouts = compile_timeouts(Some(&spec_form)).map_err(|e| format!("spec.{e}"))?;
        out.sets.push(Setting::Timeouts);
    }
    if let Some(r) = &spec.retry {
        if r.attempts.is_some() || !r.codes.is_empty() || r.backoff.is_some() {
            let spec_form = HttpRouteRulesRetry {
                attempts: r.attempts.map(i64::from),
                backoff: r.backoff.clone(),
                codes: (!r.codes.is_empty())
                    .then(|| r.codes.iter().map(|&c| i64::from(c)).collect()),
            };
            out.retry = compile_retry(Some(&spec_form)).map_err(|e| format!("spec.{e}"))?;
            out.sets.push(Setting::Retry);
        }
        if let Some(b) = &r.budget {
            out.limits.retry_budget_percent = percent("retry.budget.percent", b.percent)?;
            out.limits.retry_budget_min = b.min_retries;
            out.sets.push(Setting::RetryBudget);
        }
    }
    if let Some(lb) = &spec.load_balancer {
        out.balance = Some(balance(lb)?);
        out.sets.push(Setting::LoadBalancer);
    }
    if let Some(cb) = &spec.circuit_breaker {
        out.limits.max_connections =
            at_least("circuitBreaker.maxConnections", cb.max_connections, 1)?;
        out.limits.max_pending_requests = at_least(
            "circuitBreaker.maxPendingRequests",
            cb.max_pending_requests,
            1,
        )?;
        out.limits.max_requests = at_least("circuitBreaker.maxRequests", cb.max_requests, 1)?;
        out.sets.push(Setting::CircuitBreaker);
    }
    if let Some(o) = &spec.outlier_detection {
        out.limits.outlier_consecutive_errors = at_least(
            "outlierDetection.consecutiveErrors",
            o.consecutive_errors,
            1,
        )?;
        out.limits.outlier_base_ejection =
            positive_duration("outlierDetection.baseEjectionTime", &o.base_ejection_time)?;
        out.limits.outlier_max_ejection_percent = percent(
            "outlierDetection.maxEjectionPercent",
            o.max_ejection_percent,
        )?;
        out.sets.push(Setting::OutlierDetection);
    }
    Ok(())
}

/// A Gateway API duration longer than zero.
fn positive_duration(field: &str, value: &Option<String>) -> Result<Option<Duration>, String> {
    let Some(text) = value else { return Ok(None) };
    match parse_duration(text) {
        Ok(d) if !d.is_zero() => Ok(Some(d)),
        Ok(_) => Err(format!("spec.{field}: must be longer than 0s")),
        Err(_) => Err(format!("spec.{field}: invalid duration {text:?}")),
    }
}

/// The balancer of `loadBalancer`: consistent hashing needs exactly one key.
fn balance(lb: &crate::kinds::crd::traffic_policy::LoadBalancerPolicy) -> Result<Balance, String> {
    let hash = lb.hash.as_ref();
    match lb.algorithm {
        LoadBalancerAlgorithm::LeastRequest | LoadBalancerAlgorithm::RoundRobin
            if hash.is_some() =>
        {
            Err("spec.loadBalancer.hash: valid only with algorithm ConsistentHash".into())
        }
        LoadBalancerAlgorithm::LeastRequest => Ok(Balance::LeastRequest),
        LoadBalancerAlgorithm::RoundRobin => Ok(Balance::RoundRobin),
        LoadBalancerAlgorithm::ConsistentHash => {
            let h = hash.ok_or("spec.loadBalancer.hash: required with algorithm ConsistentHash")?;
            let source_ip = h.source_ip == Some(true);
            let (path, path_and_query) = (h.path == Some(true), h.path_and_query == Some(true));
            let count = [
                h.header.is_some(),
                h.cookie.is_some(),
                h.query_parameter.is_some(),
                source_ip,
                path,
                path_and_query,
            ]
            .iter()
            .filter(|s| **s)
            .count();
            if count != 1 {
                return Err("spec.loadBalancer.hash: set exactly one of header, cookie, queryParameter, sourceIp: true, path: true and pathAndQuery: true".into());
            }
            let on = if let Some(header) = &h.header {
                let name = http::HeaderName::from_bytes(header.as_bytes()).map_err(|_| {
                    format!("spec.loadBalancer.hash.header: invalid header name {header:?}")
                })?;
                HashOn::Header(name.as_str().to_owned())
            } else if let Some(cookie) = &h.cookie {
                if cookie.is_empty() {
                    return Err("spec.loadBalancer.hash.cookie: must not be empty".into());
                }
                HashOn::Cookie(cookie.clone())
            } else if let Some(name) = &h.query_parameter {
                if name.is_empty() {
                    return Err("spec.loadBalancer.hash.queryParameter: must not be empty".into());
                }
                HashOn::Query(name.clone())
            } else if path {
                HashOn::Path
            } else if path_and_query {
                HashOn::PathAndQuery
            } else {
                HashOn::SourceIp
            };
            Ok(Balance::ConsistentHash { on })
        }
    }
}

/// A token bucket. Its id names the policy, the rate and the key, so its buckets outlive
/// unrelated table changes and a changed rate starts afresh.
fn rate_limit(
    ns: &str,
    name: &str,
    rl: &crate::kinds::crd::traffic_policy::RateLimitPolicy,
) -> Result<RateLimit, String> {
    if rl.requests == 0 {
        return Err("spec.rateLimit.requests: 0 is less than 1".into());
    }
    let (per, unit) = match rl.unit {
        RateLimitUnit::Second => (Duration::from_secs(1), "s"),
        RateLimitUnit::Minute => (Duration::from_secs(60), "m"),
        RateLimitUnit::Hour => (Duration::from_secs(3600), "h"),
    };
    let burst = rl.burst.unwrap_or(0);
    let key_spec = rl.key.clone().unwrap_or_default();
    if key_spec.type_ != RateLimitKeyType::Header && key_spec.header.is_some() {
        return Err("spec.rateLimit.key.header: allowed only with type Header".into());
    }
    let key = match key_spec.type_ {
        RateLimitKeyType::ClientIP => RateLimitKey::ClientIp,
        RateLimitKeyType::Route => RateLimitKey::Route,
        RateLimitKeyType::Header => {
            let header = key_spec
                .header
                .as_deref()
                .ok_or("spec.rateLimit.key.header: required with type Header")?;
            let header = http::HeaderName::from_bytes(header.as_bytes()).map_err(|_| {
                format!("spec.rateLimit.key.header: invalid header name {header:?}")
            })?;
            RateLimitKey::Header(header.as_str().to_owned())
        }
    };
    let key_id = match &key {
        RateLimitKey::ClientIp => "clientIP".to_owned(),
        RateLimitKey::Route => "route".to_owned(),
        RateLimitKey::Header(h) => format!("header:{h}"),
    };
    Ok(RateLimit {
        id: format!("{ns}/{name}:{}/{unit}+{burst}:{key_id}", rl.requests),
        requests: rl.requests,
        per,
        capacity: rl.requests.saturating_add(burst),
        key,
    })
}
