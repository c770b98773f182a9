//! `TrafficPolicy` (v1beta1): traffic settings attached by `targetRefs` (Gateway API policy
//! attachment) to a Gateway, one of its listeners (`sectionName`), an HTTPRoute, one of its
//! rules (`sectionName` = rule name) or a Service. Where several policies set the same
//! setting for one request, the most specific target wins (rule, route, Service, listener,
//! Gateway), then the oldest policy.

use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicyStatusAncestors;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rules::{
    BACKEND_WITHIN_REQUEST, CIDRS, HASH_ONLY_WITH_CONSISTENT_HASH, IP_ACCESS_NOT_EMPTY,
    JWKS_ONE_SOURCE, JWT_UNIQUE_NAMES, ONE_HASH_KEY, POSITIVE_DURATION, RATE_KEY_HEADER,
    REQUEST_SCOPED, SECTION_NAME_TARGETS, SERVICE_SCOPED, TARGET_COUNT, TARGET_KINDS,
};
use super::{DURATION_PATTERN, HEADER_NAME_PATTERN};

/// Traffic settings for the targets named in `targetRefs`.
// Two printer columns share a type; clippy takes that for a repeated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "edgeplane.dev",
    version = "v1beta1",
    kind = "TrafficPolicy",
    plural = "trafficpolicies",
    shortname = "tp",
    category = "edgeplane",
    namespaced,
    status = "TrafficPolicyStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn(
        name = "Targets",
        type_ = "integer",
        description = "The number of targetRefs",
        json_path = ".status.targets"
    ),
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
#[x_kube(validation = Rule::new(SERVICE_SCOPED.0).message(SERVICE_SCOPED.1))]
#[x_kube(validation = Rule::new(REQUEST_SCOPED.0).message(REQUEST_SCOPED.1))]
#[serde(rename_all = "camelCase")]
pub struct TrafficPolicySpec {
    /// The objects this policy applies to, all in the policy's namespace (1 to 16).
    #[schemars(length(max = 16))]
    #[x_kube(validation = Rule::new(TARGET_COUNT.0).message(TARGET_COUNT.1))]
    pub target_refs: Vec<PolicyTargetRef>,
    /// Request and per-try timeouts (as HTTPRoute `rules[].timeouts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<PolicyTimeouts>,
    /// Retries of failed requests, and the budget that bounds them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<PolicyRetry>,
    /// How a request picks an endpoint of a Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerPolicy>,
    /// Limits per Service above which requests are shed with 503.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit_breaker: Option<CircuitBreakerPolicy>,
    /// Passive ejection of failing endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetectionPolicy>,
    /// Local (per replica) rate limiting; over the limit requests get 429 with `Retry-After`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimitPolicy>,
    /// Requests of one client address being processed at once; over the limit requests get
    /// 503. A request counts until its response body is sent or it is cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_limit: Option<ConcurrencyLimitPolicy>,
    /// HTTP basic authentication against an htpasswd file in a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuthPolicy>,
    /// JWT bearer token validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<JwtPolicy>,
    /// Client address allow and deny lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_access: Option<IpAccessPolicy>,
    /// Request and response body size limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_limits: Option<BodyLimitsPolicy>,
    /// An external authorizer every request must pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_auth: Option<super::traffic_policy_auth::ExternalAuthPolicy>,
    /// Error pages: a backend answer with one of these statuses is replaced by the answer of
    /// another Service (ingress-nginx's `custom-http-errors`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_pages: Option<super::traffic_policy_auth::ErrorPagesPolicy>,
}

/// One target of a policy (Gateway API `LocalPolicyTargetReferenceWithSectionName`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new(TARGET_KINDS.0).message(TARGET_KINDS.1))]
#[x_kube(validation = Rule::new(SECTION_NAME_TARGETS.0).message(SECTION_NAME_TARGETS.1))]
#[serde(rename_all = "camelCase")]
pub struct PolicyTargetRef {
    /// `gateway.networking.k8s.io` for Gateway and HTTPRoute, `""` for Service.
    #[schemars(length(max = 253))]
    pub group: String,
    /// `Gateway`, `HTTPRoute` or `Service`.
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// A listener name of a Gateway, a rule name of an HTTPRoute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub section_name: Option<String>,
}

