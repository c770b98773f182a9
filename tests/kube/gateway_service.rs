//! The Gateway's Service as GEP-1762 describes it for a shared data plane: in the Gateway's
//! namespace, selector-less, its EndpointSlices kept by the leader pointing at the ready
//! replicas; the move from the controller's namespace; static addresses requested from the
//! Service and reported `AddressNotUsable` until the Service has them.

use std::net::IpAddr;

use serde_json::{json, Value};

use crate::harness::*;
use crate::support::apiserver::ApiServer;
use crate::support::echo::start_fleet;
use crate::T;

/// The IPs an EndpointSlice lists.
fn endpoint_ips(slice: &Value) -> Vec<String> {
    slice["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["addresses"][0].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_follow_the_ready_replicas_and_old_services_move_keeping_their_ports() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &["gw"], &[("svc", echoes[0].addr)]);
    api.insert(route("web", "r", "gw", "example.com", "/", "svc"));
    let base = port_base();
    let bind = crate::support::net::loopback_ip();
    // What an older version kept in the controller's namespace for this Gateway.
    api.insert(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"namespace": SYSTEM_NS, "name": "gw-web-gw-0badcafe",
            "labels": {"edgeplane.dev/gateway": "web.gw", "app.kubernetes.io/managed-by": "edgeplane"}},
        "spec": {"type": "LoadBalancer", "selector": {"app.kubernetes.io/name": "edgeplane"},
            "ports": [{"name": "port-80", "port": 80, "targetPort": base + 7, "protocol": "TCP"}]}}));
    let unready: IpAddr = "10.0.0.9".parse().unwrap();
    api.insert(replicas_slice(&[bind], &[unready]));
    let replica = Replica::start_on(&api, "one", base, bind).await;

    // The Service moves to the Gateway's namespace with the target port it had; the old one goes.
    let moved = api
        .wait_until(T, |a| {
            gateway_port(a, "web", "gw", 80) == Some(base + 7)
                && a.object("services", SYSTEM_NS, "gw-web-gw-0badcafe")
                    .is_none()
        })
        .await;
    assert!(moved, "services: {:?}", api.objects("services"));
    replica
        .wait_for(base + 7, "example.com", "/", 200, Some("pod-a"), T)
        .await
        .unwrap();

    // Its EndpointSlice lists the ready replica on the target port, under the port's name.
    let slice = |a: &ApiServer| a.object("endpointslices", "web", "gw-edgeplane-ipv4");
    let listed = api
        .wait_until(T, |a| {
            slice(a).is_some_and(|s| endpoint_ips(&s) == [bind.to_string()])
        })
        .await;
    let s = slice(&api).expect("the Gateway Service's EndpointSlice");
    assert!(listed, "{s}");
    assert_eq!(
        s["metadata"]["labels"]["kubernetes.io/service-name"],
        "gw-edgeplane"
    );
    assert_eq!(
        s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "edgeplane.dev"
    );
    assert_eq!(s["metadata"]["ownerReferences"][0]["kind"], "Gateway");
    assert_eq!(
        s["ports"],
        json!([{"name": "port-80", "port": base + 7, "protocol": "TCP"}])
    );

    // A second replica becomes ready, the first stops being ready: the slice follows.
    let second: IpAddr = "10.0.0.8".parse().unwrap();
    api.insert(replicas_slice(&[second], &[bind]));
    let followed = api
        .wait_until(T, |a| {
            slice(a).is_some_and(|s| endpoint_ips(&s) == [second.to_string()])
        })
        .await;
    assert!(followed, "{:?}", slice(&api));
    // Steady state: nothing is rewritten.
    let writes = |a: &ApiServer| {
        a.write_count("endpointslices", None, "") + a.write_count("services", None, "")
    };
    let before = writes(&api);
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert_eq!(
        writes(&api),
        before,
        "Service or slice rewritten in steady state"
    );

    // Deleting the Gateway removes its Service and slices.
    api.remove("gateways", "web", "gw").unwrap();
    let gone = api
        .wait_until(T, |a| {
            a.object("services", "web", "gw-edgeplane").is_none() && slice(a).is_none()
        })
        .await;
    assert!(gone, "Service or slice left: {:?}", slice(&api));
    replica.stop().await;
}

/// A static address is requested from the Service and reported `AddressNotUsable` until the
/// load balancer has assigned it (the test plays the load balancer by writing the Service's
/// status); an unsupported address type is `UnsupportedAddress`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_addresses_wait_for_the_load_balancer() {
    let api = ApiServer::start().await;
    seed(&api, &[], &[]);
    let mut gw = gateway("web", "gw", "ep", 80);
    gw["spec"]["addresses"] = json!([{"type": "test/fake", "value": "x"},
        {"type": "IPAddress", "value": "203.0.113.10"}, {"value": "203.0.113.11"}]);
    api.insert(gw);
    let replica = Replica::start(&api, "one", port_base()).await;
    let condition = |a: &ApiServer, ty: &str| {
        a.object("gateways", "web", "gw")
            .and_then(|g| cond(&g["status"]["conditions"], ty).cloned())
            .map(|c| (c["status"].clone(), c["reason"].clone()))
    };
    let unsupported = api
        .wait_until(T, |a| {
            condition(a, "Accepted") == Some((json!("False"), json!("UnsupportedAddress")))
        })
        .await;
    assert!(unsupported, "{:?}", api.object("gateways", "web", "gw"));

    let drop_first = |a: &ApiServer| {
        let mut gw = a.object("gateways", "web", "gw").unwrap();
        gw["spec"]["addresses"].as_array_mut().unwrap().remove(0);
        a.insert(gw);
    };
    drop_first(&api);
    let waiting = api
        .wait_until(T, |a| {
            condition(a, "Accepted") == Some((json!("True"), json!("Accepted")))
                && condition(a, "Programmed") == Some((json!("False"), json!("AddressNotUsable")))
        })
        .await;
    assert!(waiting, "{:?}", api.object("gateways", "web", "gw"));
    let svc = gateway_service(&api, "web", "gw").unwrap();
    assert_eq!(
        svc["spec"]["externalIPs"],
        json!(["203.0.113.10", "203.0.113.11"])
    );
    assert!(svc["spec"].get("loadBalancerIP").is_none(), "{svc}");

    // The load balancer assigns only the first: still not programmed.
    let mut svc = svc;
    svc["status"] = json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}});
    api.insert(svc);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        condition(&api, "Programmed"),
        Some((json!("False"), json!("AddressNotUsable")))
    );
    // Dropping the address it cannot have: programmed, with the assigned address listed.
    let mut gw = api.object("gateways", "web", "gw").unwrap();
    gw["spec"]["addresses"].as_array_mut().unwrap().remove(1);
    api.insert(gw);
    let programmed = api
        .wait_until(T, |a| {
            condition(a, "Programmed") == Some((json!("True"), json!("Programmed")))
        })
        .await;
    let gw = api.object("gateways", "web", "gw").unwrap();
    assert!(programmed, "{gw}");
    assert_eq!(
        gw["status"]["addresses"],
        json!([{"type": "IPAddress", "value": "203.0.113.10"}])
    );
    // The Service drops the address too (the leader's patch may land after the status).
    let narrowed = api
        .wait_until(T, |a| {
            gateway_service(a, "web", "gw").is_some_and(|s| {
                s["spec"]["externalIPs"] == json!(["203.0.113.10"])
                    && s["spec"]["loadBalancerIP"] == "203.0.113.10"
            })
        })
        .await;
    assert!(narrowed, "{:?}", gateway_service(&api, "web", "gw"));
    replica.stop().await;
}
