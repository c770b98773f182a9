//! The ingress-nginx annotations that ask for TrafficPolicy settings beyond the access lists
//! and body size: basic authentication (`auth-type`, `auth-secret`, `auth-secret-type`,
//! `auth-realm`) and external authorization (`auth-url`, `auth-signin`,
//! `auth-response-headers`, `auth-method`), rate limits (`limit-rps`, `limit-rpm`,
//! `limit-burst-multiplier`), the per-client concurrency limit (`limit-connections`) and cookie affinity (`affinity`, `session-cookie-*`), which goes
//! into the lowered rules as Gateway API `sessionPersistence`, the cookie's path, SameSite and
//! Secure beside it ([`PolicyAnnotations::cookie`]). Each is read into the field of a [`TrafficPolicySpec`] it maps onto, so the
//! Ingress's policy compiles with the code a TrafficPolicy object goes through. A setting that
//! cannot be honoured as asked is reported and, when it is an access control, written so that
//! it fails closed (a Secret or Service reference that never resolves refuses every
//! request). Pure.

use http::Uri;
use serde_json::{json, Value};

use crate::kinds::crd::traffic_policy::{
    BasicAuthPolicy, ConcurrencyLimitPolicy, LocalObjectKeyRef, RateLimitPolicy, RateLimitUnit,
    TrafficPolicySpec,
};
use crate::kinds::crd::traffic_policy_auth::{
    AuthBackendRef, ExternalAuthHttp, ExternalAuthPolicy, ExternalAuthProtocol, ExternalAuthStyle,
};
use crate::kinds::ingress::NGINX_PREFIX;
use crate::table::{CookieAttributes, SameSite};

mod upstream;

/// The annotations this module reads (the others are read by `annotations`).
pub const NAMES: &[&str] = &[
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
    "affinity-mode",
    "session-cookie-name",
    "session-cookie-path",
    "session-cookie-max-age",
    "session-cookie-expires",
    "session-cookie-samesite",
    "session-cookie-secure",
    "session-cookie-conditional-samesite-none",
    "proxy-next-upstream",
    "proxy-next-upstream-tries",
    "proxy-next-upstream-timeout",
    "client-body-buffer-size",
];

/// ingress-nginx's `limit-burst-multiplier` default.
const BURST_MULTIPLIER: u32 = 5;
/// ingress-nginx's `session-cookie-name` default.
const COOKIE_NAME: &str = "INGRESSCOOKIE";

/// What ingress-nginx answers when its authorizer cannot be asked (nginx's `auth_request`
/// error).
const AUTH_ERROR_STATUS: u16 = 500;

/// The Secret key of an ingress-nginx `auth-file` htpasswd Secret.
const AUTH_FILE_KEY: &str = "auth";

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

/// `auth-type: basic` with its Secret. The Secret is `name` or `namespace/name`; a TrafficPolicy
/// reads Secrets of its own namespace only, so one of another namespace is reported and
/// refuses every request, as does an `auth-map` Secret or a `digest` type.
fn basic_auth(
    get: Get<'_, '_>,
    namespace: &str,
    problems: &mut Vec<String>,
) -> Option<BasicAuthPolicy> {
    let Some(kind) = get("auth-type") else {
        for name in ["auth-secret", "auth-secret-type", "auth-realm"] {
            if let Some(v) = get(name) {
                report(problems, name, v, "ignored without auth-type");
            }
        }
        return None;
    };
    let realm = get("auth-realm").map(|r| r.trim().to_owned());
    // Never found (no Secret name holds a '/'): the policy is invalid and refuses everything.
    let closed = |why: &str| {
        Some(BasicAuthPolicy {
            secret_ref: LocalObjectKeyRef {
                name: format!("unservable/{why}"),
                key: None,
            },
            realm: realm.clone(),
        })
    };
    match kind.trim() {
        "basic" => {}
        "digest" => {
            report(
                problems,
                "auth-type",
                kind,
                "not supported (digest): every request is refused",
            );
            return closed("digest");
        }
        _ => {
            report(
                problems,
                "auth-type",
                kind,
                "not basic or digest: every request is refused",
            );
            return closed("auth-type");
        }
    }
    let Some(secret) = get("auth-secret").map(str::trim).filter(|s| !s.is_empty()) else {
        problems.push(format!(
            "annotation {NGINX_PREFIX}auth-type: basic needs auth-secret: every request is refused"
        ));
        return closed("auth-secret");
    };
    let name = match secret.split_once('/') {
        None => secret,
        Some((ns, name)) if ns == namespace => name,
        Some(_) => {
            report(
                problems,
                "auth-secret",
                secret,
                "in another namespace, which is not supported: every request is refused",
            );
            return closed("auth-secret");
        }
    };
    match get("auth-secret-type").map(str::trim) {
        None | Some("auth-file") => {}
        Some("auth-map") => {
            report(
                problems,
                "auth-secret-type",
                "auth-map",
                "not supported (only auth-file, an htpasswd file under key \"auth\"): every request is refused",
            );
            return closed("auth-map");
        }
        Some(other) => {
            report(
                problems,
                "auth-secret-type",
                other,
                "not auth-file or auth-map: every request is refused",
            );
            return closed("auth-secret-type");
        }
    }
    Some(BasicAuthPolicy {
        secret_ref: LocalObjectKeyRef {
            name: name.to_owned(),
            key: Some(AUTH_FILE_KEY.to_owned()),
        },
        realm,
    })
}

