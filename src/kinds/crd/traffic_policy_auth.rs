//! `TrafficPolicy.spec.externalAuth` (v1beta1): an external authorizer every request of the
//! policy's targets must pass, in the shape of Gateway API's HTTPRoute `ExternalAuth` filter
//! plus what the filter does not say (sub-request method, sign-in redirect, timeout, failure
//! mode); and `spec.errorPages`, whose error page Service is referenced the same way.
//! `v1alpha1` has neither field: conversion keeps them in its annotation.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rules::POSITIVE_DURATION;
use super::{DURATION_PATTERN, HEADER_NAME_PATTERN};

/// An external authorizer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalAuthPolicy {
    /// `HTTP` (a sub-request; 2xx allows) or `GRPC` (Envoy's
    /// `envoy.service.auth.v3.Authorization/Check`).
    pub protocol: ExternalAuthProtocol,
    /// The authorizer's Service and port; in another namespace only where a ReferenceGrant
    /// there allows references from TrafficPolicies of this namespace.
    pub backend_ref: AuthBackendRef,
    /// HTTP settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<ExternalAuthHttp>,
    /// gRPC settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<ExternalAuthGrpc>,
    /// Forward the request body to the authorizer, up to `maxSize` bytes (a longer body is
    /// cut for the check; the backend gets all of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_body: Option<ForwardBody>,
    /// How long the authorizer may take to answer (default 1s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    #[x_kube(validation = Rule::new(POSITIVE_DURATION.0).message(POSITIVE_DURATION.1))]
    pub timeout: Option<String>,
    /// Let requests through when the authorizer cannot answer (default false: refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_open: Option<bool>,
    /// The status of a request refused because the authorizer could not answer (default 403,
    /// as Envoy's `ext_authz`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 200, max = 599))]
    pub status_on_error: Option<u16>,
}

/// Error pages: when a backend answers one of `statusCodes`, that answer is dropped and the
/// client gets what `backendRef` answers to a `GET /` (a `HEAD` stays `HEAD`) carrying
/// `X-Code`, `X-Format`, `X-Original-URI`, `X-Namespace`, `X-Ingress-Name`, `X-Service-Name`,
/// `X-Service-Port` and `X-Request-ID`, as ingress-nginx's `custom-http-errors` asks its
/// default backend.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorPagesPolicy {
    /// The backend statuses replaced (400 to 599, at least one).
    #[schemars(length(min = 1, max = 64), inner(range(min = 400, max = 599)))]
    pub status_codes: Vec<u16>,
    /// The Service and port answering the error pages; in another namespace only where a
    /// ReferenceGrant there allows references from TrafficPolicies of this namespace.
    pub backend_ref: AuthBackendRef,
}

/// The authorizer's protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ExternalAuthProtocol {
    #[default]
    #[serde(rename = "HTTP")]
    Http,
    #[serde(rename = "GRPC")]
    Grpc,
}

/// A Service port (Gateway API `BackendObjectReference`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthBackendRef {
    /// `""` (core) for a Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// `Service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

/// HTTP authorizer settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalAuthHttp {
    /// A prefix put before the client's path in the sub-request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub path: Option<String>,
    /// Client headers sent besides `Host`, `Authorization` and `Content-Length`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = HEADER_NAME_PATTERN)))]
    pub allowed_headers: Vec<String>,
    /// Headers of an allowing answer set on the upstream request (empty: all of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = HEADER_NAME_PATTERN)))]
    pub allowed_response_headers: Vec<String>,
    /// The sub-request's method (default: the client's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[A-Z]+$"))]
    pub method: Option<String>,
    /// A sign-in URL: a 401 from the authorizer becomes a 302 to it with the original URL
    /// in its `rd` query parameter.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "signinURL")]
    #[schemars(length(min = 1, max = 2048))]
    pub signin_url: Option<String>,
    /// How the sub-request is made (see [`ExternalAuthStyle`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<ExternalAuthStyle>,
}

/// How the HTTP sub-request is made. `GatewayAPI` (default): `path` is a prefix put before
/// the client's path, the headers in `allowedHeaders` are sent, and those of
/// `allowedResponseHeaders` copied upstream (all when it is empty). `IngressNginx`, as
/// ingress-nginx's `auth-url`: `path` is the whole path and query (the client's path is not
/// added), every client header is sent, `X-Original-URL`, `X-Original-Method` and
/// `X-Auth-Request-Redirect` carry the original request, and only the headers in
/// `allowedResponseHeaders` are copied upstream (none when it is empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ExternalAuthStyle {
    /// Gateway API's `ExternalAuth` filter's.
    #[default]
    #[serde(rename = "GatewayAPI")]
    GatewayApi,
    /// ingress-nginx's `auth-url`.
    IngressNginx,
}

/// gRPC authorizer settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalAuthGrpc {
    /// Client headers sent (empty: all of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = HEADER_NAME_PATTERN)))]
    pub allowed_headers: Vec<String>,
}

/// Request body forwarding.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForwardBody {
    /// Bytes forwarded at most (0: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u32>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::kinds::crd::convert;

    #[test]
    fn conversion_to_v1alpha1_and_back_keeps_external_auth() {
        let beta = json!({
            "apiVersion": "edgeplane.dev/v1beta1",
            "kind": "TrafficPolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "r"}],
                "externalAuth": {
                    "protocol": "GRPC",
                    "backendRef": {"name": "authz", "port": 9000},
                    "timeout": "250ms",
                    "statusOnError": 503
                }
            }
        });
        let alpha = convert(beta.clone(), "edgeplane.dev/v1alpha1").unwrap();
        assert!(alpha["spec"].get("externalAuth").is_none());
        let back = convert(alpha, "edgeplane.dev/v1beta1").unwrap();
        assert_eq!(back, beta);
    }
}
