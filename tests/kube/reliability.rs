//! Reliability in Kubernetes mode through the API emulator: route and endpoint churn with
//! continuous clients, and a Secret updated to garbage PEM.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::*;
use crate::support::apiserver::ApiServer;
use crate::support::client::{get, h1_client, send};
use crate::support::echo::{start_echo, Echo};
use crate::support::tls::{self_signed, served_over_tls, TestCert};
use crate::T;

const ROUTE_CHANGES: usize = 1000;
const ROTATIONS: usize = 100;

/// A Service `name` whose port 80 is named `http`, without a targetPort: each EndpointSlice
/// says which port its endpoint listens on.
fn named_service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "web", "name": name},
        "spec": {"ports": [{"name": "http", "port": 80}]}})
}

/// EndpointSlice `slice` of Service `service` with the one ready endpoint `addr`.
fn slice(service: &str, slice: &str, addr: SocketAddr) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": "web", "name": slice,
            "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": addr.port()}],
        "endpoints": [{"addresses": [addr.ip().to_string()], "conditions": {"ready": true}}]})
}

/// Waits (bounded) until the replica publishes a table newer than `generation`.
async fn wait_past(replica: &Replica, generation: u64) {
    let deadline = Instant::now() + T;
    while replica.published.table().generation <= generation {
        assert!(Instant::now() < deadline, "no new table after a change");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Clients that send GETs back to back until told to stop; (sent, failures).
fn load(
    addr: SocketAddr,
    hosts: &[&str],
    stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<(u64, Vec<String>)>> {
    hosts
        .iter()
        .map(|host| {
            let host = host.to_string();
            let stop = stop.clone();
            tokio::spawn(async move {
                let client = h1_client();
                let (mut sent, mut failures) = (0, Vec::new());
                let deadline = Instant::now() + Duration::from_secs(120);
                while !*stop.borrow() && Instant::now() < deadline {
                    sent += 1;
                    match send(&client, get(addr, &host, "/")).await {
                        Ok(r) if r.status.is_success() => {}
                        Ok(r) => failures.push(format!("{host}: {}", r.status)),
                        Err(e) => failures.push(format!("{host}: {e}")),
                    }
                }
                (sent, failures)
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_and_endpoint_churn_fails_no_request() {
    let api = ApiServer::start().await;
    let web = start_echo("web").await;
    let mut rot: Echo = start_echo("rot-0").await;
    api.insert(class("ep"));
    api.insert(gateway("web", "gw", "ep", 80));
    for o in backend("web", "svc-web", web.addr) {
        api.insert(o);
    }
    api.insert(named_service("rot"));
    api.insert(slice("rot", "rot-0", rot.addr));
    api.insert(route(
        "web",
        "stable-web",
        "gw",
        "web.example",
        "/",
        "svc-web",
    ));
    api.insert(route("web", "stable-rot", "gw", "rot.example", "/", "rot"));
    let replica = Replica::start(&api, "one", port_base()).await;
    let port = wait_gateway_port(&api, "web", "gw", 80).await;
    for host in ["web.example", "rot.example"] {
        replica
            .wait_for(port, host, "/", 200, None, T)
            .await
            .unwrap();
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let clients = load(
        SocketAddr::new(replica.bind, port),
        &["web.example", "rot.example", "rot.example"],
        stop_rx,
    );
    let started = Instant::now();
    let mut retired = Vec::new();
    let mut rotations = 0;
    for change in 0..ROUTE_CHANGES {
        // Ten routes, each added, edited, then deleted in turn.
        let name = format!("churn-{}", change % 10);
        let generation = replica.published.table().generation;
        match (change / 10) % 3 {
            0 | 1 => {
                let host = format!("{name}.example");
                let path = format!("/v{change}");
                api.insert(route("web", &name, "gw", &host, &path, "svc-web"));
            }
            _ => {
                api.remove("httproutes", "web", &name)
                    .expect("delete route");
            }
        }
        wait_past(&replica, generation).await;
        if change % 10 == 9 && rotations < ROTATIONS {
            // A rolling update: the new endpoint's slice first, then the old slice goes.
            rotations += 1;
            let next = start_echo(&format!("rot-{rotations}")).await;
            let generation = replica.published.table().generation;
            api.insert(slice("rot", &format!("rot-{rotations}"), next.addr));
            wait_past(&replica, generation).await;
            let generation = replica.published.table().generation;
            api.remove("endpointslices", "web", &format!("rot-{}", rotations - 1))
                .expect("delete slice");
            wait_past(&replica, generation).await;
            retired.push(std::mem::replace(&mut rot, next));
            if retired.len() > 2 {
                retired.remove(0);
            }
        }
    }
    let elapsed = started.elapsed();
    stop_tx.send_replace(true);
    let (mut sent, mut failures) = (0, Vec::new());
    for c in clients {
        let (s, f) = tokio::time::timeout(Duration::from_secs(15), c)
            .await
            .expect("client stops")
            .expect("client task");
        sent += s;
        failures.extend(f);
    }
    println!(
        "kubernetes churn: {ROUTE_CHANGES} route changes and {rotations} endpoint rotations in \
         {:.1} s; {sent} requests, {} failed",
        elapsed.as_secs_f64(),
        failures.len()
    );
    assert!(sent > 100, "the clients sent only {sent} requests");
    assert!(
        failures.is_empty(),
        "{:#?}",
        &failures[..failures.len().min(10)]
    );
    drop(retired);
    replica.stop().await;
}

fn tls_secret(cert: &str, key: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "web", "name": "cert"},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": base64_encode(cert.as_bytes()), "tls.key": base64_encode(key.as_bytes())}})
}

/// Standard base64 with padding (Secret `data`).
fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

async fn served(addr: SocketAddr, trusted: &TestCert) -> Result<(), String> {
    served_over_tls(addr, "a.secure.example", trusted).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_secret_keeps_the_last_good_certificate_serving() {
    let api = ApiServer::start().await;
    let web = start_echo("web").await;
    let first = self_signed(&["*.secure.example"]);
    api.insert(class("ep"));
    let mut gw = gateway("web", "gw", "ep", 80);
    gw["spec"]["listeners"] = json!([{"name": "https", "port": 443, "protocol": "HTTPS",
        "hostname": "*.secure.example", "tls": {"certificateRefs": [{"name": "cert"}]}}]);
    api.insert(gw);
    for o in backend("web", "svc-web", web.addr) {
        api.insert(o);
    }
    api.insert(route("web", "r", "gw", "a.secure.example", "/", "svc-web"));
    api.insert(tls_secret(&first.cert_pem, &first.key_pem));
    let replica = Replica::start(&api, "one", port_base()).await;
    let port = wait_gateway_port(&api, "web", "gw", 443).await;
    let addr = SocketAddr::new(replica.bind, port);
    let deadline = Instant::now() + T;
    while served(addr, &first).await.is_err() {
        assert!(Instant::now() < deadline, "certificate never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let generation = replica.published.table().generation;
    api.insert(tls_secret("garbage", "more garbage"));
    wait_past(&replica, generation).await;
    let listener_condition = |a: &ApiServer, ty: &str| {
        a.object("gateways", "web", "gw")
            .and_then(|g| cond(&g["status"]["listeners"][0]["conditions"], ty).cloned())
    };
    let written = api
        .wait_until(T, |a| {
            listener_condition(a, "ResolvedRefs").is_some_and(|c| c["status"] == "False")
        })
        .await;
    let resolved = listener_condition(&api, "ResolvedRefs").unwrap_or_default();
    assert!(written, "ResolvedRefs=False never written: {resolved}");
    assert_eq!(resolved["reason"], "InvalidCertificateRef");
    assert!(
        resolved["message"]
            .as_str()
            .is_some_and(|m| m.contains("web/cert") && m.contains("still served")),
        "{resolved}"
    );
    assert_eq!(
        listener_condition(&api, "Programmed").unwrap_or_default()["status"],
        "True"
    );
    for _ in 0..3 {
        served(addr, &first)
            .await
            .expect("the previous certificate is still served");
    }
    let metrics = replica.published.metrics().encode();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("edgeplane_certificate_expiry_seconds{")
                && l.contains(r#"listener="web/gw/https""#)
                && l.contains(r#"name="cert""#)
                && l.contains(r#"namespace="web""#)),
        "{metrics}"
    );
    replica.stop().await;
}
