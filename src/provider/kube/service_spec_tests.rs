//! The Service a Gateway wants: ports, type, owner, addresses, matching; and what `binding`
//! reads back from it.

use std::net::IpAddr;

use super::*;
use crate::provider::kube::binding::*;
use serde_json::json;

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
    s2.status = serde_json::from_value(
        json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example"}]}}),
    )
    .unwrap();
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
