//! `ProxyConfig` (v1alpha1, deprecated): the flat shape of the proxy settings, drain time in
//! whole seconds. Converted to `v1beta1` for everything that reads it.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::crd::proxy_config::{AccessLogField, AccessLogFormat, ServiceType};

/// The settings of the proxy serving the Gateways that reference this object (deprecated:
/// use v1beta1).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "edgeplane.dev",
    version = "v1alpha1",
    kind = "ProxyConfig",
    plural = "proxyconfigs",
    shortname = "pxc",
    namespaced,
    derive = "Default",
    derive = "PartialEq"
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
    pub handshake_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_header_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_idle_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2_max_concurrent_streams: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2_keepalive_interval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2_keepalive_timeout: Option<String>,
    /// Peers whose forwarding headers are trusted.
    #[serde(
        default,
        rename = "trustedProxyCIDRs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub trusted_proxy_cidrs: Vec<String>,
    /// Time in-flight requests get to finish when a listener goes away, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_seconds: Option<u32>,
}
