//! How a Gateway is exposed in a cluster, as pure functions: the name, labels, ports, owner and
//! requested addresses of its Service (in the Gateway's namespace, selector-less, as GEP-1762
//! describes for a shared data plane), target-port allocation, and the bindings every replica
//! reads back from those Services into the snapshot. No I/O; `gateway_service` does the writes
//! and `endpoints` shapes the Service's EndpointSlices.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayAllowedListenersNamespacesFrom as AllowedFrom,
};
use gateway_api::apis::standard::listenersets::ListenerSet;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::service_meta::service_metadata;
use crate::kinds::crd::proxy_config::{ExternalTrafficPolicy, GatewayServiceConfig, ServiceType};
use crate::snapshot::namespace_of;
use crate::snapshot::{GatewayBinding, GatewayBindings};

/// Label on each Gateway Service: `<namespace>.<name>` of its Gateway (namespaces have no dots).
pub const GATEWAY_LABEL: &str = "edgeplane.dev/gateway";
/// Gateway API label naming the Gateway a generated resource belongs to (GEP-1762); upstream
/// conformance finds a Gateway's resources by it, in the Gateway's namespace.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";
/// Gateway API label naming the GatewayClass of the Gateway a generated resource belongs to.
pub const GATEWAY_CLASS_LABEL: &str = "gateway.networking.k8s.io/gateway-class-name";
/// Suffix of a Gateway Service's name: `<gateway>-edgeplane`.
pub const SERVICE_SUFFIX: &str = "-edgeplane";
/// Finalizer the leader puts on our Gateways: their Service goes before they do.
pub const GATEWAY_FINALIZER: &str = "edgeplane.dev/gateway-cleanup";
/// Finalizer on a GatewayClass while Gateways use it (Gateway API convention).
pub const CLASS_FINALIZER: &str = "gateway-exists-finalizer.gateway.networking.k8s.io";
/// Label edgeplane sets on every Service it makes.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Annotation on a Gateway Service recording which label and annotation keys came from the
/// Gateway's `spec.infrastructure`, so keys later dropped from the Gateway are removed from the
/// Service while keys other controllers set on it are left alone.
pub const INFRASTRUCTURE_KEYS: &str = "edgeplane.dev/infrastructure-keys";

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

/// The port range has no free port left for a Gateway.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no free port left in {base}..{end} for Gateway {gateway}")]
pub struct PortsExhausted {
    pub gateway: String,
    pub base: u16,
    pub end: u32,
}

/// The label value naming a Gateway.
pub fn label_value(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

/// The name of a Gateway's Service (in the Gateway's namespace): `<gateway>-edgeplane` when
/// that is a valid Service name (a DNS-1035 label of at most 63 characters), else a readable
/// prefix of the Gateway's name, a hash of the whole name and the suffix, so long or dotted
/// names never collide.
pub fn service_name(name: &str) -> String {
    let plain = format!("{name}{SERVICE_SUFFIX}");
    let valid = plain.len() <= 63
        && plain.starts_with(|c: char| c.is_ascii_lowercase())
        && plain
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        return plain;
    }
    let mut hash: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let readable: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let readable = readable.trim_matches('-');
    let prefix = if readable.starts_with(|c: char| c.is_ascii_lowercase()) {
        ""
    } else {
        "gw-"
    };
    format!("{prefix}{readable}-{hash:08x}{SERVICE_SUFFIX}")
}

/// Listener port -> target port of a Gateway Service.
pub fn service_ports(svc: &Service) -> BTreeMap<u16, u16> {
    svc.spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .filter_map(|p| {
            let port = u16::try_from(p.port).ok()?;
            let target = match p.target_port.as_ref()? {
                IntOrString::Int(t) => u16::try_from(*t).ok()?,
                IntOrString::String(_) => return None,
            };
            Some((port, target))
        })
        .collect()
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

/// The Gateway (`namespace`, `name`) a Service of ours was made for, by its [`GATEWAY_LABEL`];
/// `None` for every other Service.
pub fn owner_gateway(svc: &Service) -> Option<(&str, &str)> {
    let labels = svc.metadata.labels.as_ref()?;
    if labels.get(MANAGED_BY_LABEL).map(String::as_str) != Some("edgeplane") {
        return None;
    }
    labels.get(GATEWAY_LABEL)?.split_once('.')
}

/// True when `svc` is the Service its Gateway has now: in the Gateway's namespace, under
/// [`service_name`]. A labelled Service elsewhere (the controller's namespace, where older
/// versions kept them) is left over, to be deleted.
pub fn is_current(svc: &Service) -> bool {
    owner_gateway(svc).is_some_and(|(ns, name)| {
        svc.metadata.namespace.as_deref() == Some(ns)
            && svc.metadata.name.as_deref() == Some(service_name(name).as_str())
    })
}

/// The IPs a Gateway Service has taken: its load balancer's ingress IPs for a `LoadBalancer`
/// Service (the load balancer shows what it assigned), else its `externalIPs` (nothing in a
/// Service's status confirms those: once the API server stored them, kube-proxy routes them on
/// the nodes that own them).
pub fn assigned_ips(svc: &Service) -> Vec<IpAddr> {
    let spec = svc.spec.as_ref();
    let ips: Vec<&str> = if spec.and_then(|s| s.type_.as_deref()) == Some("LoadBalancer") {
        svc.status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|l| l.ingress.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|i| i.ip.as_deref())
            .collect()
    } else {
        spec.and_then(|s| s.external_ips.as_ref())
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect()
    };
    ips.into_iter().filter_map(|ip| ip.parse().ok()).collect()
}

