//! Ingresses in a cluster: watched, served by the implicit Gateway of their IngressClass (its
//! ports through the port map), ours only by class (the default class taking Ingresses that
//! name none), `status.loadBalancer` written by the leader once, not again in a steady state,
//! cleared once when an Ingress stops being ours (another controller's value left alone),
//! and an unsupported annotation recorded as one Warning Event.

use edgeplane::translate::PortMap;
use serde_json::{json, Value};

use crate::harness::*;
use crate::support::apiserver::ApiServer;
use crate::support::echo::start_fleet;
use crate::support::net::loopback_ip as loopback;
use crate::T;

fn ingress_class(default: bool) -> Value {
    let annotations = if default {
        json!({"ingressclass.kubernetes.io/is-default-class": "true"})
    } else {
        json!({})
    };
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": "edge", "annotations": annotations},
        "spec": {"controller": "edgeplane.dev/ingress-controller"}})
}

fn ingress(name: &str, class: Option<&str>, host: &str, service: &str) -> Value {
    let mut spec = json!({"rules": [{"host": host, "http": {"paths": [{"path": "/",
        "pathType": "Prefix", "backend": {"service": {"name": service, "port": {"number": 80}}}}]}}]});
    if let Some(c) = class {
        spec["ingressClassName"] = json!(c);
    }
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"namespace": "web", "name": name}, "spec": spec})
}

fn load_balancer(api: &ApiServer, name: &str) -> Value {
    let i = api.object("ingresses", "web", name).unwrap_or_default();
    i["status"]["loadBalancer"]["ingress"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingresses_are_served_and_get_their_load_balancer_status() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a", "pod-b"]).await;
    for (name, addr) in [("svc-a", echoes[0].addr), ("svc-b", echoes[1].addr)] {
        for o in backend("web", name, addr) {
            api.insert(o);
        }
    }
    api.insert(ingress_class(true));
    // Named no class: ours through the default class.
    api.insert(ingress("shop", None, "shop.example.com", "svc-a"));
    // Another controller's class, with that controller's address.
    let mut theirs = ingress("theirs", Some("nginx"), "theirs.example.com", "svc-b");
    theirs["status"] = json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}});
    api.insert(theirs);
    // A class of ours named through the field, with an annotation not supported yet.
    let mut blog = ingress("blog", Some("edge"), "blog.example.com", "svc-b");
    blog["metadata"]["annotations"] = json!({"nginx.ingress.kubernetes.io/mirror-target": "true"});
    api.insert(blog);

    let port = port_base();
    let map: PortMap = format!("80={port}").parse().expect("port map");
    let replica = Replica::start_reconciling(&api, options("one", port_base()), loopback(), |o| {
        o.port_map = map;
    })
    .await;
    replica
        .wait_for(port, "shop.example.com", "/x", 200, Some("pod-a"), T)
        .await
        .unwrap();
    replica
        .wait_for(port, "blog.example.com", "/", 200, Some("pod-b"), T)
        .await
        .unwrap();
    replica
        .wait_for(port, "theirs.example.com", "/", 404, None, T)
        .await
        .unwrap();

    // The leader writes each of our Ingresses the implicit Gateway's address.
    let want = json!([{"ip": replica.bind.to_string()}]);
    let written = api
        .wait_until(T, |a| {
            a.object("ingresses", "web", "shop")
                .is_some_and(|i| i["status"]["loadBalancer"]["ingress"] == want)
        })
        .await;
    assert!(written, "shop: {}", load_balancer(&api, "shop"));
    let written = api
        .wait_until(T, |a| {
            a.object("ingresses", "web", "blog")
                .is_some_and(|i| i["status"]["loadBalancer"]["ingress"] == want)
        })
        .await;
    assert!(written, "blog: {}", load_balancer(&api, "blog"));
    assert_eq!(
        load_balancer(&api, "theirs"),
        json!([{"ip": "192.0.2.7"}]),
        "not ours: not written"
    );

    // The annotation is reported on the Ingress by a Warning Event.
    let unsupported = |a: &ApiServer| -> Vec<Value> {
        a.objects("events.events.k8s.io")
            .into_iter()
            .filter(|e| e["reason"] == "Unsupported" && e["regarding"]["name"] == "blog")
            .collect()
    };
    assert!(
        api.wait_until(T, |a| !unsupported(a).is_empty()).await,
        "no Unsupported Event for blog"
    );
    let note = unsupported(&api)[0]["note"].to_string();
    assert!(
        note.contains("nginx.ingress.kubernetes.io/mirror-target"),
        "{note}"
    );

    // Steady state: rebuilds write nothing more, and record the Event once.
    let writes = api.write_count("ingresses", None, "status");
    assert_eq!(writes, 2, "one write per Ingress of ours");
    churn(&api, &[&replica]).await;
    assert_eq!(api.write_count("ingresses", None, "status"), writes);
    let events = unsupported(&api);
    assert_eq!(events.len(), 1, "the Event is recorded once");
    // A repeat would have made it a series.
    assert!(
        events[0].get("series").is_none_or(Value::is_null),
        "{}",
        events[0]
    );

    // Without the default mark, the Ingress naming no class is no longer ours.
    api.insert(ingress_class(false));
    replica
        .wait_for(port, "shop.example.com", "/x", 404, None, T)
        .await
        .unwrap();
    replica
        .wait_for(port, "blog.example.com", "/", 200, Some("pod-b"), T)
        .await
        .unwrap();
    // The address written while it was ours is cleared, once; the other controller's stays.
    let cleared = api
        .wait_until(T, |a| {
            a.object("ingresses", "web", "shop")
                .is_some_and(|i| i["status"]["loadBalancer"]["ingress"] == json!([]))
        })
        .await;
    assert!(cleared, "shop: {}", load_balancer(&api, "shop"));
    let writes = api.write_count("ingresses", None, "status");
    assert_eq!(writes, 3, "one more write: shop's clearing");
    // Churn again (its objects removed first, so that inserting them changes something).
    for i in 0..5 {
        api.remove("services", "unrelated", &format!("churn-{i}"))
            .expect("churn service");
    }
    churn(&api, &[&replica]).await;
    assert_eq!(api.write_count("ingresses", None, "status"), writes);
    assert_eq!(load_balancer(&api, "theirs"), json!([{"ip": "192.0.2.7"}]));
    assert_eq!(load_balancer(&api, "blog"), want);
    replica.stop().await;
}
