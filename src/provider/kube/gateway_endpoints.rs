//! The EndpointSlices of a Gateway Service, as pure functions. A Gateway's Service lives in the
//! Gateway's namespace and has no selector (the replicas run in the controller's namespace), so
//! the leader keeps its endpoints: the ready addresses of the replicas' own Service (one that
//! selects every replica's pod, `--replicas-service`) on the ports the replicas bind for the
//! Gateway. No I/O; `gateway_service` does the writes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::binding::{GATEWAY_LABEL, GATEWAY_NAME_LABEL};
use super::service_spec::gateway_owner;

/// The label tying an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming who manages an EndpointSlice (the cluster's own controller leaves slices
/// managed by others alone).
pub const SLICE_MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// [`SLICE_MANAGED_BY_LABEL`] of the slices edgeplane keeps.
pub const SLICE_MANAGER: &str = "edgeplane.dev";

/// Ready addresses of the replicas, by address type (`IPv4`, `IPv6`), read from the
/// EndpointSlices of Service `namespace/service`. An endpoint whose `ready` is unset counts as
/// ready, as the EndpointSlice API says.
pub fn replica_addresses(
    slices: &[Arc<EndpointSlice>],
    namespace: &str,
    service: &str,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let of_service = slices.iter().filter(|s| {
        s.metadata.namespace.as_deref() == Some(namespace)
            && s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                .map(String::as_str)
                == Some(service)
    });
    for slice in of_service {
        let ready = slice
            .endpoints
            .iter()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false));
        let entry = out.entry(slice.address_type.clone()).or_default();
        entry.extend(ready.flat_map(|e| e.addresses.iter().cloned()));
    }
    out
}

/// The slices `service` (a Gateway Service as [`super::service_spec::desired_service_for`] shapes
/// it) should have: one per address type the replicas have (an empty `IPv4` one when no
/// replica is ready), named `<service>-<type>`, labelled for the Service and the Gateway, owned
/// by the Gateway, each endpoint a ready replica and each port a target port of the Service
/// under the Service port's name (how kube-proxy matches them).
pub fn desired_slices(
    gateway: &Gateway,
    service: &Service,
    replicas: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<EndpointSlice> {
    let svc_name = service.metadata.name.clone().unwrap_or_default();
    let gateway_label = service
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(GATEWAY_LABEL))
        .cloned()
        .unwrap_or_default();
    let ports: Vec<EndpointPort> = service
        .spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .map(|p| EndpointPort {
            name: p.name.clone(),
            port: match &p.target_port {
                Some(IntOrString::Int(t)) => Some(*t),
                _ => Some(p.port),
            },
            protocol: p.protocol.clone(),
            ..EndpointPort::default()
        })
        .collect();
    let mut families = replicas.clone();
    if families.values().all(BTreeSet::is_empty) {
        families = BTreeMap::from([("IPv4".to_owned(), BTreeSet::new())]);
    }
    families
        .into_iter()
        .map(|(family, addresses)| EndpointSlice {
            metadata: ObjectMeta {
                name: Some(format!("{svc_name}-{}", family.to_ascii_lowercase())),
                namespace: service.metadata.namespace.clone(),
                labels: Some(BTreeMap::from([
                    (SERVICE_NAME_LABEL.to_owned(), svc_name.clone()),
                    (SLICE_MANAGED_BY_LABEL.to_owned(), SLICE_MANAGER.to_owned()),
                    (GATEWAY_LABEL.to_owned(), gateway_label.clone()),
                    (
                        GATEWAY_NAME_LABEL.to_owned(),
                        gateway.metadata.name.clone().unwrap_or_default(),
                    ),
                ])),
                owner_references: Some(vec![gateway_owner(gateway)]),
                ..ObjectMeta::default()
            },
            address_type: family,
            endpoints: addresses
                .into_iter()
                .map(|a| Endpoint {
                    addresses: vec![a],
                    conditions: Some(EndpointConditions {
                        ready: Some(true),
                        ..EndpointConditions::default()
                    }),
                    ..Endpoint::default()
                })
                .collect(),
            ports: Some(ports.clone()),
        })
        .collect()
}

