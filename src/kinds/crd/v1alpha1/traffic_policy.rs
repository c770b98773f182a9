//! `TrafficPolicy` (v1alpha1, deprecated): one `targetRef` and flat settings. Converted to
//! `v1beta1` (a `targetRefs` list and grouped settings) for everything that reads it.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::kinds::crd::rules::{
    ALPHA_BACKEND_WITHIN_REQUEST, ALPHA_HASH, ALPHA_JWT, ALPHA_REQUEST_SCOPED,
    ALPHA_SERVICE_SCOPED, CIDRS, POSITIVE_DURATION,
};
use crate::kinds::crd::traffic_policy::{
    LoadBalancerAlgorithm, PolicyTargetRef, TrafficPolicyStatus,
};
use crate::kinds::crd::{DURATION_PATTERN, HEADER_NAME_PATTERN};

/// Traffic settings for the target named in `targetRef` (deprecated: use v1beta1).
// Two printer columns share a type; clippy takes that for a repeated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "edgeplane.dev",
    version = "v1alpha1",
    kind = "TrafficPolicy",
    plural = "trafficpolicies",
    shortname = "tp",
    category = "edgeplane",
    namespaced,
    status = "TrafficPolicyStatus",
    deprecated = "edgeplane.dev/v1alpha1 TrafficPolicy is deprecated; use edgeplane.dev/v1beta1",
    derive = "Default",
    derive = "PartialEq",
    printcolumn(name = "Target", type_ = "string", json_path = ".spec.targetRef.name"),
    printcolumn(
        name = "Accepted",
        type_ = "string",
        description = "Ancestors that accept the policy, of all its ancestors",
        json_path = ".status.accepted"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new(ALPHA_SERVICE_SCOPED.0).message(ALPHA_SERVICE_SCOPED.1))]
#[x_kube(validation = Rule::new(ALPHA_REQUEST_SCOPED.0).message(ALPHA_REQUEST_SCOPED.1))]
#[x_kube(validation = Rule::new(ALPHA_HASH.0).message(ALPHA_HASH.1))]
#[x_kube(validation = Rule::new(ALPHA_JWT.0).message(ALPHA_JWT.1))]
#[x_kube(validation = Rule::new(ALPHA_BACKEND_WITHIN_REQUEST.0).message(ALPHA_BACKEND_WITHIN_REQUEST.1))]
#[serde(rename_all = "camelCase")]
pub struct TrafficPolicySpec {
    /// The object this policy applies to, in the policy's namespace.
    pub target_ref: PolicyTargetRef,
    /// The whole request, retries included (a Gateway API duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub request_timeout: Option<String>,
    /// One try to a backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub backend_request_timeout: Option<String>,
    /// Retries after the first try.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub retries: Option<u32>,
    /// Response codes that are retried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(range(min = 400, max = 599)))]
    pub retry_on: Vec<u16>,
    /// First backoff between tries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub retry_backoff: Option<String>,
    /// Retries in flight per Service, as a share of its active requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 100))]
    pub retry_budget_percent: Option<u32>,
    /// Load-balancing algorithm of a Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancing: Option<LoadBalancerAlgorithm>,
    /// Consistent hashing on this header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = HEADER_NAME_PATTERN))]
    pub hash_header: Option<String>,
    /// Consistent hashing on this cookie.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub hash_cookie: Option<String>,
    /// Consistent hashing on the client address.
    #[serde(
        default,
        rename = "hashSourceIP",
        skip_serializing_if = "Option::is_none"
    )]
    pub hash_source_ip: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_connections: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_pending_requests: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_requests: Option<u32>,
    /// Consecutive errors that eject an endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub eject_after_errors: Option<u32>,
    /// First ejection time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    #[x_kube(validation = Rule::new(POSITIVE_DURATION.0).message(POSITIVE_DURATION.1))]
    pub ejection_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 100))]
    pub max_ejection_percent: Option<u32>,
    /// Requests per second per client address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub requests_per_second: Option<u32>,
    /// Requests allowed at once above the steady rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// Secret (key `.htpasswd`) with the htpasswd lines of basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth_secret: Option<String>,
    /// Realm of the basic authentication challenge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realm: Option<String>,
    /// Required `iss` of JWT bearer tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub jwt_issuer: Option<String>,
    /// `aud` must contain one of these when set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jwt_audiences: Vec<String>,
    /// Secret (key `jwks.json`) with the JSON Web Key Set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_secret: Option<String>,
    /// Client addresses allowed (all when empty).
    #[serde(default, rename = "allowCIDRs", skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new(CIDRS.0).message(CIDRS.1))]
    pub allow_cidrs: Vec<String>,
    /// Client addresses denied.
    #[serde(default, rename = "denyCIDRs", skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new(CIDRS.0).message(CIDRS.1))]
    pub deny_cidrs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_body_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_body_bytes: Option<u64>,
}
