//! `rules[].retry` and `rules[].sessionPersistence` of an HTTPRoute, compiled to the table's
//! [`RetryPolicy`] and [`SessionPersistence`]. Pure. Values the CRD would refuse are refused
//! here too, with the field named, so the rule answers 500 instead of half-applying them.

use std::time::Duration;

use crate::kinds::httproute::{
    HttpRouteRulesRetry, HttpRouteRulesSessionPersistence,
    HttpRouteRulesSessionPersistenceCookieConfigLifetimeType as Lifetime,
    HttpRouteRulesSessionPersistenceType as SpecKind,
};

use crate::table::{CookieAttributes, RetryPolicy, SessionKind, SessionPersistence};
use crate::translate::common::duration::{parse_duration, DurationError};

/// Retries after the first attempt when `retry.attempts` is not set.
pub const DEFAULT_RETRY_ATTEMPTS: u32 = 2;

/// Longest session name (the CRD's `maxLength`).
const MAX_SESSION_NAME: usize = 128;

/// Why a rule's `retry` or `sessionPersistence` cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResilienceError {
    #[error("retry.codes: {0} is not an HTTP status code from 400 to 599")]
    RetryCode(i64),
    #[error("retry.attempts: {0} is not a positive number")]
    RetryAttempts(i64),
    #[error("{field}: {error}")]
    Duration {
        field: &'static str,
        error: DurationError,
    },
    #[error("sessionPersistence.sessionName: {0:?} is not a valid cookie or header name")]
    SessionName(String),
    #[error("sessionPersistence: a Permanent cookie needs absoluteTimeout (its Max-Age)")]
    PermanentWithoutTimeout,
    #[error("sessionPersistence: cookieConfig can only be set with type Cookie")]
    CookieConfigOnHeader,
}

/// Compiles `rules[].retry`: status codes 400-599, `attempts` retries after the first try
/// ([`DEFAULT_RETRY_ATTEMPTS`] when unset), `backoff` as a Gateway API duration.
pub fn compile_retry(
    spec: Option<&HttpRouteRulesRetry>,
) -> Result<Option<RetryPolicy>, ResilienceError> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let mut codes = Vec::new();
    for &code in spec.codes.iter().flatten() {
        let valid = u16::try_from(code)
            .ok()
            .filter(|c| (400..=599).contains(c))
            .ok_or(ResilienceError::RetryCode(code))?;
        if !codes.contains(&valid) {
            codes.push(valid);
        }
    }
    let attempts = match spec.attempts {
        None => DEFAULT_RETRY_ATTEMPTS,
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .ok_or(ResilienceError::RetryAttempts(n))?,
    };
    let backoff = duration("retry.backoff", spec.backoff.as_deref())?;
    Ok(Some(RetryPolicy {
        codes,
        attempts,
        backoff,
        within: None,
    }))
}

/// Compiles `rules[].sessionPersistence` of rule `rule_index` of route `namespace/name`. Without
/// a `sessionName` the token is named after the rule, so two rules never share a session.
pub fn compile_session(
    spec: Option<&HttpRouteRulesSessionPersistence>,
    namespace: &str,
    name: &str,
    rule_index: usize,
) -> Result<Option<SessionPersistence>, ResilienceError> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let kind = match spec.r#type {
        Some(SpecKind::Header) => SessionKind::Header,
        Some(SpecKind::Cookie) | None => SessionKind::Cookie,
    };
    let lifetime = spec
        .cookie_config
        .as_ref()
        .and_then(|c| c.lifetime_type.as_ref());
    if kind == SessionKind::Header && spec.cookie_config.is_some() {
        return Err(ResilienceError::CookieConfigOnHeader);
    }
    let permanent = matches!(lifetime, Some(Lifetime::Permanent));
    let absolute_timeout = duration(
        "sessionPersistence.absoluteTimeout",
        spec.absolute_timeout.as_deref(),
    )?;
    let idle_timeout = duration(
        "sessionPersistence.idleTimeout",
        spec.idle_timeout.as_deref(),
    )?;
    if permanent && absolute_timeout.is_none() {
        return Err(ResilienceError::PermanentWithoutTimeout);
    }
    let name = match &spec.session_name {
        Some(n) if valid_token_name(n) => n.clone(),
        Some(n) => return Err(ResilienceError::SessionName(n.clone())),
        None => default_session_name(namespace, name, rule_index),
    };
    Ok(Some(SessionPersistence {
        name,
        kind,
        permanent,
        absolute_timeout,
        idle_timeout,
        cookie: CookieAttributes::default(),
    }))
}

