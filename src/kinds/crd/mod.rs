//! edgeplane's own custom resources (group `edgeplane.dev`): `ProxyConfig`, the proxy-wide
//! settings of a GatewayClass or Gateway, and `TrafficPolicy`, what the Gateway API does not
//! say about traffic (rate limits, authentication, resilience) attached to Gateways, listeners,
//! routes, rules and Services. `v1beta1` is the storage version and the one the translator
//! reads; `v1alpha1` is the earlier, flatter shape, still served and converted (`convert`),
//! through the conversion webhook (`review`) in a cluster. Pure types; no I/O.

pub mod convert;
mod convert_policy;
mod convert_proxy;
pub mod generate;
pub mod proxy_config;
pub mod review;
pub mod rules;
pub mod traffic_policy;
pub mod traffic_policy_auth;
pub mod v1alpha1;

pub use convert::{convert, needs_storage_conversion, ConvertError, CONVERSION_ANNOTATION};
pub use proxy_config::{ProxyConfig, ProxyConfigSpec};
pub use review::{answer_review, ReviewError};
pub use traffic_policy::{TrafficPolicy, TrafficPolicySpec, TrafficPolicyStatus};

/// The API group of every edgeplane kind.
pub const GROUP: &str = "edgeplane.dev";
/// Gateway API duration strings (`1h`, `30s`, `1s500ms`), as the Gateway API CRDs check them.
pub const DURATION_PATTERN: &str = "^([0-9]{1,5}(h|m|s|ms)){1,4}$";
/// HTTP header names (RFC 9110 tokens), as the translator accepts them.
pub const HEADER_NAME_PATTERN: &str = "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$";
/// The storage version, read by the translator.
pub const STORAGE_VERSION: &str = "v1beta1";
/// `apiVersion` of the storage version.
pub const STORAGE_API_VERSION: &str = "edgeplane.dev/v1beta1";
