//! The provider-neutral input of one translation: every object the translator may read, with
//! the declaration of each kind in it. Providers (a config directory, Kubernetes reflectors)
//! fill it as the declaration says; `translate` only reads it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::kinds::httproute::HttpRoute;
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::listenersets::ListenerSet;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::kinds::crd::proxy_config::GatewayServiceConfig;
use crate::kinds::crd::{ProxyConfig, TrafficPolicy};
use crate::kinds::l4::{TcpRoute, UdpRoute};
use crate::kinds::{not_being_deleted, Wanted};

/// Namespace of a namespaced object that names none, as `kubectl apply` and the API server
/// treat it.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The namespace an object is in: its own, else [`DEFAULT_NAMESPACE`].
pub fn namespace_of(meta: &ObjectMeta) -> &str {
    or_default_namespace(meta.namespace.as_deref())
}

/// Whether `meta` names object `ns`/`name` (its namespace defaulted as [`namespace_of`] does).
pub fn is_named(meta: &ObjectMeta, ns: &str, name: &str) -> bool {
    namespace_of(meta) == ns && meta.name.as_deref() == Some(name)
}

/// Object `ns`/`name` of one kind's list in a snapshot: the lookups outside the translator's
/// indexes (Ingress preparation, conversion) written once.
pub fn find_named<'a, K>(objects: &'a [Arc<K>], ns: &str, name: &str) -> Option<&'a Arc<K>>
where
    K: kube::Resource,
{
    objects.iter().find(|o| is_named(o.meta(), ns, name))
}

/// `namespace`, else [`DEFAULT_NAMESPACE`]: the one place that rule is written.
pub fn or_default_namespace(namespace: Option<&str>) -> &str {
    namespace.unwrap_or(DEFAULT_NAMESPACE)
}

/// What only the translator's rules can say about a snapshot, but a provider needs before
/// translating: which Secrets and ConfigMaps the other objects reference (the kube provider
/// fetches only those) and the Service settings of a Gateway (the kube provider shapes each
/// Gateway's Service). Declared here, implemented for [`Snapshot`] by the translator (which owns
/// those rules), and reached through the kind declarations below and through this trait: neither
/// the snapshot nor a provider imports the translator.
pub trait TranslatorRules {
    /// The Secrets listeners reference (certificates, and CA bundles for client validation) and
    /// those TrafficPolicies read (htpasswd files, JWKS), as [`Snapshot::secrets`] fetches them
    /// in a cluster.
    fn referenced_secrets(&self) -> Wanted;

    /// The ConfigMaps Gateways and BackendTLSPolicies reference as CA bundles, and the JWKS
    /// ConfigMaps of TrafficPolicies, as [`Snapshot::config_maps`] fetches them in a cluster.
    fn referenced_config_maps(&self) -> Wanted;

    /// The `service` section of the valid ProxyConfig `gateway` uses (its own, else its
    /// class's), read from this snapshot's GatewayClasses and ProxyConfigs; `None` when none
    /// applies.
    fn gateway_service_config(&self, gateway: &Gateway) -> Option<GatewayServiceConfig>;
}

crate::kinds! {
    /// Every object one translation reads, and the one declaration of each kind the product
    /// reads: its field, its Rust type (which says what is read from files and what is
    /// watched) and how the providers treat it (see [`crate::kinds!`]). Adding a kind is one
    /// line here plus the translator's rules for it.
    ///
    /// Objects are behind `Arc` so that a provider can hand over the contents of its caches
    /// without deep copies; cloning a snapshot is cheap. Objects without `metadata.namespace`
    /// are treated as being in `default` by the translator, so providers may pass them through
    /// unchanged.
    #[derive(Debug, Clone, Default)]
    pub struct Snapshot {
        kinds {
            gateway_classes: GatewayClass,
            /// In a cluster, Gateways being deleted are left out, so every replica closes their
            /// listeners before the finalizer lets them go.
            gateways: Gateway { watched_if(not_being_deleted) },
            /// Listeners contributed to Gateways that allow them (`spec.allowedListeners`).
            listener_sets: ListenerSet,
            http_routes: HttpRoute,
            grpc_routes: GrpcRoute,
            tls_routes: TlsRoute,
            tcp_routes: TcpRoute,
            udp_routes: UdpRoute,
            /// Ingresses (`networking.k8s.io/v1`); only those of our IngressClasses are
            /// translated (`translate::ingress`).
            ingresses: k8s_openapi::api::networking::v1::Ingress,
            ingress_classes: k8s_openapi::api::networking::v1::IngressClass,
            /// A route kind that exists only in the library's tests (see
            /// `crate::kinds::throwaway`).
            #[cfg(test)]
            throwaway_routes: crate::kinds::throwaway::ThrowawayRoute,
            reference_grants: ReferenceGrant,
            /// Only labels are read (for `allowedRoutes.namespaces.selector`).
            namespaces: Namespace { metadata_only },
            services: Service,
            /// Matched to Services by the `kubernetes.io/service-name` label.
            endpoint_slices: EndpointSlice,
            /// Secrets that listeners may reference for TLS certificates (`tls.crt`, `tls.key`).
            /// Providers should pass only referenced Secrets: the translator reads nothing else.
            /// In a cluster only their metadata is watched and referenced ones are fetched.
            secrets: Secret {
                on_read(merge_string_data),
                referenced(Snapshot::referenced_secrets),
            },
            /// ConfigMaps holding CA bundles (`ca.crt`) that Gateways reference for client
            /// certificate validation; in a cluster only referenced ones are fetched.
            config_maps: ConfigMap { referenced(Snapshot::referenced_config_maps) },
            /// TLS to backend Service ports.
            backend_tls_policies: BackendTlsPolicy,
            /// Proxy settings referenced by GatewayClass and Gateway `parametersRef`s.
            proxy_configs: ProxyConfig,
            /// Traffic settings attached to Gateways, listeners, routes, rules and Services.
            traffic_policies: TrafficPolicy,
        }
        /// Where listeners bind. `None` (standalone): every listener binds its own port on the
        /// Gateway's addresses. `Some` (cluster): each Gateway binds the ports its Service maps
        /// to; a Gateway without an entry is not bound yet.
        pub gateway_bindings: Option<Arc<GatewayBindings>>,
    }
}