/// A non-zero duration, or none (`0s` means none).
fn duration(field: &'static str, text: Option<&str>) -> Result<Option<Duration>, ResilienceError> {
    text.map(parse_duration)
        .transpose()
        .map(|d| d.filter(|d| !d.is_zero()))
        .map_err(|error| ResilienceError::Duration { field, error })
}

/// An RFC 9110 token: usable both as a cookie name and as a header name.
fn valid_token_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SESSION_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// `edgeplane-session-<8 hex digits of the rule's identity>`: stable across replicas and
/// restarts, so a client's session survives both.
fn default_session_name(namespace: &str, name: &str, rule_index: usize) -> String {
    // FNV-1a: stable across builds and processes, unlike the std hasher.
    let mut hash: u32 = 0x811c_9dc5;
    for b in format!("{namespace}/{name}/{rule_index}").bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("edgeplane-session-{hash:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::httproute::HttpRouteRulesSessionPersistenceCookieConfig;

    fn retry(codes: &[i64], attempts: Option<i64>, backoff: Option<&str>) -> HttpRouteRulesRetry {
        HttpRouteRulesRetry {
            attempts,
            backoff: backoff.map(str::to_owned),
            codes: Some(codes.to_vec()),
        }
    }

    #[test]
    fn retry_follows_the_crd() {
        let p = compile_retry(Some(&retry(&[500, 503, 500], Some(3), Some("100ms"))))
            .unwrap()
            .unwrap();
        assert_eq!(p.codes, vec![500, 503]);
        assert_eq!(p.attempts, 3);
        assert_eq!(p.backoff, Some(Duration::from_millis(100)));
        let d = compile_retry(Some(&retry(&[502], None, None)))
            .unwrap()
            .unwrap();
        assert_eq!(d.attempts, DEFAULT_RETRY_ATTEMPTS);
        assert_eq!(d.backoff, None);
        assert_eq!(
            compile_retry(Some(&retry(&[200], None, None))),
            Err(ResilienceError::RetryCode(200))
        );
        assert_eq!(
            compile_retry(Some(&retry(&[500], Some(0), None))),
            Err(ResilienceError::RetryAttempts(0))
        );
        assert!(matches!(
            compile_retry(Some(&retry(&[500], None, Some("soon")))),
            Err(ResilienceError::Duration {
                field: "retry.backoff",
                ..
            })
        ));
        assert_eq!(compile_retry(None), Ok(None));
    }

    fn session(kind: Option<SpecKind>, permanent: bool) -> HttpRouteRulesSessionPersistence {
        HttpRouteRulesSessionPersistence {
            absolute_timeout: None,
            cookie_config: permanent.then_some(HttpRouteRulesSessionPersistenceCookieConfig {
                lifetime_type: Some(Lifetime::Permanent),
            }),
            idle_timeout: Some("30m".into()),
            session_name: None,
            r#type: kind,
        }
    }

    #[test]
    fn session_defaults_to_a_cookie_named_after_the_rule() {
        let s = compile_session(Some(&session(None, false)), "ns", "r", 0)
            .unwrap()
            .unwrap();
        assert_eq!(s.kind, SessionKind::Cookie);
        assert!(!s.permanent);
        assert_eq!(s.idle_timeout, Some(Duration::from_secs(1800)));
        assert!(s.name.starts_with("edgeplane-session-"));
        let other = compile_session(Some(&session(None, false)), "ns", "r", 1)
            .unwrap()
            .unwrap();
        assert_ne!(s.name, other.name, "each rule has its own session");
    }

    #[test]
    fn session_refuses_what_the_crd_refuses() {
        assert_eq!(
            compile_session(Some(&session(None, true)), "ns", "r", 0),
            Err(ResilienceError::PermanentWithoutTimeout)
        );
        let mut header = session(Some(SpecKind::Header), true);
        header.absolute_timeout = Some("1h".into());
        assert_eq!(
            compile_session(Some(&header), "ns", "r", 0),
            Err(ResilienceError::CookieConfigOnHeader)
        );
        let mut bad = session(None, false);
        bad.session_name = Some("two words".into());
        assert_eq!(
            compile_session(Some(&bad), "ns", "r", 0),
            Err(ResilienceError::SessionName("two words".into()))
        );
    }
}