/// Addresses of a Gateway Service: load-balancer ingress IPs and hostnames, else its clusterIP.
pub fn service_addresses(svc: &Service) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let ingress = svc.status.as_ref().and_then(|s| s.load_balancer.as_ref());
    for i in ingress
        .and_then(|l| l.ingress.as_ref())
        .into_iter()
        .flatten()
    {
        if let Some(ip) = i.ip.as_deref().filter(|v| !v.is_empty()) {
            out.push(("IPAddress".to_owned(), ip.to_owned()));
        } else if let Some(h) = i.hostname.as_deref().filter(|v| !v.is_empty()) {
            out.push(("Hostname".to_owned(), h.to_owned()));
        }
    }
    if out.is_empty() {
        let ip = svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref());
        if let Some(ip) = ip.filter(|ip| !ip.is_empty() && *ip != "None") {
            out.push(("IPAddress".to_owned(), ip.to_owned()));
        }
    }
    out
}

/// Every live Gateway's binding, read from its Service in its namespace.
pub fn bindings_from_services(
    services: &[Arc<Service>],
    gateways: &[Arc<Gateway>],
) -> GatewayBindings {
    let live: BTreeSet<(&str, &str)> = gateways
        .iter()
        .map(|g| {
            (
                namespace_of(&g.metadata),
                g.metadata.name.as_deref().unwrap_or(""),
            )
        })
        .collect();
    let mut out = GatewayBindings::new();
    for svc in services {
        let Some(gw) = owner_gateway(svc) else {
            continue;
        };
        if !live.contains(&gw) || !is_current(svc) {
            continue;
        }
        out.entry((gw.0.to_owned(), gw.1.to_owned()))
            .or_insert_with(|| GatewayBinding {
                ports: service_ports(svc),
                addresses: service_addresses(svc),
                assigned: assigned_ips(svc),
            });
    }
    out
}