/// `auth-url` and its settings, as an `IngressNginx`-style HTTP authorizer. The URL must name a
/// Service (`http://<service>.<namespace>.svc[.<cluster domain>][:port][/path]`); any other
/// URL is reported and refuses every request, as does a bad setting.
fn external_auth(
    get: Get<'_, '_>,
    namespace: &str,
    problems: &mut Vec<String>,
) -> Option<ExternalAuthPolicy> {
    let Some(url) = get("auth-url") else {
        for name in ["auth-signin", "auth-response-headers", "auth-method"] {
            if let Some(v) = get(name) {
                report(problems, name, v, "ignored without auth-url");
            }
        }
        return None;
    };
    let mut http = ExternalAuthHttp {
        style: Some(ExternalAuthStyle::IngressNginx),
        ..ExternalAuthHttp::default()
    };
    let mut fail = |name: &str, value: &str, why: &str| {
        report(
            problems,
            name,
            value,
            &format!("{why}: every request is refused"),
        );
    };
    let mut backend = match service_url(url, namespace) {
        Ok((backend, path)) => {
            http.path = Some(path);
            backend
        }
        Err(why) => {
            fail("auth-url", url, &why);
            closed_backend()
        }
    };
    if let Some(m) = get("auth-method") {
        let m = m.trim().to_ascii_uppercase();
        if !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()) {
            http.method = Some(m);
        } else {
            fail("auth-method", &m, "not a method");
            backend = closed_backend();
        }
    }
    if let Some(v) = get("auth-response-headers") {
        let names: Vec<String> = v
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
            .collect();
        if names
            .iter()
            .all(|h| http::HeaderName::try_from(h.as_str()).is_ok())
        {
            http.allowed_response_headers = names;
        } else {
            fail("auth-response-headers", v, "not a list of header names");
            backend = closed_backend();
        }
    }
    if let Some(v) = get("auth-signin").map(str::trim) {
        let absolute = v
            .parse::<Uri>()
            .is_ok_and(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some());
        if v.contains('$') {
            report(
                problems,
                "auth-signin",
                v,
                "not supported with nginx variables (a 401 is answered as it is)",
            );
        } else if absolute {
            http.signin_url = Some(v.to_owned());
        } else {
            report(
                problems,
                "auth-signin",
                v,
                "not an absolute http or https URL (a 401 is answered as it is)",
            );
        }
    }
    Some(ExternalAuthPolicy {
        protocol: ExternalAuthProtocol::Http,
        backend_ref: backend,
        http: Some(http),
        status_on_error: Some(AUTH_ERROR_STATUS),
        ..ExternalAuthPolicy::default()
    })
}

/// A Service reference that never resolves (no Service name holds a '/'), so the policy is
/// invalid and its check refuses every request.
fn closed_backend() -> AuthBackendRef {
    AuthBackendRef {
        name: "unservable/auth-url".to_owned(),
        ..AuthBackendRef::default()
    }
}

