//! External authorization settings compiled to the table's `ExternalAuth`: the HTTPRoute
//! `ExternalAuth` filter here, and the same settings from a TrafficPolicy's `externalAuth`
//! (`translate::policy`) through [`compile_auth`]. The authorizer's backendRef is resolved
//! like any backendRef (kind, port, ReferenceGrant for another namespace); one that does not
//! resolve leaves the check in place with an invalid backend, so requests fail closed. Pure.

use std::time::Duration;

use crate::kinds::httproute::{
    HttpRouteRulesFiltersExternalAuth as Spec, HttpRouteRulesFiltersExternalAuthProtocol as P,
};
use http::{HeaderName, Method};

use crate::request::validate_config_path;
use crate::table::{
    AuthBackend, AuthPath, AuthProtocol, ExternalAuth, FailureMode, HeaderSelection,
    DEFAULT_TIMEOUT,
};

/// A backendRef of an authorizer as written, still to resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthRef {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub name: String,
    pub namespace: Option<String>,
    pub port: Option<i32>,
}

/// An `ExternalAuth` filter compiled, its backend not yet resolved (`Invalid` until then).
#[derive(Debug, Clone, PartialEq)]
pub struct AuthSpec {
    pub auth: ExternalAuth,
    pub backend_ref: AuthRef,
}

/// The settings both the filter and the TrafficPolicy field give, borrowed.
#[derive(Debug, Default)]
pub struct AuthParams<'a> {
    pub grpc: bool,
    /// HTTP `path` (a prefix).
    pub path: Option<&'a str>,
    /// Request headers sent; `None` or empty: Gateway API's default for the protocol.
    pub allowed_headers: Option<&'a [String]>,
    /// HTTP answer headers copied upstream; `None` or empty: all.
    pub allowed_response_headers: Option<&'a [String]>,
    pub method: Option<&'a str>,
    pub signin: Option<&'a str>,
    pub timeout: Option<Duration>,
    pub failure: FailureMode,
    pub forward_body: Option<i64>,
    pub source: String,
}

/// Checks and compiles the settings of one external authorization (the backend left
/// `Invalid` for the caller to resolve).
pub fn compile_auth(p: AuthParams<'_>) -> Result<ExternalAuth, String> {
    let names = |list: Option<&[String]>, field: &str| -> Result<Vec<HeaderName>, String> {
        list.unwrap_or_default()
            .iter()
            .map(|n| {
                HeaderName::from_bytes(n.as_bytes())
                    .map_err(|_| format!("{field}: invalid header name {n:?}"))
            })
            .collect()
    };
    let request = names(p.allowed_headers, "allowedHeaders")?;
    let response = names(p.allowed_response_headers, "allowedResponseHeaders")?;
    // gRPC sends every header unless told which; HTTP only the fixed ones and those listed.
    let request_headers = match (p.grpc, request.is_empty()) {
        (true, true) => HeaderSelection::All,
        _ => HeaderSelection::Only(request),
    };
    let response_headers = match response.is_empty() {
        true => HeaderSelection::All,
        false => HeaderSelection::Only(response),
    };
    let path = match p.path.filter(|p| !p.is_empty()) {
        Some(path) if validate_config_path(path).is_ok() && path.starts_with('/') => {
            AuthPath::Prefix(path.to_owned())
        }
        Some(path) => return Err(format!("path {path:?} is not a valid absolute path")),
        None => AuthPath::Prefix(String::new()),
    };
    let method = match p.method {
        Some(m) => Some(Method::from_bytes(m.as_bytes()).map_err(|_| format!("method {m:?}"))?),
        None => None,
    };
    if let Some(url) = p.signin {
        if http::HeaderValue::from_str(url).is_err() || url.is_empty() {
            return Err(format!("sign-in URL {url:?} is not a valid header value"));
        }
    }
    let forward_body = match p.forward_body {
        Some(n) => u64::try_from(n).map_err(|_| format!("forwardBody.maxSize {n} is negative"))?,
        None => 0,
    };
    if !(200..=599).contains(&p.failure.status) {
        return Err(format!(
            "statusOnError {} is not 200 to 599",
            p.failure.status
        ));
    }
    Ok(ExternalAuth {
        protocol: if p.grpc {
            AuthProtocol::Grpc
        } else {
            AuthProtocol::Http
        },
        backend: AuthBackend::Invalid {
            reason: "not resolved".into(),
        },
        path,
        request_headers,
        response_headers,
        method,
        signin: p.signin.map(str::to_owned),
        original_headers: false,
        timeout: p.timeout.unwrap_or(DEFAULT_TIMEOUT),
        failure: p.failure,
        forward_body,
        source: p.source,
    })
}