/// Target ports for `wanted` listener ports: ports already mapped keep their target (never
/// moved while the Gateway lives); new ones get the lowest port of the range not in `used`.
pub fn allocate_ports(
    gateway: &str,
    wanted: &BTreeSet<u16>,
    existing: &BTreeMap<u16, u16>,
    used: &BTreeSet<u16>,
    base: u16,
    count: u16,
) -> Result<BTreeMap<u16, u16>, PortsExhausted> {
    let mut out: BTreeMap<u16, u16> = wanted
        .iter()
        .filter_map(|p| existing.get(p).map(|t| (*p, *t)))
        .collect();
    let end = u32::from(base) + u32::from(count);
    let mut next = u32::from(base);
    let missing: Vec<u16> = wanted
        .iter()
        .filter(|p| !out.contains_key(p))
        .copied()
        .collect();
    for p in missing {
        let taken: BTreeSet<u16> = out.values().copied().collect();
        let free = loop {
            if next >= end {
                return Err(PortsExhausted {
                    gateway: gateway.to_owned(),
                    base,
                    end,
                });
            }
            let candidate = u16::try_from(next).unwrap_or(u16::MAX);
            next += 1;
            if !used.contains(&candidate) && !taken.contains(&candidate) {
                break candidate;
            }
        };
        out.insert(p, free);
    }
    Ok(out)
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
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ports_stay_put_and_new_ones_skip_used() {
        let wanted = BTreeSet::from([80, 443, 8080]);
        let existing = BTreeMap::from([(80, 10085), (9000, 10090)]);
        let used = BTreeSet::from([10080, 10081, 10085]);
        let got = allocate_ports("g", &wanted, &existing, &used, 10080, 100).unwrap();
        assert_eq!(
            got,
            BTreeMap::from([(80, 10085), (443, 10082), (8080, 10083)])
        );
        let full = allocate_ports(
            "g",
            &BTreeSet::from([80, 81]),
            &BTreeMap::new(),
            &BTreeSet::new(),
            10080,
            1,
        );
        assert!(full.is_err());
    }

    #[test]
    fn service_names_are_dns_labels_and_distinct() {
        assert_eq!(service_name("web-gw"), "web-gw-edgeplane");
        let a = service_name("a.b");
        let b = service_name("a-b");
        assert_ne!(a, b);
        for name in ["x.y".repeat(80), "1gw".into(), "gw.".into()] {
            let s = service_name(&name);
            assert!(s.len() <= 63, "{s}");
            assert!(s.starts_with(|c: char| c.is_ascii_lowercase()), "{s}");
            assert!(
                s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{s}"
            );
            assert!(s.ends_with(SERVICE_SUFFIX), "{s}");
        }
    }

    fn gateway(ns: &str, name: &str, ports: &[u16]) -> Arc<Gateway> {
        let listeners: Vec<_> = ports
            .iter()
            .map(|p| json!({"name": format!("l{p}"), "port": p, "protocol": "HTTP"}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"namespace": ns, "name": name, "uid": "u"},
                "spec": {"gatewayClassName": "c", "listeners": listeners}
            }))
            .unwrap(),
        )
    }

    fn options() -> ServiceOptions {
        ServiceOptions {
            namespace: "sys".into(),
            service_type: "LoadBalancer".into(),
            replicas_service: "edgeplane".into(),
            port_base: 10080,
            port_count: 10,
        }
    }

    #[test]
    fn the_service_lives_beside_its_gateway_labelled_and_owned_by_it() {
        let gw = gateway("web", "one", &[80]);
        let svc = desired_service(&gw, &BTreeMap::from([(80, 10080)]), &options());
        assert_eq!(svc.metadata.namespace.as_deref(), Some("web"));
        assert_eq!(svc.metadata.name.as_deref(), Some("one-edgeplane"));
        let labels = svc.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[GATEWAY_NAME_LABEL], "one");
        assert_eq!(labels[GATEWAY_CLASS_LABEL], "c");
        let owner = &svc.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Gateway", "one", "u")
        );
        assert_eq!(owner.controller, Some(true));
        let spec = svc.spec.as_ref().unwrap();
        assert!(spec.selector.is_none(), "selector-less");
        assert!(spec.external_ips.is_none() && spec.load_balancer_ip.is_none());
        assert_eq!(owner_gateway(&svc), Some(("web", "one")));
        assert!(is_current(&svc));
        let mut moved = svc.clone();
        moved.metadata.namespace = Some("sys".into());
        assert!(
            !is_current(&moved),
            "a labelled Service elsewhere is left over"
        );
    }

    #[test]
    fn static_addresses_are_requested_and_read_back_as_assigned() {
        let mut gw = (*gateway("web", "one", &[80])).clone();
        gw.spec.addresses = serde_json::from_value(json!([
            {"type": "IPAddress", "value": "203.0.113.7"},
            {"value": "203.0.113.8"},
            {"type": "Hostname", "value": "a.example"},
            {"type": "IPAddress"},
        ]))
        .unwrap();
        let ports = BTreeMap::from([(80, 10080)]);
        let mut opts = options();
        let svc = desired_service(&gw, &ports, &opts);
        let spec = svc.spec.as_ref().unwrap();
        assert_eq!(
            spec.external_ips,
            Some(vec!["203.0.113.7".to_owned(), "203.0.113.8".to_owned()])
        );
        assert_eq!(spec.load_balancer_ip, None, "two IPs: no loadBalancerIP");
        gw.spec.addresses.as_mut().unwrap().remove(1);
        let one = desired_service(&gw, &ports, &opts);
        assert_eq!(
            one.spec.as_ref().unwrap().load_balancer_ip.as_deref(),
            Some("203.0.113.7")
        );
        assert!(!service_matches(&svc, &one));
        // LoadBalancer: assigned is what the load balancer's status shows.
        let mut lb = one.clone();
        assert!(assigned_ips(&lb).is_empty());
        lb.status = serde_json::from_value(
            json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}, {"hostname": "x"}]}}),
        )
        .unwrap();
        assert_eq!(
            assigned_ips(&lb),
            vec!["203.0.113.7".parse::<IpAddr>().unwrap()]
        );
        // Other types: the external IPs the Service carries.
        opts.service_type = "ClusterIP".into();
        let cluster = desired_service(&gw, &ports, &opts);
        assert_eq!(cluster.spec.as_ref().unwrap().load_balancer_ip, None);
        assert_eq!(
            assigned_ips(&cluster),
            vec!["203.0.113.7".parse::<IpAddr>().unwrap()]
        );
    }

    #[test]
    fn bindings_come_from_labelled_services_of_live_gateways() {
        let opts = options();
        let g1 = gateway("web", "one", &[80]);
        let g2 = gateway("web", "two", &[80]);
        let mut s1 = desired_service(&g1, &BTreeMap::from([(80, 10080)]), &opts);
        s1.spec.as_mut().unwrap().cluster_ip = Some("10.0.0.7".into());
        let mut s2 = desired_service(&g2, &BTreeMap::from([(80, 10081)]), &opts);
        s2.status = serde_json::from_value(json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example"}]}})).unwrap();
        let stale = desired_service(
            &gateway("web", "gone", &[80]),
            &BTreeMap::from([(80, 10082)]),
            &opts,
        );
        let mut legacy = s1.clone();
        legacy.metadata.namespace = Some("sys".into());
        legacy.metadata.name = Some("gw-web-one-1234".into());
        let services = vec![
            Arc::new(legacy),
            Arc::new(s1.clone()),
            Arc::new(s2),
            Arc::new(stale),
        ];
        let b = bindings_from_services(&services, &[g1, g2]);
        assert_eq!(b.len(), 2);
        let one = &b[&("web".to_owned(), "one".to_owned())];
        assert_eq!(one.ports, BTreeMap::from([(80, 10080)]));
        assert_eq!(
            one.addresses,
            vec![("IPAddress".to_owned(), "10.0.0.7".to_owned())]
        );
        let two = &b[&("web".to_owned(), "two".to_owned())];
        assert_eq!(two.ports, BTreeMap::from([(80, 10081)]));
        assert_eq!(
            two.addresses,
            vec![
                ("IPAddress".to_owned(), "203.0.113.9".to_owned()),
                ("Hostname".to_owned(), "lb.example".to_owned())
            ]
        );
        assert_eq!(two.assigned, vec!["203.0.113.9".parse::<IpAddr>().unwrap()]);
        assert!(service_matches(&s1, &s1));
    }

    #[test]
    fn udp_listeners_get_udp_service_ports_beside_tcp_ones() {
        let opts = options();
        let gw: Gateway = serde_json::from_value(json!({
            "metadata": {"name": "g", "namespace": "ns"},
            "spec": {"gatewayClassName": "c", "listeners": [
                {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                {"name": "dns-udp", "port": 53, "protocol": "UDP"},
                {"name": "quic", "port": 443, "protocol": "UDP"},
            ]}
        }))
        .unwrap();
        let ports = BTreeMap::from([(53, 10080), (443, 10081)]);
        let svc = desired_service(&gw, &ports, &opts);
        let got: Vec<(Option<String>, i32, Option<String>)> = svc
            .spec
            .as_ref()
            .unwrap()
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone(), p.port, p.protocol.clone()))
            .collect();
        let want = |n: &str, p: i32, t: &str| (Some(n.to_owned()), p, Some(t.to_owned()));
        assert_eq!(
            got,
            vec![
                want("port-53", 53, "TCP"),
                want("port-53-udp", 53, "UDP"),
                want("port-443-udp", 443, "UDP"),
            ]
        );
        let mut tcp_only = svc.clone();
        tcp_only
            .spec
            .as_mut()
            .unwrap()
            .ports
            .as_mut()
            .unwrap()
            .retain(|p| p.protocol.as_deref() == Some("TCP"));
        tcp_only
            .spec
            .as_mut()
            .unwrap()
            .ports
            .as_mut()
            .unwrap()
            .push(svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[2].clone());
        assert!(!service_matches(&tcp_only, &svc));
        assert!(service_matches(&svc, &svc));
    }

    #[test]
    fn listener_sets_add_the_ports_their_gateway_takes() {
        let gw: Gateway = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "web", "name": "gw"},
            "spec": {"gatewayClassName": "c",
                "allowedListeners": {"namespaces": {"from": "Same"}},
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}
        }))
        .unwrap();
        let set = |ns: &str, parent: &str, port: i32, protocol: &str| {
            Arc::new(
                serde_json::from_value::<ListenerSet>(serde_json::json!({
                    "metadata": {"namespace": ns, "name": "s"},
                    "spec": {"parentRef": {"name": parent, "namespace": "web"},
                        "listeners": [{"name": "l", "port": port, "protocol": protocol}]}
                }))
                .unwrap(),
            )
        };
        let sets = [
            set("web", "gw", 8080, "HTTP"),
            set("web", "gw", 53, "UDP"),
            set("other", "gw", 9090, "HTTP"),
            set("web", "another", 7070, "HTTP"),
        ];
        let tcp = Transports {
            tcp: true,
            udp: false,
        };
        let udp = Transports {
            tcp: false,
            udp: true,
        };
        assert_eq!(
            exposed_ports(&gw, &sets),
            BTreeMap::from([(53, udp), (80, tcp), (8080, tcp)])
        );
        // Without allowedListeners, ListenerSets add nothing.
        let mut closed = gw.clone();
        closed.spec.allowed_listeners = None;
        assert_eq!(exposed_ports(&closed, &sets), BTreeMap::from([(80, tcp)]));
    }
}