/// Moves `stringData` into `data` (`stringData` wins on equal keys), as the API server does on
/// write, so the translator reads one map: what a Secret read from a file becomes.
pub fn merge_string_data(mut secret: Secret) -> Secret {
    if let Some(strings) = secret.string_data.take() {
        let data = secret.data.get_or_insert_with(Default::default);
        for (k, v) in strings {
            data.insert(k, k8s_openapi::ByteString(v.into_bytes()));
        }
    }
    secret
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
    /// The IPs the Service has taken (load-balancer ingress IPs of a `LoadBalancer` Service,
    /// else its `externalIPs`): a static address of the Gateway is usable once listed here.
    pub assigned: Vec<std::net::IpAddr>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::KindSet;

    /// The declaration, as the providers read it: what each field is read from and how it is
    /// watched. A change here changes what edgeplane reads in a cluster and from files.
    #[test]
    fn every_kind_is_declared_once_with_its_source_and_watch() {
        let kinds: Vec<String> = Snapshot::describe()
            .iter()
            .map(|k| {
                let scope = if k.namespaced {
                    "namespaced"
                } else {
                    "cluster"
                };
                format!(
                    "{} <- {}/{} {} ({}, {scope}, {:?})",
                    k.field, k.group, k.version, k.kind, k.plural, k.watch
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "gateway_classes <- gateway.networking.k8s.io/v1 GatewayClass (gatewayclasses, cluster, Objects)",
                "gateways <- gateway.networking.k8s.io/v1 Gateway (gateways, namespaced, Objects)",
                "listener_sets <- gateway.networking.k8s.io/v1 ListenerSet (listenersets, namespaced, Objects)",
                "http_routes <- gateway.networking.k8s.io/v1 HTTPRoute (httproutes, namespaced, Objects)",
                "grpc_routes <- gateway.networking.k8s.io/v1 GRPCRoute (grpcroutes, namespaced, Objects)",
                "tls_routes <- gateway.networking.k8s.io/v1 TLSRoute (tlsroutes, namespaced, Objects)",
                "tcp_routes <- gateway.networking.k8s.io/v1 TCPRoute (tcproutes, namespaced, Objects)",
                "udp_routes <- gateway.networking.k8s.io/v1 UDPRoute (udproutes, namespaced, Objects)",
                "ingresses <- networking.k8s.io/v1 Ingress (ingresses, namespaced, Objects)",
                "ingress_classes <- networking.k8s.io/v1 IngressClass (ingressclasses, cluster, Objects)",
                // Declared in the library's own tests only.
                "throwaway_routes <- gateway.networking.k8s.io/v1 ThrowawayRoute (throwawayroutes, namespaced, Objects)",
                "reference_grants <- gateway.networking.k8s.io/v1 ReferenceGrant (referencegrants, namespaced, Objects)",
                "namespaces <- /v1 Namespace (namespaces, cluster, Metadata)",
                "services <- /v1 Service (services, namespaced, Objects)",
                "endpoint_slices <- discovery.k8s.io/v1 EndpointSlice (endpointslices, namespaced, Objects)",
                "secrets <- /v1 Secret (secrets, namespaced, Referenced)",
                "config_maps <- /v1 ConfigMap (configmaps, namespaced, Referenced)",
                "backend_tls_policies <- gateway.networking.k8s.io/v1 BackendTLSPolicy (backendtlspolicies, namespaced, Objects)",
                "proxy_configs <- edgeplane.dev/v1beta1 ProxyConfig (proxyconfigs, namespaced, Objects)",
                "traffic_policies <- edgeplane.dev/v1beta1 TrafficPolicy (trafficpolicies, namespaced, Objects)",
            ]
        );
    }

    #[test]
    fn len_counts_objects_of_every_kind() {
        let s = Snapshot {
            services: vec![Arc::default(), Arc::default()],
            secrets: vec![Arc::default()],
            gateway_bindings: Some(Arc::default()),
            ..Snapshot::default()
        };
        assert_eq!((s.len(), s.is_empty()), (3, false));
        assert!(Snapshot::default().is_empty());
    }
}
