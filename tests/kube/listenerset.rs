//! ListenerSets in Kubernetes mode through the API emulator: the controller watches them,
//! serves their listeners on the Gateway's Service ports (a port only a ListenerSet declares
//! included), and writes their status and the Gateway's `attachedListenerSets`.

use serde_json::json;

use crate::harness::*;
use crate::support::apiserver::ApiServer;
use crate::support::echo::start_fleet;
use crate::T;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listener_set_is_served_and_its_status_written() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &[], &[("svc-a", echoes[0].addr)]);
    let mut gw = gateway("web", "gw", "ep", 80);
    gw["spec"]["allowedListeners"] = json!({"namespaces": {"from": "All"}});
    gw["spec"]["listeners"][0]["hostname"] = json!("own.example.com");
    api.insert(gw);
    api.insert(
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
        "metadata": {"namespace": "team", "name": "extra"},
        "spec": {"parentRef": {"name": "gw", "namespace": "web"}, "listeners": [
            {"name": "shop", "port": 80, "protocol": "HTTP", "hostname": "shop.example.com",
             "allowedRoutes": {"namespaces": {"from": "All"}}},
            {"name": "shop-alt", "port": 8080, "protocol": "HTTP", "hostname": "shop.example.com",
             "allowedRoutes": {"namespaces": {"from": "All"}}}]}}),
    );
    let mut r = route("web", "r", "gw", "shop.example.com", "/", "svc-a");
    r["spec"]["parentRefs"] =
        json!([{"kind": "ListenerSet", "name": "extra", "namespace": "team"}]);
    api.insert(r);

    let replica = Replica::start(&api, "one", port_base()).await;
    let port = wait_gateway_port(&api, "web", "gw", 80).await;
    replica
        .wait_for(port, "shop.example.com", "/x", 200, Some("pod-a"), T)
        .await
        .unwrap();
    // A port only the ListenerSet declares gets a port on the Gateway's Service too.
    let alt = wait_gateway_port(&api, "web", "gw", 8080).await;
    replica
        .wait_for(alt, "shop.example.com", "/x", 200, Some("pod-a"), T)
        .await
        .unwrap();
    let written = api
        .wait_until(T, |a| {
            let ls = a
                .object("listenersets", "team", "extra")
                .unwrap_or_default();
            cond(&ls["status"]["conditions"], "Programmed").is_some_and(|c| c["status"] == "True")
        })
        .await;
    let ls = api
        .object("listenersets", "team", "extra")
        .unwrap_or_default();
    assert!(written, "ListenerSet status never written: {ls}");
    assert_eq!(
        cond(&ls["status"]["conditions"], "Accepted").unwrap()["reason"],
        "Accepted"
    );
    assert_eq!(ls["status"]["listeners"][0]["name"], "shop");
    assert_eq!(ls["status"]["listeners"][0]["attachedRoutes"], 1);
    assert_eq!(ls["status"]["listeners"][1]["name"], "shop-alt");
    assert_eq!(ls["status"]["listeners"][1]["attachedRoutes"], 1);
    let counted = api
        .wait_until(T, |a| {
            let gw = a.object("gateways", "web", "gw").unwrap_or_default();
            gw["status"]["attachedListenerSets"] == 1
        })
        .await;
    assert!(counted, "{:?}", api.object("gateways", "web", "gw"));
    let gw = api.object("gateways", "web", "gw").unwrap_or_default();
    assert_eq!(gw["status"]["listeners"].as_array().map(Vec::len), Some(1));
    // The route reaches the ListenerSet's hostname only.
    let own = replica.get(port, "own.example.com", "/x").await.unwrap();
    assert_eq!(own.status, 404);
    replica.stop().await;
}
