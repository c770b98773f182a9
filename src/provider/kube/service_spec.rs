//! The Service the leader keeps for a Gateway, as pure functions: its ports (one per listener
//! port and transport, the Gateway's and its ListenerSets'), type and traffic fields, owner
//! and requested addresses, and whether a Service in the cluster already matches it. Apart
//! from `binding`, which reads what such Services hold back into the snapshot, because the
//! writer (`gateway_service`) needs this and every replica needs only that.

use std::collections::BTreeMap;
use std::sync::Arc;

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayAllowedListenersNamespacesFrom as AllowedFrom,
};
use gateway_api::apis::standard::listenersets::ListenerSet;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::binding::{label_value, service_name, service_ports, INFRASTRUCTURE_KEYS};
use super::service_meta::service_metadata;
use crate::kinds::crd::proxy_config::{ExternalTrafficPolicy, GatewayServiceConfig, ServiceType};
use crate::snapshot::namespace_of;

/// How Gateway Services are made.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// The controller's namespace: where the replicas' Service is, and where Gateway Services
    /// of an older version (still to be deleted) were kept.
    pub namespace: String,
    /// `LoadBalancer`, `NodePort` or `ClusterIP`.
    pub service_type: String,
    /// The Service (in `namespace`) that selects every replica's pod: the ready addresses of
    /// its EndpointSlices are the serving pods each Gateway Service's EndpointSlice lists.
    pub replicas_service: String,
    /// First port handed out to listeners; ports are taken from `port_base..port_base+port_count`.
    pub port_base: u16,
    pub port_count: u16,
}

/// `(port, protocol)` of every Service port: a UDP listener added on a TCP listener's port
/// changes the Service though the port map does not.
fn port_protocols(svc: &Service) -> Vec<(i32, Option<&str>)> {
    let mut out: Vec<_> = svc
        .spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .map(|p| (p.port, p.protocol.as_deref()))
        .collect();
    out.sort();
    out
}

/// The Service the leader keeps for `gateway`, for the Gateway's own listeners.
pub fn desired_service(
    gateway: &Gateway,
    ports: &BTreeMap<u16, u16>,
    options: &ServiceOptions,
) -> Service {
    let exposed = exposed_ports(gateway, &[]);
    desired_service_for(gateway, ports, &exposed, None, options)
}

