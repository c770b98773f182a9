//! `ProxyConfig` (v1beta1): settings of the proxy that serves a Gateway, referenced by a
//! GatewayClass's `spec.parametersRef` (every Gateway of the class) or a Gateway's
//! `spec.infrastructure.parametersRef` (that Gateway; it takes precedence). Every field is
//! optional: what is not set keeps the command line's value.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rules::CIDRS;
use super::DURATION_PATTERN;

/// The settings of the proxy serving the Gateways that reference this object.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "edgeplane.dev",
    version = "v1beta1",
    kind = "ProxyConfig",
    plural = "proxyconfigs",
    shortname = "pxc",
    category = "edgeplane",
    namespaced,
    derive = "Default",
    derive = "PartialEq",
    printcolumn(
        name = "Service type",
        type_ = "string",
        json_path = ".spec.service.type"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProxyConfigSpec {
    /// The Kubernetes Service that exposes each Gateway (cluster mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<GatewayServiceConfig>,
    /// What each request's access log line holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_log: Option<AccessLogConfig>,
    /// Request size limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<RequestLimits>,
    /// Timeouts of client connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_timeouts: Option<ClientTimeouts>,
    /// HTTP/2 limits towards clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<Http2Config>,
    /// Peers (CIDRs) whose `X-Forwarded-For`, `-Proto` and `-Host` are trusted; the client
    /// address used by rate limits and IP lists is then taken from `X-Forwarded-For`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new(CIDRS.0).message(CIDRS.1))]
    pub trusted_proxies: Vec<String>,
    /// Time in-flight requests get to finish when a listener is removed or the proxy stops
    /// (a Gateway API duration, e.g. `30s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub drain_duration: Option<String>,
}

/// Type, annotations and traffic settings of the Service made for each Gateway. Fields a
/// Service type does not take are left off the Service of that type (Kubernetes refuses
/// them): `externalTrafficPolicy` applies to `LoadBalancer` and `NodePort`,
/// `loadBalancerClass` and `loadBalancerSourceRanges` to `LoadBalancer` only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayServiceConfig {
    /// `LoadBalancer` (default), `NodePort` or `ClusterIP`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ServiceType>,
    /// Annotations put on the Service (cloud load-balancer settings).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `Cluster` (default: any node forwards, the client address is lost) or `Local` (only
    /// nodes running a replica receive traffic, and the client address is kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_traffic_policy: Option<ExternalTrafficPolicy>,
    /// The load-balancer implementation that serves the Service (`spec.loadBalancerClass`).
    /// Kubernetes does not let a Service change it: a changed class makes the controller
    /// delete and recreate the Service (a new load balancer, and new external addresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub load_balancer_class: Option<String>,
    /// Client CIDRs the cloud load balancer admits (`spec.loadBalancerSourceRanges`); every
    /// client when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new(CIDRS.0).message(CIDRS.1))]
    pub load_balancer_source_ranges: Vec<String>,
}

/// Which nodes forward a Gateway Service's external traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ExternalTrafficPolicy {
    Cluster,
    Local,
}

/// The Service types a Gateway can be exposed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ServiceType {
    LoadBalancer,
    NodePort,
    #[serde(rename = "ClusterIP")]
    ClusterIp,
}

/// Access log settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessLogConfig {
    /// `JSON` (default) or `Text` (`key=value` pairs), or `Off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<AccessLogFormat>,
    /// The fields written, in this order; every field when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<AccessLogField>,
}

/// Access log line formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AccessLogFormat {
    #[serde(rename = "JSON")]
    Json,
    Text,
    Off,
}

/// Fields of an access log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AccessLogField {
    Time,
    ClientAddress,
    Method,
    Host,
    Path,
    Protocol,
    Status,
    Duration,
    RequestBytes,
    ResponseBytes,
    Gateway,
    Listener,
    Route,
    Rule,
    Upstream,
    UpstreamTime,
    Retries,
    Decision,
    UserAgent,
    RequestId,
    TraceId,
}

/// Size limits of requests from clients.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestLimits {
    /// Largest request head (request line and headers) in bytes; larger ones get 431.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_header_bytes: Option<u32>,
    /// Largest request body in bytes; larger ones get 413. A TrafficPolicy may set a lower one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_body_bytes: Option<u64>,
}

/// Timeouts of client connections (Gateway API durations).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientTimeouts {
    /// TLS handshake and protocol detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub handshake: Option<String>,
    /// Time to send a complete HTTP/1.1 request head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub request_header: Option<String>,
    /// A request body silent for this long is aborted (408).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub body_idle: Option<String>,
    /// A connection without requests for this long is closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub idle: Option<String>,
    /// A TCP or TLS stream (TCPRoute, TLSRoute) with no byte either way for this long is
    /// closed, with its backend connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub tcp_idle: Option<String>,
}

/// HTTP/2 settings towards clients.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Http2Config {
    /// Streams one client may have open at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_streams: Option<u32>,
    /// Interval of keep-alive PINGs (a Gateway API duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub keepalive_interval: Option<String>,
    /// A PING unanswered for this long closes the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub keepalive_timeout: Option<String>,
}
