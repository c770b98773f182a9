//! External authorization as the table carries it: which authorizer a request is checked
//! against before it goes upstream (Gateway API's HTTPRoute `ExternalAuth` filter, a
//! TrafficPolicy's `externalAuth`, and later ingress-nginx's `auth-url` family), what is sent
//! to it, what is copied from its answer, and what happens when it cannot answer. Pure data;
//! `proxy::policy::ext_auth` runs the check.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, Method};
use serde::{Serialize, Serializer};

use super::backend_set::ServiceBackend;

/// Envoy's `ext_authz` default for `status_on_error`: an authorizer that cannot answer (down,
/// timed out, a malformed answer) denies the request with 403, unless `fail_open` is set.
pub const DEFAULT_STATUS_ON_ERROR: u16 = 403;

/// How long the proxy waits for an authorizer's whole answer when the configuration does not
/// say (Envoy's `ext_authz` default timeout is 200 ms; a check over a cold connection and a
/// policy engine often needs more, so we allow a second).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// Largest authorizer response body the proxy reads (a denial's body goes back to the client).
pub const MAX_AUTH_RESPONSE_BODY: usize = 64 * 1024;

/// One external authorization check.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalAuth {
    pub protocol: AuthProtocol,
    /// The authorizer: a resolved Service port, or why it could not be resolved (every
    /// request then fails the check: an access control never opens because it is broken).
    pub backend: AuthBackend,
    /// The path of the HTTP sub-request (unused by gRPC).
    pub path: AuthPath,
    /// Client request headers sent to the authorizer. HTTP always sends `Host`,
    /// `Authorization` and `Content-Length` besides these.
    pub request_headers: HeaderSelection,
    /// Headers of an allowing HTTP answer copied onto the upstream request (gRPC answers say
    /// themselves which headers to set).
    pub response_headers: HeaderSelection,
    /// The sub-request's method; `None` keeps the client's (HTTP only).
    #[serde(serialize_with = "ser_method", skip_serializing_if = "Option::is_none")]
    pub method: Option<Method>,
    /// A sign-in URL: a 401 from the authorizer becomes a 302 to it, with the original URL in
    /// its `rd` query parameter (ingress-nginx's `auth-signin`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signin: Option<String>,
    /// Adds `X-Original-URL`, `X-Original-Method` and `X-Auth-Request-Redirect` to the
    /// sub-request, as ingress-nginx's `auth-url` does (authorizers such as oauth2-proxy read
    /// them).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub original_headers: bool,
    /// The whole exchange with the authorizer (connect, request, answer) must end within it.
    #[serde(serialize_with = "super::filters::ser_duration")]
    pub timeout: Duration,
    pub failure: FailureMode,
    /// Request body bytes forwarded to the authorizer (0: none). A longer body is cut to this
    /// many bytes for the check (`x-envoy-auth-partial-body: true` tells the authorizer); the
    /// backend still gets all of it.
    pub forward_body: u64,
    /// `namespace/name` of the policy, or `Kind/namespace/name` of the route, it comes from.
    pub source: String,
}

/// Which protocol the authorizer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum AuthProtocol {
    /// A plain HTTP sub-request: 2xx allows, any other answer is the client's.
    Http,
    /// Envoy's `envoy.service.auth.v3.Authorization/Check` over HTTP/2.
    Grpc,
}

/// The authorizer's Service port, resolved like any backendRef.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AuthBackend {
    #[serde(serialize_with = "ser_service")]
    Service(Arc<ServiceBackend>),
    Invalid {
        reason: String,
    },
}

impl AuthBackend {
    /// The `backend` label of the external-auth metrics (`namespace/name:port`, or
    /// `invalid`).
    pub fn label(&self) -> String {
        match self {
            Self::Service(s) => s.service.to_string(),
            Self::Invalid { .. } => "invalid".to_owned(),
        }
    }
}

fn ser_service<S: Serializer>(b: &Arc<ServiceBackend>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&b.service)
}

fn ser_method<S: Serializer>(m: &Option<Method>, s: S) -> Result<S::Ok, S::Error> {
    match m {
        Some(m) => s.serialize_str(m.as_str()),
        None => s.serialize_none(),
    }
}

/// The path of the HTTP sub-request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AuthPath {
    /// This prefix then the client's path and query (Gateway API `http.path`; `""` sends the
    /// client's path as it is).
    Prefix(String),
    /// Always this path and query (ingress-nginx's `auth-url`).
    Fixed(String),
}

impl AuthPath {
    /// The sub-request's path and query for a client request to `path_and_query`.
    pub fn target(&self, path_and_query: &str) -> String {
        match self {
            Self::Prefix(prefix) => {
                let prefix = prefix.trim_end_matches('/');
                format!("{prefix}{path_and_query}")
            }
            Self::Fixed(fixed) => fixed.clone(),
        }
    }
}

/// A set of header names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HeaderSelection {
    All,
    #[serde(serialize_with = "ser_names")]
    Only(Vec<HeaderName>),
}

fn ser_names<S: Serializer>(names: &[HeaderName], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(names.iter().map(HeaderName::as_str))
}

impl HeaderSelection {
    /// Whether `name` is in the set.
    pub fn contains(&self, name: &HeaderName) -> bool {
        match self {
            Self::All => true,
            Self::Only(names) => names.contains(name),
        }
    }
}

/// What an authorizer that cannot answer means for the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureMode {
    /// Let the request through (Envoy's `failure_mode_allow`); off by default.
    pub allow: bool,
    /// The status of the refusal otherwise ([`DEFAULT_STATUS_ON_ERROR`]).
    pub status: u16,
}

impl Default for FailureMode {
    fn default() -> Self {
        Self {
            allow: false,
            status: DEFAULT_STATUS_ON_ERROR,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_paths_join_without_doubled_slashes() {
        let p = AuthPath::Prefix("/auth/".into());
        assert_eq!(p.target("/x?y=1"), "/auth/x?y=1");
        assert_eq!(AuthPath::Prefix(String::new()).target("/x"), "/x");
        assert_eq!(
            AuthPath::Fixed("/check?a=b".into()).target("/x"),
            "/check?a=b"
        );
    }

    #[test]
    fn selections_and_failure_defaults() {
        let only = HeaderSelection::Only(vec![HeaderName::from_static("x-user")]);
        assert!(only.contains(&HeaderName::from_static("x-user")));
        assert!(!only.contains(&HeaderName::from_static("cookie")));
        assert!(HeaderSelection::All.contains(&HeaderName::from_static("cookie")));
        assert_eq!(FailureMode::default().status, 403);
        assert!(!FailureMode::default().allow);
    }
}
