//! The provider-neutral input of one translation: every object the translator may read.
//! Providers (a config directory, Kubernetes reflectors) fill it; `translate` only reads it.

use std::collections::BTreeMap;
use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Namespace of a namespaced object that names none, as `kubectl apply` and the API server
/// treat it.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The namespace an object is in: its own, else [`DEFAULT_NAMESPACE`].
pub fn namespace_of(meta: &ObjectMeta) -> &str {
    or_default_namespace(meta.namespace.as_deref())
}

/// `namespace`, else [`DEFAULT_NAMESPACE`]: the one place that rule is written.
pub fn or_default_namespace(namespace: Option<&str>) -> &str {
    namespace.unwrap_or(DEFAULT_NAMESPACE)
}

/// Every object one translation reads. Objects are behind `Arc` so that a provider can hand over
/// the contents of its caches without deep copies; cloning a snapshot is cheap.
///
/// Objects without `metadata.namespace` are treated as being in `default` by the translator, so
/// providers may pass them through unchanged.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub gateway_classes: Vec<Arc<GatewayClass>>,
    pub gateways: Vec<Arc<Gateway>>,
    pub http_routes: Vec<Arc<HttpRoute>>,
    pub reference_grants: Vec<Arc<ReferenceGrant>>,
    /// Only labels are read (for `allowedRoutes.namespaces.selector`).
    pub namespaces: Vec<Arc<Namespace>>,
    pub services: Vec<Arc<Service>>,
    /// Matched to Services by the `kubernetes.io/service-name` label.
    pub endpoint_slices: Vec<Arc<EndpointSlice>>,
    /// Secrets that listeners may reference for TLS certificates (`tls.crt`, `tls.key`).
    /// Providers should pass only referenced Secrets: the translator reads nothing else.
    pub secrets: Vec<Arc<Secret>>,
    /// Where listeners bind. `None` (standalone): every listener binds its own port on the
    /// Gateway's addresses. `Some` (cluster): each Gateway binds the ports its Service maps to;
    /// a Gateway without an entry is not bound yet.
    pub gateway_bindings: Option<Arc<GatewayBindings>>,
}

/// Bindings of every Gateway, keyed by `(namespace, name)`.
pub type GatewayBindings = BTreeMap<(String, String), GatewayBinding>;

/// How one Gateway is exposed in a cluster: the ports of its Service and the addresses clients
/// reach it on. Computed by the provider from the Service it keeps per Gateway, so that the
/// translator can stay pure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GatewayBinding {
    /// Listener port -> the port every replica binds for it (the Service's `targetPort`).
    pub ports: BTreeMap<u16, u16>,
    /// `(type, value)` pairs for `status.addresses` (`IPAddress` or `Hostname`).
    pub addresses: Vec<(String, String)>,
}

impl Snapshot {
    /// Number of objects of all kinds, for logs and metrics.
    pub fn len(&self) -> usize {
        self.gateway_classes.len()
            + self.gateways.len()
            + self.http_routes.len()
            + self.reference_grants.len()
            + self.namespaces.len()
            + self.services.len()
            + self.endpoint_slices.len()
            + self.secrets.len()
    }

    /// True when the snapshot holds no object at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