/// Timeouts (Gateway API durations such as `10s`, `500ms`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new(BACKEND_WITHIN_REQUEST.0).message(BACKEND_WITHIN_REQUEST.1))]
#[serde(rename_all = "camelCase")]
pub struct PolicyTimeouts {
    /// The whole request, retries included; 504 when it elapses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub request: Option<String>,
    /// One try to a backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub backend_request: Option<String>,
}

/// Retries (as HTTPRoute `rules[].retry`) plus the Service's retry budget.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRetry {
    /// Retries after the first try (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub attempts: Option<u32>,
    /// Response codes that are retried (400 to 599; connection failures always are).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(range(min = 400, max = 599)))]
    pub codes: Vec<u16>,
    /// First backoff between tries (doubles each time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub backoff: Option<String>,
    /// Retries in flight per Service, as a share of its active requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<RetryBudget>,
}

/// The retry budget of a Service.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetryBudget {
    /// Percent of active requests that may be retries (0 to 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 100))]
    pub percent: Option<u32>,
    /// Retries always allowed whatever the percent says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_retries: Option<u32>,
}

/// Load-balancing algorithm and, for consistent hashing, its key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new(HASH_ONLY_WITH_CONSISTENT_HASH.0).message(HASH_ONLY_WITH_CONSISTENT_HASH.1))]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerPolicy {
    /// `LeastRequest` (default), `RoundRobin` or `ConsistentHash`.
    #[serde(default)]
    pub algorithm: LoadBalancerAlgorithm,
    /// What is hashed (with `ConsistentHash` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<HashKey>,
}

/// Load-balancing algorithms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum LoadBalancerAlgorithm {
    #[default]
    LeastRequest,
    RoundRobin,
    ConsistentHash,
}

/// The key of consistent hashing: exactly one of the fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new(ONE_HASH_KEY.0).message(ONE_HASH_KEY.1))]
#[serde(rename_all = "camelCase")]
pub struct HashKey {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = HEADER_NAME_PATTERN))]
    pub header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub cookie: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub query_parameter: Option<String>,
    /// Hash the client address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ip: Option<bool>,
    /// Hash the request path as sent, without the query (nginx's `$uri`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<bool>,
    /// Hash the request path and query as sent (nginx's `$request_uri`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_and_query: Option<bool>,
}

/// Circuit-breaker limits of a Service (each at least 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CircuitBreakerPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_connections: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_pending_requests: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_requests: Option<u32>,
}

/// Outlier detection of a Service's endpoints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutlierDetectionPolicy {
    /// Consecutive 5xx answers (or connect failures) that eject an endpoint (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub consecutive_errors: Option<u32>,
    /// First ejection time (longer than 0s; grows with each ejection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    #[x_kube(validation = Rule::new(POSITIVE_DURATION.0).message(POSITIVE_DURATION.1))]
    pub base_ejection_time: Option<String>,
    /// Most of a Service's endpoints ejected at once, in percent (0 to 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 100))]
    pub max_ejection_percent: Option<u32>,
}

/// A token bucket per key: `requests` per `unit`, with `burst` extra.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitPolicy {
    /// Requests per `unit` (at least 1).
    #[schemars(range(min = 1))]
    pub requests: u32,
    /// `Second` (default), `Minute` or `Hour`.
    #[serde(default)]
    pub unit: RateLimitUnit,
    /// Requests allowed at once above the steady rate (bucket size = requests + burst).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// What one bucket counts; one bucket per client address by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<RateLimitKey>,
}

/// At most `perClient` requests of one client address (after trusted proxies) at once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrencyLimitPolicy {
    /// Requests of one client address in progress at once (at least 1).
    #[schemars(range(min = 1))]
    pub per_client: u32,
}

/// Rate limit time units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RateLimitUnit {
    #[default]
    Second,
    Minute,
    Hour,
}

/// What one rate-limit bucket counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new(RATE_KEY_HEADER.0).message(RATE_KEY_HEADER.1))]
#[serde(rename_all = "camelCase")]
pub struct RateLimitKey {
    /// `ClientIP` (default), `Header` or `Route`.
    #[serde(default, rename = "type")]
    pub type_: RateLimitKeyType,
    /// The header whose value is the key (with `type: Header`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = HEADER_NAME_PATTERN))]
    pub header: Option<String>,
}

