//! A TrafficPolicy's `externalAuth` compiled to the table's `ExternalAuth`: the settings
//! through the same compilation as the HTTPRoute filter's (`routes::ext_auth`), the authorizer
//! resolved to its Service port and endpoints like a backendRef, with a ReferenceGrant
//! (from `edgeplane.dev` `TrafficPolicy`) needed for another namespace. A policy whose
//! authorizer does not resolve is invalid, and like every access control of an invalid policy
//! its check fails closed (`deny`). Also `errorPages`, whose Service is resolved the same way
//! (an invalid policy has no error pages: they are no access control). Pure.

use std::sync::Arc;

use crate::kinds::crd::traffic_policy_auth::{
    AuthBackendRef, ErrorPagesPolicy, ExternalAuthPolicy, ExternalAuthProtocol, ExternalAuthStyle,
};
use crate::kinds::crd::GROUP;
use crate::request::validate_config_path;
use crate::snapshot::Snapshot;
use crate::table::{
    AuthBackend, AuthPath, ErrorPages, ExternalAuth, FailureMode, HeaderSelection, ServiceBackend,
    DEFAULT_STATUS_ON_ERROR,
};
use crate::translate::backends::resolve::{BackendCache, BackendRef, Backends};
use crate::translate::common::duration::parse_duration;
use crate::translate::common::refgrant::RefSide;
use crate::translate::routes::ext_auth::{compile_auth, AuthParams};

/// The kind a ReferenceGrant names to let TrafficPolicies reach an authorizer.
const FROM_KIND: &str = "TrafficPolicy";

/// Compiles `spec`, resolving its authorizer against `snapshot`.
pub fn external_auth(
    snapshot: &Snapshot,
    ns: &str,
    name: &str,
    spec: &ExternalAuthPolicy,
) -> Result<ExternalAuth, String> {
    let mut auth = settings(ns, name, spec)?;
    let service = resolve(snapshot, ns, &spec.backend_ref)
        .map_err(|e| format!("spec.externalAuth.backendRef: {e}"))?;
    auth.backend = AuthBackend::Service(service);
    Ok(auth)
}

/// Compiles a policy's `errorPages`: the statuses checked (400 to 599, at least one), the
/// error page Service resolved as an authorizer is.
pub fn error_pages(
    snapshot: &Snapshot,
    ns: &str,
    name: &str,
    spec: &ErrorPagesPolicy,
) -> Result<ErrorPages, String> {
    let mut codes = spec.status_codes.clone();
    if codes.is_empty() {
        return Err("spec.errorPages.statusCodes: at least one status is needed".into());
    }
    if let Some(bad) = codes.iter().find(|c| !(400..=599).contains(*c)) {
        return Err(format!(
            "spec.errorPages.statusCodes: {bad} is not between 400 and 599"
        ));
    }
    codes.sort_unstable();
    codes.dedup();
    let backend = resolve(snapshot, ns, &spec.backend_ref)
        .map_err(|e| format!("spec.errorPages.backendRef: {e}"))?;
    Ok(ErrorPages {
        codes,
        backend,
        source: format!("{ns}/{name}"),
    })
}

/// A Service port a TrafficPolicy of `ns` names, resolved like a backendRef (a ReferenceGrant
/// from `edgeplane.dev` `TrafficPolicy` needed for another namespace).
fn resolve(
    snapshot: &Snapshot,
    ns: &str,
    r: &AuthBackendRef,
) -> Result<Arc<ServiceBackend>, String> {
    let backend_ref = BackendRef {
        from_kind: FROM_KIND,
        group: r.group.as_deref(),
        kind: r.kind.as_deref(),
        name: &r.name,
        namespace: r.namespace.as_deref(),
        port: r.port,
    };
    let from = RefSide {
        group: GROUP,
        kind: FROM_KIND,
        namespace: ns,
    };
    let mut backends = Backends::with_cache(snapshot, BackendCache::default(), false);
    backends
        .resolve_from(from, &backend_ref)
        .map_err(|e| e.to_string())
}

