//! The authentication annotations read into TrafficPolicy settings: basic authentication
//! (`auth-type`, `auth-secret`, `auth-secret-type`, `auth-realm`) as `basicAuth`, and external
//! authorization (`auth-url`, `auth-signin`, `auth-response-headers`, `auth-method`) as
//! `externalAuth` asking as ingress-nginx does. Both are access controls, so what cannot be
//! honoured fails closed (a reference that never resolves). Apart from the limits and the
//! affinity because of that rule. Pure.

use http::Uri;

use super::{report, Get};
use crate::kinds::crd::traffic_policy::{BasicAuthPolicy, LocalObjectKeyRef};
use crate::kinds::crd::traffic_policy_auth::{
    AuthBackendRef, ExternalAuthHttp, ExternalAuthPolicy, ExternalAuthProtocol, ExternalAuthStyle,
};
use crate::kinds::ingress::NGINX_PREFIX;

/// What ingress-nginx answers when its authorizer cannot be asked (nginx's `auth_request`
/// error).
const AUTH_ERROR_STATUS: u16 = 500;

/// The Secret key of an ingress-nginx `auth-file` htpasswd Secret.
const AUTH_FILE_KEY: &str = "auth";

/// `auth-type: basic` with its Secret. The Secret is `name` or `namespace/name`; a TrafficPolicy
/// reads Secrets of its own namespace only, so one of another namespace is reported and
/// refuses every request, as does an `auth-map` Secret or a `digest` type.
pub(super) fn basic_auth(
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
pub(super) fn external_auth(
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
pub(super) fn closed_backend() -> AuthBackendRef {
    AuthBackendRef {
        name: "unservable/auth-url".to_owned(),
        ..AuthBackendRef::default()
    }
}

/// The Service port and the path and query an `auth-url` names.
pub(super) fn service_url(url: &str, namespace: &str) -> Result<(AuthBackendRef, String), String> {
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
