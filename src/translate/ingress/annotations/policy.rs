//! The ingress-nginx annotations that ask for TrafficPolicy settings beyond the access lists
//! and body size: basic authentication and external authorization (`auth`), rate limits
//! (`limit-rps`, `limit-rpm`, `limit-burst-multiplier`, here), the per-client concurrency limit
//! (`limit-connections`, here), cookie affinity (`affinity`), which goes into the lowered rules
//! as Gateway API `sessionPersistence`, the cookie's path, SameSite and Secure beside it
//! ([`PolicyAnnotations::cookie`]), and retries (`upstream`). Each is read into the field of a
//! [`TrafficPolicySpec`] it maps onto, so the Ingress's policy compiles with the code a
//! TrafficPolicy object goes through. A setting that cannot be honoured as asked is reported
//! and, when it is an access control, written so that it fails closed (a Secret or Service
//! reference that never resolves refuses every request). Pure.

mod affinity;
mod auth;
mod upstream;

use serde_json::Value;

use affinity::{affinity, cookie_attributes};
use auth::{basic_auth, external_auth};

use crate::kinds::crd::traffic_policy::{
    ConcurrencyLimitPolicy, RateLimitPolicy, RateLimitUnit, TrafficPolicySpec,
};
use crate::kinds::ingress::NGINX_PREFIX;
use crate::table::CookieAttributes;

/// Whether this module reads annotation `name` (the others are read by `annotations`).
pub fn reads(name: &str) -> bool {
    NAMES.contains(&name) || affinity::SETTINGS.contains(&name)
}

/// The annotations this module reads besides the cookie settings ([`affinity::SETTINGS`]).
const NAMES: &[&str] = &[
    "auth-type",
    "auth-secret",
    "auth-secret-type",
    "auth-realm",
    "auth-url",
    "auth-signin",
    "auth-response-headers",
    "auth-method",
    "limit-rps",
    "limit-rpm",
    "limit-burst-multiplier",
    "limit-connections",
    "affinity",
    "proxy-next-upstream",
    "proxy-next-upstream-tries",
    "proxy-next-upstream-timeout",
    "client-body-buffer-size",
];

/// ingress-nginx's `limit-burst-multiplier` default.
const BURST_MULTIPLIER: u32 = 5;
/// The TrafficPolicy settings these annotations ask for (`targetRefs` empty).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyAnnotations {
    pub spec: TrafficPolicySpec,
    /// `affinity: cookie` as the lowered rules' `sessionPersistence`.
    pub session: Option<Value>,
    /// `session-cookie-path`, `-samesite`, `-secure`: the session cookie's attributes (`path`
    /// unset: each rule's own path, as nginx's location path).
    pub cookie: CookieAttributes,
    /// `proxy-next-upstream(-tries)` as the lowered rules' `retry`.
    pub retry: Option<Value>,
    /// `proxy-next-upstream-timeout`: that retry's time budget.
    pub retry_within: Option<std::time::Duration>,
}

// The spec holds no floating-point number: equality is reflexive.
impl Eq for PolicyAnnotations {}

/// An annotation's value, by its name without the prefix.
pub type Get<'a, 'b> = &'b dyn Fn(&str) -> Option<&'a str>;

fn report(problems: &mut Vec<String>, name: &str, value: &str, why: &str) {
    problems.push(format!(
        "annotation {NGINX_PREFIX}{name}: {value:?} is {why}"
    ));
}

impl PolicyAnnotations {
    /// Reads the annotations of `NAMES` of an Ingress in `namespace`; what cannot be
    /// honoured goes to `problems`.
    pub fn read(get: Get<'_, '_>, namespace: &str, problems: &mut Vec<String>) -> Self {
        let mut out = Self::default();
        out.spec.basic_auth = basic_auth(get, namespace, problems);
        out.spec.external_auth = external_auth(get, namespace, problems);
        out.spec.rate_limit = rate_limit(get, problems);
        out.spec.concurrency_limit = concurrency_limit(get, problems);
        out.session = affinity(get, problems);
        if out.session.is_some() {
            out.cookie = cookie_attributes(get, problems);
        }
        (out.retry, out.retry_within) = upstream::read(get, problems);
        out
    }
}

/// A positive whole number.
fn count(value: &str) -> Result<u32, String> {
    match value.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("not a positive whole number".to_owned()),
    }
}

/// `limit-rps` (else `limit-rpm`) per client address, as ingress-nginx's `limit_req` with
/// `burst` = rate × `limit-burst-multiplier` and `nodelay`: a bucket of burst + 1 requests
/// refilled at the rate.
fn rate_limit(get: Get<'_, '_>, problems: &mut Vec<String>) -> Option<RateLimitPolicy> {
    let multiplier = match get("limit-burst-multiplier") {
        None => BURST_MULTIPLIER,
        Some(v) => count(v).unwrap_or_else(|why| {
            report(
                problems,
                "limit-burst-multiplier",
                v,
                &format!("{why} (5 is used)"),
            );
            BURST_MULTIPLIER
        }),
    };
    let mut chosen = None;
    for (name, unit) in [
        ("limit-rps", RateLimitUnit::Second),
        ("limit-rpm", RateLimitUnit::Minute),
    ] {
        let Some(v) = get(name) else { continue };
        match count(v) {
            Err(why) => report(problems, name, v, &format!("{why} (not applied)")),
            Ok(_) if chosen.is_some() => report(
                problems,
                name,
                v,
                "not applied: limit-rps is, and a route has one rate limit",
            ),
            Ok(rate) => {
                let bucket = rate.saturating_mul(multiplier).saturating_add(1);
                chosen = Some(RateLimitPolicy {
                    requests: rate,
                    unit,
                    burst: Some(bucket.saturating_sub(rate)),
                    key: None,
                });
            }
        }
    }
    chosen
}

/// `limit-connections` as ingress-nginx's `limit_conn` keyed by the client address: at most N
/// requests of one client address in progress at once, the rest answered 503.
fn concurrency_limit(
    get: Get<'_, '_>,
    problems: &mut Vec<String>,
) -> Option<ConcurrencyLimitPolicy> {
    let v = get("limit-connections")?;
    match count(v) {
        Ok(per_client) => Some(ConcurrencyLimitPolicy { per_client }),
        Err(why) => {
            report(
                problems,
                "limit-connections",
                v,
                &format!("{why} (not applied)"),
            );
            None
        }
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