/// The slices edgeplane keeps for Service `namespace/service`.
pub fn owned_slices<'a>(
    slices: &'a [Arc<EndpointSlice>],
    namespace: &str,
    service: &str,
) -> Vec<&'a Arc<EndpointSlice>> {
    slices
        .iter()
        .filter(|s| {
            let labels = s.metadata.labels.as_ref();
            let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
            s.metadata.namespace.as_deref() == Some(namespace)
                && label(SERVICE_NAME_LABEL) == Some(service)
                && label(SLICE_MANAGED_BY_LABEL) == Some(SLICE_MANAGER)
        })
        .collect()
}

/// True when `current` has what `desired` asks for: address type, endpoints, ports, owner and
/// labels (others' extra labels are left alone).
pub fn slice_matches(current: &EndpointSlice, desired: &EndpointSlice) -> bool {
    current.address_type == desired.address_type
        && current.endpoints == desired.endpoints
        && current.ports == desired.ports
        && current.metadata.owner_references == desired.metadata.owner_references
        && super::service_meta::contains_all(&current.metadata.labels, &desired.metadata.labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::kube::service_spec::{desired_service, ServiceOptions};
    use serde_json::json;

    fn slice(ns: &str, service: &str, family: &str, endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": format!("{service}-x"),
                "labels": {SERVICE_NAME_LABEL: service}},
            "addressType": family, "endpoints": endpoints,
        }))
        .unwrap()
    }

    #[test]
    fn slices_list_the_ready_replicas_on_the_target_ports() {
        let slices = vec![
            Arc::new(slice(
                "sys",
                "edgeplane",
                "IPv4",
                json!([{"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
                    {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                    {"addresses": ["10.0.0.3"]}]),
            )),
            Arc::new(slice(
                "sys",
                "other",
                "IPv4",
                json!([{"addresses": ["10.9.9.9"]}]),
            )),
            Arc::new(slice(
                "web",
                "edgeplane",
                "IPv4",
                json!([{"addresses": ["10.8.8.8"]}]),
            )),
        ];
        let replicas = replica_addresses(&slices, "sys", "edgeplane");
        assert_eq!(
            replicas,
            BTreeMap::from([(
                "IPv4".to_owned(),
                BTreeSet::from(["10.0.0.1".to_owned(), "10.0.0.3".to_owned()])
            )])
        );
        let gw: Gateway = serde_json::from_value(json!({
            "metadata": {"namespace": "web", "name": "gw", "uid": "g-uid"},
            "spec": {"gatewayClassName": "c", "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP"}]}
        }))
        .unwrap();
        let opts = ServiceOptions {
            namespace: "sys".into(),
            service_type: "LoadBalancer".into(),
            replicas_service: "edgeplane".into(),
            port_base: 10080,
            port_count: 10,
        };
        let svc = desired_service(&gw, &BTreeMap::from([(80, 10085)]), &opts);
        let want = desired_slices(&gw, &svc, &replicas);
        assert_eq!(want.len(), 1);
        let s = &want[0];
        assert_eq!(s.metadata.name.as_deref(), Some("gw-edgeplane-ipv4"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("web"));
        let labels = s.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[SERVICE_NAME_LABEL], "gw-edgeplane");
        assert_eq!(labels[SLICE_MANAGED_BY_LABEL], SLICE_MANAGER);
        assert_eq!(
            s.metadata.owner_references.as_ref().unwrap()[0].uid,
            "g-uid"
        );
        let ips: Vec<&str> = s
            .endpoints
            .iter()
            .map(|e| e.addresses[0].as_str())
            .collect();
        assert_eq!(ips, ["10.0.0.1", "10.0.0.3"]);
        let port = &s.ports.as_ref().unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.port),
            (Some("port-80"), Some(10085))
        );
        assert!(slice_matches(s, s));
        let none = desired_slices(&gw, &svc, &BTreeMap::new());
        assert_eq!(
            none.len(),
            1,
            "an empty IPv4 slice when no replica is ready"
        );
        assert!(none[0].endpoints.is_empty());
        assert!(!slice_matches(&none[0], s));
        let mine = vec![Arc::new(s.clone()), slices[0].clone()];
        assert_eq!(owned_slices(&mine, "web", "gw-edgeplane").len(), 1);
    }
}