/// [`desired_service`] exposing `exposed` (see [`exposed_ports`]): the Gateway's listeners and
/// those its ListenerSets add. `config` (the Gateway's ProxyConfig `service`) sets the type,
/// else `options` does, and adds annotations.
///
/// The Service lives in the Gateway's namespace, is owned by the Gateway (so deleting the
/// Gateway collects it) and has no selector: the replicas serve every Gateway from the
/// controller's namespace, and the leader keeps the Service's EndpointSlices pointing at them.
/// The Gateway's static `IPAddress` addresses are requested as `externalIPs` (every type
/// honours them) and, for a `LoadBalancer` Service asking for exactly one, as
/// `loadBalancerIP` too, the field load-balancer controllers read.
pub fn desired_service_for(
    gateway: &Gateway,
    ports: &BTreeMap<u16, u16>,
    exposed: &BTreeMap<u16, Transports>,
    config: Option<&GatewayServiceConfig>,
    options: &ServiceOptions,
) -> Service {
    let ns = namespace_of(&gateway.metadata);
    let name = gateway.name_any();
    let extra = config.map(|c| c.annotations.clone()).unwrap_or_default();
    let (labels, annotations) = service_metadata(gateway, &label_value(ns, &name), &extra);
    let service_type = config
        .and_then(|c| c.type_)
        .map_or_else(|| options.service_type.clone(), service_type_name);
    let requested: Vec<String> = crate::kinds::gateway_static_ips(gateway)
        .iter()
        .map(ToString::to_string)
        .collect();
    let load_balancer = service_type == "LoadBalancer";
    let load_balancer_ip = (load_balancer && requested.len() == 1).then(|| requested[0].clone());
    let traffic = traffic_fields(config, &service_type);
    Service {
        metadata: ObjectMeta {
            name: Some(service_name(&name)),
            namespace: Some(ns.to_owned()),
            labels: Some(labels),
            annotations: Some(annotations).filter(|a| !a.is_empty()),
            owner_references: Some(vec![gateway_owner(gateway)]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some(service_type),
            selector: None,
            external_ips: Some(requested).filter(|r| !r.is_empty()),
            load_balancer_ip,
            external_traffic_policy: traffic.external_traffic_policy,
            load_balancer_class: traffic.load_balancer_class,
            load_balancer_source_ranges: traffic.load_balancer_source_ranges,
            ports: Some(
                ports
                    .iter()
                    .flat_map(|(port, target)| {
                        let t = exposed.get(port).copied().unwrap_or_default();
                        let (tcp, udp) = (t.tcp || !t.udp, t.udp);
                        let entry = move |protocol: &str, suffix: &str| ServicePort {
                            name: Some(format!("port-{port}{suffix}")),
                            port: i32::from(*port),
                            target_port: Some(IntOrString::Int(i32::from(*target))),
                            protocol: Some(protocol.into()),
                            ..ServicePort::default()
                        };
                        tcp.then(|| entry("TCP", ""))
                            .into_iter()
                            .chain(udp.then(|| entry("UDP", "-udp")))
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// `externalTrafficPolicy`, `loadBalancerClass` and `loadBalancerSourceRanges` of a Gateway
/// Service of type `service_type`: the ProxyConfig's, on the types Kubernetes allows them on.
/// An external type always states its traffic policy (`Cluster` unless `Local` is asked for),
/// as the API server would default it, so a policy dropped from the ProxyConfig is reverted
/// and a defaulted one still matches.
fn traffic_fields(config: Option<&GatewayServiceConfig>, service_type: &str) -> ServiceSpec {
    let load_balancer = service_type == "LoadBalancer";
    let external = load_balancer || service_type == "NodePort";
    let policy = config.and_then(|c| c.external_traffic_policy);
    ServiceSpec {
        external_traffic_policy: external.then(|| {
            match policy {
                Some(ExternalTrafficPolicy::Local) => "Local",
                Some(ExternalTrafficPolicy::Cluster) | None => "Cluster",
            }
            .to_owned()
        }),
        load_balancer_class: config
            .and_then(|c| c.load_balancer_class.clone())
            .filter(|_| load_balancer),
        load_balancer_source_ranges: config
            .map(|c| c.load_balancer_source_ranges.clone())
            .filter(|r| load_balancer && !r.is_empty()),
        ..ServiceSpec::default()
    }
}

/// The owner reference of everything made for `gateway`: the Gateway, as controller.
pub fn gateway_owner(gateway: &Gateway) -> OwnerReference {
    OwnerReference {
        api_version: crate::status::API_VERSION.into(),
        kind: "Gateway".into(),
        name: gateway.name_any(),
        uid: gateway.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        ..OwnerReference::default()
    }
}

/// The Kubernetes spelling of a Service type.
pub fn service_type_name(t: ServiceType) -> String {
    match t {
        ServiceType::LoadBalancer => "LoadBalancer",
        ServiceType::NodePort => "NodePort",
        ServiceType::ClusterIp => "ClusterIP",
    }
    .to_owned()
}

/// Which transports the listeners on one port use: UDP listeners need a UDP Service port,
/// every other protocol a TCP one (a port with neither keeps TCP).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transports {
    pub tcp: bool,
    pub udp: bool,
}

/// The listener ports a Gateway's Service exposes, with their transports: the Gateway's own
/// listeners, and those of the ListenerSets whose `parentRef` names it when its
/// `allowedListeners` takes ListenerSets from their namespace (`Same`, `All`; with `Selector`
/// every naming ListenerSet counts: a port whose listeners the translator then refuses is
/// exposed but bound by no replica, so connections to it are refused).
pub fn exposed_ports(gateway: &Gateway, sets: &[Arc<ListenerSet>]) -> BTreeMap<u16, Transports> {
    let ns = namespace_of(&gateway.metadata);
    let name = gateway.metadata.name.as_deref().unwrap_or("");
    let from = gateway
        .spec
        .allowed_listeners
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
        .and_then(|n| n.from.as_ref());
    let takes = |set_ns: &str| match from {
        None | Some(AllowedFrom::None) => false,
        Some(AllowedFrom::Same) => set_ns == ns,
        Some(AllowedFrom::All | AllowedFrom::Selector) => true,
    };
    let own = gateway
        .spec
        .listeners
        .iter()
        .map(|l| (l.port, l.protocol.as_str()));
    let joined = sets
        .iter()
        .filter(|s| {
            let p = &s.spec.parent_ref;
            let set_ns = namespace_of(&s.metadata);
            p.kind.as_deref().unwrap_or("Gateway") == "Gateway"
                && p.name == name
                && p.namespace.as_deref().unwrap_or(set_ns) == ns
                && takes(set_ns)
        })
        .flat_map(|s| {
            s.spec
                .listeners
                .iter()
                .map(|l| (l.port, l.protocol.as_str()))
        });
    let mut out: BTreeMap<u16, Transports> = BTreeMap::new();
    for (port, protocol) in own.chain(joined) {
        let Ok(port) = u16::try_from(port) else {
            continue;
        };
        let t = out.entry(port).or_default();
        if protocol == "UDP" {
            t.udp = true;
        } else {
            t.tcp = true;
        }
    }
    out
}

/// True when `current` already has what `desired` asks for (ports, type, no selector, requested
/// addresses, traffic policy, load-balancer class and source ranges, owner, labels and annotations, and no propagated key the Gateway dropped).
pub fn service_matches(current: &Service, desired: &Service) -> bool {
    let (Some(c), Some(d)) = (&current.spec, &desired.spec) else {
        return false;
    };
    let record = |s: &Service| {
        s.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(INFRASTRUCTURE_KEYS))
            .cloned()
    };
    service_ports(current) == service_ports(desired)
        && port_protocols(current) == port_protocols(desired)
        && c.type_ == d.type_
        && c.selector == d.selector
        && c.external_ips == d.external_ips
        && c.load_balancer_ip == d.load_balancer_ip
        && c.external_traffic_policy == d.external_traffic_policy
        && c.load_balancer_class == d.load_balancer_class
        && c.load_balancer_source_ranges == d.load_balancer_source_ranges
        && current.metadata.owner_references == desired.metadata.owner_references
        && super::service_meta::contains_all(&current.metadata.labels, &desired.metadata.labels)
        && super::service_meta::contains_all(
            &current.metadata.annotations,
            &desired.metadata.annotations,
        )
        && record(current) == record(desired)
}

#[cfg(test)]
#[path = "service_spec_tests.rs"]
mod tests;