/// The HTTPRoute `ExternalAuth` filter: Gateway API's settings, which fail closed with 403
/// and wait [`DEFAULT_TIMEOUT`] for an answer.
pub fn compile_filter(spec: &Spec) -> Result<AuthSpec, String> {
    let grpc = matches!(spec.protocol, P::Grpc);
    let params = AuthParams {
        grpc,
        path: spec.http.as_ref().and_then(|h| h.path.as_deref()),
        allowed_headers: match grpc {
            true => spec
                .grpc
                .as_ref()
                .and_then(|g| g.allowed_headers.as_deref()),
            false => spec
                .http
                .as_ref()
                .and_then(|h| h.allowed_headers.as_deref()),
        },
        allowed_response_headers: spec
            .http
            .as_ref()
            .and_then(|h| h.allowed_response_headers.as_deref()),
        forward_body: spec.forward_body.as_ref().and_then(|b| b.max_size),
        ..Default::default()
    };
    let r = &spec.backend_ref;
    Ok(AuthSpec {
        auth: compile_auth(params)?,
        backend_ref: AuthRef {
            group: r.group.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            namespace: r.namespace.clone(),
            port: r.port,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> Spec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn filter_defaults_follow_the_protocol() {
        let http = compile_filter(&spec("protocol: HTTP\nbackendRef: {name: auth, port: 80}\nhttp: {path: /check, allowedHeaders: [X-Tenant], allowedResponseHeaders: [X-User]}\nforwardBody: {maxSize: 16}\n")).unwrap();
        assert_eq!(http.auth.protocol, AuthProtocol::Http);
        assert_eq!(http.auth.path, AuthPath::Prefix("/check".into()));
        assert_eq!(
            http.auth.request_headers,
            HeaderSelection::Only(vec![HeaderName::from_static("x-tenant")])
        );
        assert_eq!(
            http.auth.response_headers,
            HeaderSelection::Only(vec![HeaderName::from_static("x-user")])
        );
        assert_eq!(
            (http.auth.forward_body, http.auth.timeout),
            (16, DEFAULT_TIMEOUT)
        );
        assert_eq!(
            http.auth.failure,
            FailureMode {
                allow: false,
                status: 403
            }
        );
        assert_eq!(http.backend_ref.port, Some(80));
        let grpc = compile_filter(&spec(
            "protocol: GRPC\nbackendRef: {name: authz, namespace: sec, port: 9000}\n",
        ))
        .unwrap();
        assert_eq!(grpc.auth.request_headers, HeaderSelection::All);
        assert_eq!(grpc.auth.response_headers, HeaderSelection::All);
        assert_eq!(grpc.backend_ref.namespace.as_deref(), Some("sec"));
        assert_eq!(grpc.auth.forward_body, 0);
    }

    #[test]
    fn bad_settings_are_refused() {
        for yaml in [
            "protocol: HTTP\nbackendRef: {name: a, port: 80}\nhttp: {path: \"/a b\"}\n",
            "protocol: HTTP\nbackendRef: {name: a, port: 80}\nhttp: {allowedHeaders: [\"bad header\"]}\n",
            "protocol: HTTP\nbackendRef: {name: a, port: 80}\nforwardBody: {maxSize: -1}\n",
        ] {
            assert!(compile_filter(&spec(yaml)).is_err(), "{yaml}");
        }
    }
}
