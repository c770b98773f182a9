//! `serve --kubernetes` end to end against the in-process API emulator: real kube client,
//! reflectors, leader election and status writes over HTTP; real proxy traffic on loopback.

mod support;

#[path = "kube/binary.rs"]
mod binary;
#[path = "kube/cluster.rs"]
mod cluster;
#[path = "kube/convert.rs"]
mod convert;
#[path = "kube/crds.rs"]
mod crds;
#[path = "kube/failover.rs"]
mod failover;
#[path = "kube/gateway_service.rs"]
mod gateway_service;
#[path = "kube/harness.rs"]
mod harness;
#[path = "kube/ingress.rs"]
mod ingress;
#[path = "kube/listenerset.rs"]
mod listenerset;
#[path = "kube/metrics.rs"]
mod metrics;
#[path = "kube/policy.rs"]
mod policy;
#[path = "kube/quickstart.rs"]
mod quickstart;
#[path = "kube/reliability.rs"]
mod reliability;
#[path = "kube/webhook_limits.rs"]
mod webhook_limits;

use std::time::Duration;

use harness::*;
use serde_json::json;
use support::apiserver::ApiServer;
use support::echo::start_fleet;

pub const T: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_statuses_and_live_changes() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a", "pod-b"]).await;
    seed(
        &api,
        &["gw"],
        &[("svc-a", echoes[0].addr), ("svc-b", echoes[1].addr)],
    );
    let mut r = route("web", "r", "gw", "example.com", "/", "svc-a");
    // Another controller's entry, which we must keep.
    r["status"] = json!({"parents": [{"parentRef": {"name": "theirs"}, "controllerName": "example.com/other",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
        "lastTransitionTime": "2020-01-01T00:00:00Z", "observedGeneration": 1}]}]});
    api.insert(r);
    let mut bad = route("web", "bad", "gw", "example.com", "/bad", "svc-a");
    bad["spec"]["parentRefs"][0]["sectionName"] = json!("nope");
    api.insert(bad);
    // A GRPCRoute on its own hostname, with another controller's entry to keep.
    api.insert(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
        "metadata": {"namespace": "web", "name": "g"},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["grpc.example.com"],
            "rules": [{"backendRefs": [{"name": "svc-a", "port": 80}]}]},
        "status": {"parents": [{"parentRef": {"name": "theirs"}, "controllerName": "example.com/other",
            "conditions": []}]}}));

    let replica = Replica::start(&api, "one", port_base()).await;
    let port = wait_gateway_port(&api, "web", "gw", 80).await;
    replica
        .wait_for(port, "example.com", "/x", 200, Some("pod-a"), T)
        .await
        .unwrap();
    assert!(replica.published.is_ready());

    // Statuses, with the right conditions and generations.
    let ok = api
        .wait_until(T, |a| {
            let gw = a.object("gateways", "web", "gw").unwrap_or_default();
            cond(&gw["status"]["conditions"], "Programmed").is_some_and(|c| c["status"] == "True")
        })
        .await;
    assert!(
        ok,
        "Gateway never Programmed: {:?}",
        api.object("gateways", "web", "gw")
    );
    let gc = api.object("gatewayclasses", "", "ep").unwrap();
    assert_eq!(
        cond(&gc["status"]["conditions"], "Accepted").unwrap()["status"],
        "True"
    );
    assert!(gc["status"]["supportedFeatures"]
        .as_array()
        .is_some_and(|f| !f.is_empty()));
    // The class finalizer comes from the Gateway Service keeper, which writes beside the
    // status writer, not before it.
    let finalized = api
        .wait_until(T, |a| {
            a.object("gatewayclasses", "", "ep").is_some_and(|gc| {
                gc["metadata"]["finalizers"]
                    .to_string()
                    .contains("gateway-exists-finalizer")
            })
        })
        .await;
    assert!(finalized, "{gc}");
    let gw = api.object("gateways", "web", "gw").unwrap();
    let listener = &gw["status"]["listeners"][0];
    assert_eq!(
        listener["attachedRoutes"], 2,
        "the HTTPRoute and the GRPCRoute"
    );
    assert_eq!(listener["supportedKinds"][0]["kind"], "HTTPRoute");
    assert_eq!(listener["supportedKinds"][1]["kind"], "GRPCRoute");
    let ok = api
        .wait_until(T, |a| {
            let g = a.object("grpcroutes", "web", "g").unwrap_or_default();
            g["status"]["parents"]
                .as_array()
                .is_some_and(|p| p.len() == 2)
        })
        .await;
    let g = api.object("grpcroutes", "web", "g").unwrap();
    assert!(ok, "GRPCRoute parents: {}", g["status"]);
    let ours = g["status"]["parents"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["controllerName"] == CONTROLLER))
        .expect("our parent entry on the GRPCRoute");
    assert_eq!(
        cond(&ours["conditions"], "Accepted").unwrap()["status"],
        "True"
    );
    let accepted = cond(&gw["status"]["conditions"], "Accepted").unwrap();
    assert_eq!(accepted["observedGeneration"], gw["metadata"]["generation"]);
    // The Gateway's finalizer also comes from the Gateway Service keeper, in its own write.
    let finalized = api
        .wait_until(T, |a| {
            a.object("gateways", "web", "gw").is_some_and(|gw| {
                gw["metadata"]["finalizers"]
                    .to_string()
                    .contains("edgeplane.dev/gateway-cleanup")
            })
        })
        .await;
    assert!(finalized, "{}", gw["metadata"]);
    let ok = api
        .wait_until(T, |a| {
            let r = a.object("httproutes", "web", "r").unwrap_or_default();
            r["status"]["parents"]
                .as_array()
                .is_some_and(|p| p.len() == 2)
        })
        .await;
    let r = api.object("httproutes", "web", "r").unwrap();
    assert!(ok, "route parents: {}", r["status"]);
    let parents = r["status"]["parents"].as_array().unwrap();
    assert!(parents
        .iter()
        .any(|p| p["controllerName"] == "example.com/other"));
    let ours = parents
        .iter()
        .find(|p| p["controllerName"] == CONTROLLER)
        .unwrap();
    assert_eq!(
        cond(&ours["conditions"], "Accepted").unwrap()["status"],
        "True"
    );
    assert_eq!(
        cond(&ours["conditions"], "ResolvedRefs").unwrap()["status"],
        "True"
    );
    let bad = api.object("httproutes", "web", "bad").unwrap();
    let bad_parent = &bad["status"]["parents"][0];
    assert_eq!(
        cond(&bad_parent["conditions"], "Accepted").unwrap()["status"],
        "False"
    );
    let rejected = api
        .wait_until(T, |a| {
            a.objects("events.events.k8s.io")
                .iter()
                .any(|e| e["reason"] == "RouteRejected" && e["regarding"]["name"] == "bad")
        })
        .await;
    assert!(rejected, "no RouteRejected event");

    // Steady state: nothing more is written.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = controller_writes(&api);
    churn(&api, &[&replica]).await;
    assert_eq!(
        controller_writes(&api),
        before,
        "writes in steady state: {:?}",
        api.writes()
    );

    // Change the route: traffic follows without a failed request.
    let mut changed = route("web", "r", "gw", "example.com", "/", "svc-b");
    changed["status"] = api.object("httproutes", "web", "r").unwrap()["status"].clone();
    api.insert(changed);
    let mut switched = false;
    for _ in 0..500 {
        let reply = replica
            .get(port, "example.com", "/x")
            .await
            .expect("request completes");
        assert_eq!(reply.status, 200, "failed request during the change");
        if reply.pod().as_deref() == Some("pod-b") {
            switched = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(switched, "traffic never moved to pod-b");
    let ok = api
        .wait_until(T, |a| {
            let r = a.object("httproutes", "web", "r").unwrap_or_default();
            let gen = r["metadata"]["generation"].clone();
            r["status"]["parents"].as_array().is_some_and(|ps| {
                ps.iter().any(|p| {
                    p["controllerName"] == CONTROLLER
                        && cond(&p["conditions"], "Accepted")
                            .is_some_and(|c| c["observedGeneration"] == gen)
                })
            })
        })
        .await;
    assert!(ok, "observedGeneration not updated");
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_relists_and_outages() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &["gw"], &[("svc", echoes[0].addr)]);
    api.insert(route("web", "keep", "gw", "keep.example", "/", "svc"));
    api.insert(route("web", "gone", "gw", "gone.example", "/", "svc"));
    let replica = Replica::start(&api, "one", port_base()).await;
    let port = wait_gateway_port(&api, "web", "gw", 80).await;
    replica
        .wait_for(port, "gone.example", "/", 200, None, T)
        .await
        .unwrap();

    // A watched delete.
    api.remove("httproutes", "web", "gone").unwrap();
    replica
        .wait_for(port, "gone.example", "/", 404, None, T)
        .await
        .unwrap();

    // A delete the watch never shows: only the relist after 410 reveals it.
    api.insert(route("web", "missed", "gw", "missed.example", "/", "svc"));
    replica
        .wait_for(port, "missed.example", "/", 200, None, T)
        .await
        .unwrap();
    api.remove_unseen("httproutes", "web", "missed").unwrap();
    replica
        .wait_for(port, "missed.example", "/", 404, None, T)
        .await
        .unwrap();

    // Outage: the last good table keeps serving.
    api.stop().await;
    for _ in 0..10 {
        let r = replica.get(port, "keep.example", "/").await.unwrap();
        assert_eq!(r.status, 200);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    api.restart().await.unwrap();
    api.insert(route("web", "after", "gw", "after.example", "/", "svc"));
    replica
        .wait_for(port, "after.example", "/", 200, None, T)
        .await
        .unwrap();

    // Unavailable (503 on every request) then back: converges again.
    api.set_unavailable(true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        replica.get(port, "keep.example", "/").await.unwrap().status,
        200
    );
    api.set_unavailable(false);
    api.remove("httproutes", "web", "after").unwrap();
    replica
        .wait_for(port, "after.example", "/", 404, None, T)
        .await
        .unwrap();
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_leader_and_failover() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &["gw"], &[("svc", echoes[0].addr)]);
    api.insert(route("web", "r", "gw", "example.com", "/", "svc"));
    let base = port_base();
    let mut a = Replica::start(&api, "a", base).await;
    let mut b = Replica::start(&api, "b", base).await;
    let port = wait_gateway_port(&api, "web", "gw", 80).await;
    a.wait_for(port, "example.com", "/", 200, None, T)
        .await
        .unwrap();
    b.wait_for(port, "example.com", "/", 200, None, T)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + T;
    while !(a.is_leader() ^ b.is_leader()) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(a.is_leader() ^ b.is_leader(), "exactly one leader");
    let ok = api
        .wait_until(T, |a| {
            let r = a.object("httproutes", "web", "r").unwrap_or_default();
            r["status"]["parents"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
        })
        .await;
    assert!(ok, "route status not written");

    // No write storm: two replicas in steady state write nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = controller_writes(&api);
    churn(&api, &[&a, &b]).await;
    assert_eq!(
        controller_writes(&api),
        before,
        "writes in steady state: {:?}",
        api.writes()
    );

    // The leader stops; the other takes over and writes the next change.
    let (leader, follower) = if a.is_leader() {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    leader.stop_controller().await;
    let deadline = std::time::Instant::now() + T;
    while !follower.is_leader() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(follower.is_leader(), "no failover");
    // The stopped replica still serves its last table.
    leader
        .wait_for(port, "example.com", "/", 200, None, T)
        .await
        .unwrap();
    let mut bad = route("web", "r", "gw", "example.com", "/", "svc");
    bad["spec"]["parentRefs"][0]["sectionName"] = json!("nope");
    bad["status"] = api.object("httproutes", "web", "r").unwrap()["status"].clone();
    api.insert(bad);
    let ok = api
        .wait_until(T, |a| {
            let r = a.object("httproutes", "web", "r").unwrap_or_default();
            r["status"]["parents"]
                .as_array()
                .and_then(|ps| ps.first())
                .and_then(|p| cond(&p["conditions"], "Accepted"))
                .is_some_and(|c| c["status"] == "False")
        })
        .await;
    assert!(
        ok,
        "new leader did not write: {:?}",
        api.object("httproutes", "web", "r")
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_get_own_ports_and_finalizers_clean_up() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a", "pod-b"]).await;
    seed(
        &api,
        &["one", "two"],
        &[("svc-a", echoes[0].addr), ("svc-b", echoes[1].addr)],
    );
    api.insert(route("web", "r1", "one", "example.com", "/", "svc-a"));
    api.insert(route("web", "r2", "two", "example.com", "/", "svc-b"));
    let replica = Replica::start(&api, "one", port_base()).await;
    let p1 = wait_gateway_port(&api, "web", "one", 80).await;
    let p2 = wait_gateway_port(&api, "web", "two", 80).await;
    assert_ne!(p1, p2, "each Gateway gets its own bound port");
    // Same listener port and hostname, isolated by Gateway.
    replica
        .wait_for(p1, "example.com", "/", 200, Some("pod-a"), T)
        .await
        .unwrap();
    replica
        .wait_for(p2, "example.com", "/", 200, Some("pod-b"), T)
        .await
        .unwrap();
    // GEP-1762: the Service is in the Gateway's namespace, named after it, owned by it.
    let svc = gateway_service(&api, "web", "one").unwrap();
    assert_eq!(svc["metadata"]["name"], "one-edgeplane");
    let owner = &svc["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["name"]),
        (&json!("Gateway"), &json!("one"))
    );
    assert_eq!(owner["controller"], true);
    assert!(
        svc["spec"].get("selector").is_none(),
        "selector-less: {svc}"
    );

    // Deleting a Gateway: the finalizer removes its Service and listeners, then lets go.
    api.remove("gateways", "web", "one").unwrap();
    let gone = api
        .wait_until(T, |a| {
            a.object("gateways", "web", "one").is_none()
                && gateway_port(a, "web", "one", 80).is_none()
        })
        .await;
    assert!(gone, "Gateway or its Service still there");
    replica
        .wait_for(p2, "example.com", "/", 200, Some("pod-b"), T)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + T;
    while replica.get(p1, "example.com", "/").await.is_ok() && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        replica.get(p1, "example.com", "/").await.is_err(),
        "listener of a deleted Gateway still open"
    );
    assert_eq!(
        gateway_port(&api, "web", "two", 80),
        Some(p2),
        "the other Gateway's port moved"
    );

    // The class keeps its finalizer while a Gateway uses it, and loses it after.
    api.remove("gatewayclasses", "", "ep").unwrap();
    assert!(api.object("gatewayclasses", "", "ep").is_some());
    api.remove("gateways", "web", "two").unwrap();
    let gone = api
        .wait_until(T, |a| a.object("gatewayclasses", "", "ep").is_none())
        .await;
    assert!(
        gone,
        "class finalizer not removed: {:?}",
        api.object("gatewayclasses", "", "ep")
    );
    replica.stop().await;
}

/// A target port held by another process on the replica: the leader writes `Programmed=False`
/// (`AddressNotUsable` on the Gateway, `Pending` on the listener) and `Programmed=True` once the
/// port is free and the retry binds it, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_port_in_use_is_reported_until_freed() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &["gw"], &[("svc", echoes[0].addr)]);
    api.insert(route("web", "r", "gw", "example.com", "/", "svc"));
    let base = port_base();
    let bind = support::net::loopback_ip();
    // The first port of the range, which the Gateway's only listener gets.
    let occupier = std::net::TcpListener::bind((bind, base)).expect("occupy the target port");
    let replica = Replica::start_on(&api, "one", base, bind).await;
    assert_eq!(wait_gateway_port(&api, "web", "gw", 80).await, base);
    // (reason, status) of the Gateway's Programmed condition.
    let programmed = |a: &ApiServer| {
        a.object("gateways", "web", "gw")
            .and_then(|g| cond(&g["status"]["conditions"], "Programmed").cloned())
            .map(|c| format!("{} {}", c["reason"], c["status"]))
    };
    let failed = api
        .wait_until(T, |a| {
            programmed(a).as_deref() == Some(r#""AddressNotUsable" "False""#)
        })
        .await;
    let gw = api.object("gateways", "web", "gw").unwrap();
    assert!(failed, "Programmed=False never written: {gw}");
    let c = cond(&gw["status"]["conditions"], "Programmed").unwrap();
    assert_eq!(c["reason"], "AddressNotUsable", "{gw}");
    assert!(
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("{bind}:{base}"))),
        "{gw}"
    );
    let l = cond(&gw["status"]["listeners"][0]["conditions"], "Programmed").unwrap();
    assert_eq!(
        (&l["status"], &l["reason"]),
        (&"False".into(), &"Pending".into())
    );

    drop(occupier);
    // The retry back-off starts at 1 s and is capped at 30 s.
    let recovered = api
        .wait_until(Duration::from_secs(40), |a| {
            programmed(a).as_deref() == Some(r#""Programmed" "True""#)
        })
        .await;
    assert!(
        recovered,
        "{:?}\nbound {:?}\npublished {}",
        api.object("gateways", "web", "gw"),
        replica.proxy.bound(),
        serde_json::to_string(&*replica.published.status()).unwrap()
    );
    replica
        .wait_for(base, "example.com", "/", 200, Some("pod-a"), T)
        .await
        .unwrap();
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infrastructure_labels_and_annotations_reach_the_gateway_service() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &[], &[("svc-a", echoes[0].addr)]);
    let mut gw = gateway("web", "gw", "ep", 80);
    gw["spec"]["infrastructure"] = json!({
        "labels": {"team": "web", "edgeplane.dev/gateway": "other.gateway"},
        "annotations": {"cost-center": "42"},
    });
    api.insert(gw);
    let replica = Replica::start(&api, "one", port_base()).await;
    wait_gateway_port(&api, "web", "gw", 80).await;
    let service = |a: &ApiServer| gateway_service(a, "web", "gw");
    // Added on create; edgeplane's own label wins over a propagated one of the same key. The
    // Service is where upstream conformance looks: in the Gateway's namespace, labelled with
    // the Gateway's name.
    let svc = service(&api).expect("the Gateway's Service");
    assert_eq!(svc["metadata"]["labels"]["team"], "web");
    assert_eq!(
        svc["metadata"]["labels"]["gateway.networking.k8s.io/gateway-class-name"],
        "ep"
    );
    assert_eq!(
        svc["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "edgeplane"
    );
    assert_eq!(svc["metadata"]["annotations"]["cost-center"], "42");

    // Kept current: a changed annotation, a new label and a dropped label follow the Gateway;
    // a label another controller put on the Service stays.
    let mut svc = svc;
    svc["metadata"]["labels"]["cloud.example/zone"] = json!("a");
    api.insert(svc);
    let mut gw = api.object("gateways", "web", "gw").expect("Gateway");
    gw["spec"]["infrastructure"] = json!({
        "labels": {"tier": "edge"},
        "annotations": {"cost-center": "7"},
    });
    api.insert(gw);
    let updated = api
        .wait_until(T, |a| {
            service(a).is_some_and(|s| {
                let m = &s["metadata"];
                m["labels"]["tier"] == "edge"
                    && m["labels"].get("team").is_none()
                    && m["annotations"]["cost-center"] == "7"
            })
        })
        .await;
    let svc = service(&api).expect("the Gateway's Service");
    assert!(updated, "Service not updated: {}", svc["metadata"]);
    assert_eq!(svc["metadata"]["labels"]["cloud.example/zone"], "a");
    assert_eq!(svc["metadata"]["labels"]["edgeplane.dev/gateway"], "web.gw");

    // Nothing left to propagate: the propagated keys go, and steady state writes nothing.
    let mut gw = api.object("gateways", "web", "gw").expect("Gateway");
    gw["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("infrastructure");
    api.insert(gw);
    let cleared = api
        .wait_until(T, |a| {
            service(a).is_some_and(|s| {
                s["metadata"]["labels"].get("tier").is_none()
                    && s["metadata"]["annotations"].get("cost-center").is_none()
            })
        })
        .await;
    assert!(cleared, "propagated keys not removed: {:?}", service(&api));
    let before = api.write_count("services", None, "");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        api.write_count("services", None, ""),
        before,
        "Service rewritten in steady state"
    );
    replica.stop().await;
}
