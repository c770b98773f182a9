//! `ProxyConfig` (v1alpha1, deprecated): the flat shape of the proxy settings, drain time in
//! whole seconds. Converted to `v1beta1` for everything that reads it.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::kinds::crd::proxy_config::{AccessLogField, AccessLogFormat, ServiceType};
use crate::kinds::crd::rules::CIDRS;
use crate::kinds::crd::DURATION_PATTERN;

/// The settings of the proxy serving the Gateways that reference this object (deprecated:
/// use v1beta1).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "edgeplane.dev",
    version = "v1alpha1",
    kind = "ProxyConfig",
    plural = "proxyconfigs",
    shortname = "pxc",
    category = "edgeplane",
    namespaced,
    deprecated = "edgeplane.dev/v1alpha1 ProxyConfig is deprecated; use edgeplane.dev/v1beta1",
    derive = "Default",
    derive = "PartialEq",
    printcolumn(
        name = "Service type",
        type_ = "string",
        json_path = ".spec.serviceType"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProxyConfigSpec {
    /// Type of the Service made for each Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_type: Option<ServiceType>,
    /// Annotations put on that Service.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_log_format: Option<AccessLogFormat>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_log_fields: Vec<AccessLogField>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_header_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_body_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub handshake_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub request_header_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub body_idle_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub idle_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub tcp_idle_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2_max_concurrent_streams: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub http2_keepalive_interval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub http2_keepalive_timeout: Option<String>,
    /// Peers whose forwarding headers are trusted.
    #[serde(
        default,
        rename = "trustedProxyCIDRs",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(length(max = 256), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new(CIDRS.0).message(CIDRS.1))]
    pub trusted_proxy_cidrs: Vec<String>,
    /// Time in-flight requests get to finish when a listener goes away, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 99999))]
    pub drain_seconds: Option<u32>,
}