/// What an invalid policy's `externalAuth` becomes: a check whose authorizer is invalid, so
/// every request is refused with the policy's `statusOnError` (403).
pub fn deny(ns: &str, name: &str, spec: &ExternalAuthPolicy) -> ExternalAuth {
    let mut auth = settings(ns, name, spec).unwrap_or_else(|_| closed(ns, name));
    auth.backend = AuthBackend::Invalid {
        reason: format!("TrafficPolicy {ns}/{name} is invalid"),
    };
    auth.failure.allow = false;
    auth
}

/// The check of a policy whose settings do not compile: defaults, refusing everything.
fn closed(ns: &str, name: &str) -> ExternalAuth {
    ExternalAuth {
        protocol: crate::table::AuthProtocol::Http,
        backend: AuthBackend::Invalid {
            reason: String::new(),
        },
        path: crate::table::AuthPath::Prefix(String::new()),
        request_headers: crate::table::HeaderSelection::Only(Vec::new()),
        response_headers: crate::table::HeaderSelection::All,
        method: None,
        signin: None,
        original_headers: false,
        timeout: crate::table::DEFAULT_TIMEOUT,
        failure: FailureMode::default(),
        forward_body: 0,
        source: format!("{ns}/{name}"),
    }
}

/// The settings, checked, the backend not yet resolved.
fn settings(ns: &str, name: &str, spec: &ExternalAuthPolicy) -> Result<ExternalAuth, String> {
    let grpc = spec.protocol == ExternalAuthProtocol::Grpc;
    let http = spec.http.as_ref();
    let timeout = match &spec.timeout {
        Some(t) => Some(parse_duration(t).map_err(|e| format!("spec.externalAuth.timeout: {e}"))?),
        None => None,
    };
    let params = AuthParams {
        grpc,
        path: http.and_then(|h| h.path.as_deref()),
        allowed_headers: match grpc {
            true => spec.grpc.as_ref().map(|g| g.allowed_headers.as_slice()),
            false => http.map(|h| h.allowed_headers.as_slice()),
        },
        allowed_response_headers: http.map(|h| h.allowed_response_headers.as_slice()),
        method: http.and_then(|h| h.method.as_deref()),
        signin: http.and_then(|h| h.signin_url.as_deref()),
        timeout,
        failure: FailureMode {
            allow: spec.fail_open.unwrap_or(false),
            status: spec.status_on_error.unwrap_or(DEFAULT_STATUS_ON_ERROR),
        },
        forward_body: spec
            .forward_body
            .as_ref()
            .and_then(|b| b.max_size)
            .map(i64::from),
        source: format!("{ns}/{name}"),
    };
    let mut auth = compile_auth(AuthParams {
        path: params.path.filter(|_| !nginx_style(spec)),
        ..params
    })
    .map_err(|e| format!("spec.externalAuth: {e}"))?;
    if nginx_style(spec) {
        let path = http.and_then(|h| h.path.as_deref()).unwrap_or("/");
        let valid = path.starts_with('/')
            && path.parse::<http::uri::PathAndQuery>().is_ok()
            && validate_config_path(path.split('?').next().unwrap_or_default()).is_ok();
        if !valid {
            return Err(format!(
                "spec.externalAuth.http.path: {path:?} is not a valid absolute path and query"
            ));
        }
        auth.path = AuthPath::Fixed(path.to_owned());
        auth.request_headers = HeaderSelection::All;
        auth.original_headers = true;
        if http.is_some_and(|h| h.allowed_response_headers.is_empty()) {
            auth.response_headers = HeaderSelection::Only(Vec::new());
        }
    }
    Ok(auth)
}

/// True for an HTTP authorizer asked as ingress-nginx's `auth-url` asks.
fn nginx_style(spec: &ExternalAuthPolicy) -> bool {
    spec.protocol == ExternalAuthProtocol::Http
        && spec.http.as_ref().and_then(|h| h.style) == Some(ExternalAuthStyle::IngressNginx)
}