/// The Service port and the path and query an `auth-url` names.
fn service_url(url: &str, namespace: &str) -> Result<(AuthBackendRef, String), String> {
    const FORM: &str = "http://<service>.<namespace>.svc[.cluster.local][:port][/path]";
    if url.contains('$') {
        return Err("not supported with nginx variables".to_owned());
    }
    let uri: Uri = url
        .trim()
        .parse()
        .map_err(|_| format!("not a URL of the form {FORM}"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(format!(
                "not supported: an authorizer is asked over plain HTTP ({FORM})"
            ))
        }
        _ => return Err(format!("not a URL of the form {FORM}")),
    }
    let host = uri.host().unwrap_or_default().to_ascii_lowercase();
    let labels: Vec<&str> = host.split('.').collect();
    let (name, ns) = match labels.as_slice() {
        [name, ns, "svc", ..] if !name.is_empty() && !ns.is_empty() => (*name, *ns),
        _ => {
            return Err(format!(
                "not supported: it names no Service (only {FORM} URLs are served)"
            ))
        }
    };
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let path = if path.is_empty() {
        "/".to_owned()
    } else {
        path
    };
    Ok((
        AuthBackendRef {
            name: name.to_owned(),
            namespace: (ns != namespace).then(|| ns.to_owned()),
            port: Some(i32::from(uri.port_u16().unwrap_or(80))),
            ..AuthBackendRef::default()
        },
        path,
    ))
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

/// `affinity: cookie` and its `session-cookie-*` settings as a rule's `sessionPersistence`:
/// the cookie's name, and with `session-cookie-max-age` (else `-expires`) a permanent cookie
/// of that lifetime. The cookie's other attributes are [`cookie_attributes`].
fn affinity(get: Get<'_, '_>, problems: &mut Vec<String>) -> Option<Value> {
    let cookie_settings = [
        "affinity-mode",
        "session-cookie-name",
        "session-cookie-path",
        "session-cookie-max-age",
        "session-cookie-expires",
        "session-cookie-samesite",
        "session-cookie-secure",
        "session-cookie-conditional-samesite-none",
    ];
    match get("affinity").map(str::trim) {
        Some("cookie") => {}
        Some(other) => {
            report(problems, "affinity", other, "not cookie (not applied)");
            return None;
        }
        None => {
            for name in cookie_settings {
                if let Some(v) = get(name) {
                    report(problems, name, v, "ignored without affinity: cookie");
                }
            }
            return None;
        }
    }
    let name = get("session-cookie-name").map_or(COOKIE_NAME, str::trim);
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !valid {
        report(
            problems,
            "session-cookie-name",
            name,
            "not a cookie name (not applied)",
        );
        return None;
    }
    let mut session = json!({"type": "Cookie", "sessionName": name});
    let lifetime = ["session-cookie-max-age", "session-cookie-expires"]
        .into_iter()
        .find_map(|n| get(n).map(|v| (n, v)));
    if let Some((n, v)) = lifetime {
        match count(v) {
            Ok(seconds) => {
                session["absoluteTimeout"] = json!(format!("{seconds}s"));
                session["cookieConfig"] = json!({"lifetimeType": "Permanent"});
            }
            Err(why) => report(problems, n, v, &format!("{why} (a session cookie is used)")),
        }
    }
    if let Some(v) = get("affinity-mode").filter(|m| m.trim() != "balanced") {
        report(
            problems,
            "affinity-mode",
            v,
            "not supported: sessions move when endpoints change, as with balanced",
        );
    }
    Some(session)
}

/// `session-cookie-path` (an absolute path), `session-cookie-samesite` (`None`, `Lax`,
/// `Strict`, any case) and `session-cookie-secure` (`true`/`false`): the attributes of the
/// affinity cookie. A bad value is reported and the attribute left as nginx's default.
fn cookie_attributes(get: Get<'_, '_>, problems: &mut Vec<String>) -> CookieAttributes {
    let mut out = CookieAttributes::default();
    if let Some(v) = get("session-cookie-path") {
        let p = v.trim();
        let valid =
            p.starts_with('/') && p.bytes().all(|b| (0x21..=0x7E).contains(&b) && b != b';');
        if valid {
            out.path = Some(p.to_owned());
        } else {
            report(
                problems,
                "session-cookie-path",
                v,
                "not an absolute path without ';' (the rule's path is used)",
            );
        }
    }
    if let Some(v) = get("session-cookie-samesite") {
        out.same_site = match v.trim().to_ascii_lowercase().as_str() {
            "none" => Some(SameSite::None),
            "lax" => Some(SameSite::Lax),
            "strict" => Some(SameSite::Strict),
            _ => {
                report(
                    problems,
                    "session-cookie-samesite",
                    v,
                    "not None, Lax or Strict (no SameSite is sent)",
                );
                None
            }
        };
    }
    if let Some(v) = get("session-cookie-secure") {
        match v.trim() {
            "true" => out.secure = true,
            "false" => {}
            _ => report(
                problems,
                "session-cookie-secure",
                v,
                "not true or false (Secure is not sent)",
            ),
        }
    }
    if let Some(v) = get("session-cookie-conditional-samesite-none") {
        if v.trim() == "true" && out.same_site == Some(SameSite::None) {
            report(
                problems,
                "session-cookie-conditional-samesite-none",
                v,
                "not supported: SameSite=None is sent to every client, whatever its User-Agent (not applied)",
            );
        }
    }
    out
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
