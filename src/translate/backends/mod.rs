//! Backends: a backendRef resolved to a Service port and its endpoints, and the
//! BackendTLSPolicies that say how the proxy reaches it; and what Service-targeted
//! TrafficPolicies put on a Service port (`ServiceOverlays`: computed by `policy`, read here).

pub(super) mod endpoints;
mod error;
pub(super) mod resolve;
pub(super) mod tls;

use std::sync::Arc;

use foldhash::HashMap;

use crate::table::{Balance, ServiceLimits};

/// What Service-targeted policies put on one Service port.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceOverlay {
    /// Replaces the balancer the Service's annotations choose.
    pub balance: Option<Balance>,
    pub limits: Option<Arc<ServiceLimits>>,
}

/// Overlays by (namespace, Service name, port number).
pub type ServiceOverlays = HashMap<(String, String, i32), ServiceOverlay>;
