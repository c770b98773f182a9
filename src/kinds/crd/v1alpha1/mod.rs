//! The `v1alpha1` shape of the edgeplane kinds: flat specs, one target per policy, one JWT
//! issuer, rate limits per second by client address, drain time in whole seconds. Still
//! served (deprecated) and converted to and from `v1beta1` by [`super::convert`](mod@super::convert); nothing
//! else reads it.

pub mod proxy_config;
pub mod traffic_policy;

pub use proxy_config::{ProxyConfig, ProxyConfigSpec};
pub use traffic_policy::{TrafficPolicy, TrafficPolicySpec};

/// The version these types are served at.
pub const VERSION: &str = "v1alpha1";
