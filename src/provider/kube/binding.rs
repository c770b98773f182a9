//! How a Gateway is bound in a cluster, as pure functions: the labels and name of its Service
//! (in the Gateway's namespace, selector-less, as GEP-1762 describes for a shared data plane),
//! target-port allocation, and the bindings every replica reads back from those Services into
//! the snapshot (ports, owner, assigned addresses). No I/O; `service_spec` shapes the Service,
//! `gateway_service` does the writes and `gateway_endpoints` shapes its EndpointSlices.
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
