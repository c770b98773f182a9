//! Discovery, registered kinds, outages and restarts, injected failures, write counts and
//! kubeconfig files.

use std::time::Duration;

use futures_util::StreamExt;
use gateway_api::apis::experimental::httproutes::HttpRoute;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Discovery, Scope};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::ResourceExt;
use serde_json::json;

use crate::support::apiserver::{ApiServer, Kind};

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

#[tokio::test]
async fn discovery_serves_gateway_api_and_registered_kinds() {
    let server = ApiServer::start().await;
    server.register(Kind::new(
        "edgeplane.dev",
        "v1alpha1",
        "trafficpolicies",
        "TrafficPolicy",
        true,
        true,
    ));
    let client = server.client();

    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");

    for run in ["plain", "aggregated"] {
        let d = Discovery::new(client.clone());
        let d = if run == "plain" {
            d.run().await
        } else {
            d.run_aggregated().await
        };
        let d = d.unwrap_or_else(|e| panic!("{run} discovery: {e}"));
        let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute");
        let (ar, caps) = d.resolve_gvk(&gvk).expect("HTTPRoute discovered");
        assert_eq!(ar.plural, "httproutes");
        assert_eq!(caps.scope, Scope::Namespaced);
        assert!(caps
            .subresources
            .iter()
            .any(|(s, _)| s.plural == "httproutes/status" || s.plural == "status"));
        let group = d.get("gateway.networking.k8s.io").expect("gateway group");
        assert_eq!(group.preferred_version_or_latest(), "v1");
        assert!(d.has_group("edgeplane.dev"), "{run}: registered group");
        let core = d.get("").expect("core group");
        assert!(core.recommended_kind("Service").is_some(), "{run}");
        let (gc, caps) = d
            .resolve_gvk(&GroupVersionKind::gvk(
                "gateway.networking.k8s.io",
                "v1",
                "GatewayClass",
            ))
            .expect("GatewayClass");
        assert_eq!(
            (gc.plural.as_str(), caps.scope),
            ("gatewayclasses", Scope::Cluster)
        );
    }

    // Typed APIs of the gateway-api crate, and a dynamic API for the registered kind.
    let gateways: Api<Gateway> = Api::default_namespaced(client.clone());
    assert!(gateways
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
    let routes: Api<HttpRoute> = Api::all(client.clone());
    assert!(routes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
    let gvk = GroupVersionKind::gvk("edgeplane.dev", "v1alpha1", "TrafficPolicy");
    let (ar, _) = discovery::pinned_kind(&client, &gvk).await.unwrap();
    let policies: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "edgeplane.dev/v1alpha1", "kind": "TrafficPolicy",
        "metadata": {"name": "p"}, "spec": {"timeout": "5s"},
    }))
    .unwrap();
    policies.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(server.objects("trafficpolicies.edgeplane.dev").len(), 1);
}

#[tokio::test]
async fn restart_keeps_objects_and_clients_recover() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &config_map("kept"))
        .await
        .unwrap();
    let (store, writer) = reflector::store();
    let watch = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .touched_objects();
    let task = tokio::spawn(watch.for_each(|_| async {}));
    tokio::time::timeout(Duration::from_secs(5), store.wait_until_ready())
        .await
        .unwrap()
        .unwrap();

    server.stop().await;
    assert!(api.get("kept").await.is_err(), "the server is down");
    server.insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "during", "namespace": "default"}}));
    server.restart().await.unwrap();

    assert_eq!(api.get("kept").await.unwrap().name_any(), "kept");
    api.create(&PostParams::default(), &config_map("after"))
        .await
        .unwrap();
    let mut names = Vec::new();
    for _ in 0..100 {
        names = store.state().iter().map(|o| o.name_any()).collect();
        names.sort();
        if names.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(names, ["after", "during", "kept"]);
    task.abort();
}

#[tokio::test]
async fn injected_failures_and_unavailability() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &config_map("x"))
        .await
        .unwrap();

    server.fail_requests(Some("GET"), "/configmaps/x", 2, 500);
    for _ in 0..2 {
        match api.get("x").await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 500),
            other => panic!("expected 500, got {other:?}"),
        }
    }
    assert!(api.get("x").await.is_ok(), "the rule is used up");

    // kube's client retries a 503 by itself: the caller sees success, the log two requests.
    server.fail_requests(None, "/configmaps/x", 1, 503);
    let before = server.requests().len();
    assert!(api.get("x").await.is_ok());
    let statuses: Vec<u16> = server.requests()[before..]
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [503, 200]);

    server.set_unavailable(true);
    match api.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 500),
        other => panic!("expected 500, got {other:?}"),
    }
    server.set_unavailable(false);
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

#[tokio::test]
async fn write_counts_by_resource_verb_and_subresource() {
    let server = ApiServer::start().await;
    let client = server.client();
    let routes: Api<HttpRoute> = Api::default_namespaced(client.clone());
    let route: HttpRoute = serde_json::from_value(json!({
        "metadata": {"name": "r"}, "spec": {"parentRefs": [{"name": "gw"}]},
    }))
    .unwrap();
    routes.create(&PostParams::default(), &route).await.unwrap();
    let status = json!({"status": {"parents": []}});
    for _ in 0..2 {
        routes
            .patch_status("r", &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }
    routes.get("r").await.unwrap();
    routes.list(&ListParams::default()).await.unwrap();

    assert_eq!(server.write_count("httproutes", Some("create"), ""), 1);
    assert_eq!(server.write_count("httproutes", Some("patch"), "status"), 2);
    assert_eq!(server.write_count("httproutes", None, ""), 1);
    assert_eq!(server.total_writes(), 3);
    // Reads are not writes; the request log has them all.
    assert_eq!(server.requests().len(), 5);
    let more = server.wait_until(Duration::from_millis(200), |s| s.total_writes() > 3);
    assert!(!more.await, "steady state writes nothing");
}

#[tokio::test]
async fn kubeconfig_file_reaches_the_server() {
    let server = ApiServer::start().await;
    server.insert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "k"}}));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    server.write_kubeconfig(&path).unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    assert_eq!(config.default_namespace, "default");
    let client = kube::Client::try_from(config).unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    assert_eq!(api.get("k").await.unwrap().name_any(), "k");
}

#[tokio::test]
async fn event_recorder_creates_then_patches_events() {
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let server = ApiServer::start().await;
    let reporter = Reporter {
        controller: "edgeplane".into(),
        instance: Some("pod-0".into()),
    };
    let recorder = Recorder::new(server.client(), reporter);
    let reference = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("gateway.networking.k8s.io/v1".into()),
        kind: Some("Gateway".into()),
        name: Some("gw".into()),
        namespace: Some("default".into()),
        uid: Some("1234".into()),
        ..Default::default()
    };
    let event = Event {
        type_: EventType::Normal,
        reason: "Programmed".into(),
        note: Some("listeners bound".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();
    let events = server.objects("events.events.k8s.io");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["reason"], "Programmed");
    assert_eq!(
        server.write_count("events.events.k8s.io", Some("create"), ""),
        1
    );
    assert_eq!(
        server.write_count("events.events.k8s.io", Some("patch"), ""),
        1
    );
}