/// Rate limit key types.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RateLimitKeyType {
    /// One bucket per client address (after trusted proxies).
    #[default]
    ClientIP,
    /// One bucket per value of a request header (requests without it share one).
    Header,
    /// One bucket for every request the policy applies to.
    Route,
}

/// Basic authentication.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BasicAuthPolicy {
    /// A Secret in the policy's namespace whose key (default `.htpasswd`) holds htpasswd lines
    /// (bcrypt `$2y$` or `{SHA}`).
    pub secret_ref: LocalObjectKeyRef,
    /// The realm of the `WWW-Authenticate` challenge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realm: Option<String>,
}

/// A key of a Secret or ConfigMap in the policy's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectKeyRef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// JWT validation: a request must carry a bearer token signed by one of the providers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct JwtPolicy {
    /// Accepted issuers (1 to 16, unique names).
    #[schemars(length(min = 1, max = 16))]
    #[x_kube(validation = Rule::new(JWT_UNIQUE_NAMES.0).message(JWT_UNIQUE_NAMES.1))]
    pub providers: Vec<JwtProvider>,
    /// When true, requests without a token pass (tokens present are still validated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// One token issuer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JwtProvider {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Required `iss` claim.
    #[schemars(length(min = 1))]
    pub issuer: String,
    /// `aud` must contain one of these when set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
    /// Where the JSON Web Key Set is.
    pub jwks: JwksSource,
    /// Claims copied into request headers for the backend.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims_to_headers: Vec<ClaimToHeader>,
}

/// A JWKS document in a Secret or a ConfigMap (exactly one; key default `jwks.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new(JWKS_ONE_SOURCE.0).message(JWKS_ONE_SOURCE.1))]
#[serde(rename_all = "camelCase")]
pub struct JwksSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectKeyRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<LocalObjectKeyRef>,
}

/// A claim copied to a request header.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimToHeader {
    pub claim: String,
    #[schemars(regex(pattern = HEADER_NAME_PATTERN))]
    pub header: String,
}

/// Client address lists: a request from a denied address, or (when `allow` is set) from an
/// address not allowed, gets 403.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new(IP_ACCESS_NOT_EMPTY.0).message(IP_ACCESS_NOT_EMPTY.1))]
#[serde(rename_all = "camelCase")]
pub struct IpAccessPolicy {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new(CIDRS.0).message(CIDRS.1))]
    pub allow: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new(CIDRS.0).message(CIDRS.1))]
    pub deny: Vec<String>,
}

/// Body size limits in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BodyLimitsPolicy {
    /// Larger request bodies get 413.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_bytes: Option<u64>,
    /// Larger response bodies are cut off: 502 before the head is sent, a reset after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_bytes: Option<u64>,
}

/// Policy status: one entry per ancestor (the Gateway a target is attached to), in the shape
/// of Gateway API `PolicyStatus`, and a summary of them for `kubectl get`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrafficPolicyStatus {
    #[serde(default)]
    pub ancestors: Vec<BackendTlsPolicyStatusAncestors>,
    /// How many ancestors accept the policy, of how many: `accepted/total` (`1/2`). The
    /// `Accepted` column of `kubectl get trafficpolicies`: a column shows only the first
    /// match of its JSONPath, so a column over `ancestors[*]` would tell of one ancestor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<String>,
    /// The number of `spec.targetRefs` the status was computed for (the `Targets` column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<u32>,
}

impl TrafficPolicyStatus {
    /// The status of `ancestors` for a policy of `targets` targetRefs, with its summary.
    pub fn summarized(ancestors: Vec<BackendTlsPolicyStatusAncestors>, targets: usize) -> Self {
        let accepted = ancestors
            .iter()
            .filter(|a| {
                a.conditions
                    .iter()
                    .any(|c| c.type_ == "Accepted" && c.status == "True")
            })
            .count();
        Self {
            accepted: Some(format!("{accepted}/{}", ancestors.len())),
            targets: Some(u32::try_from(targets).unwrap_or(u32::MAX)),
            ancestors,
        }
    }
}
