//! A throwaway route kind, added the way every route kind is (its line in `route_kinds!`, its
//! `RouteKind` impl, its snapshot field, its CRD), attaches, routes and reports status with no
//! other change: read from manifests by the file provider, translated, and served by the real
//! proxy over loopback sockets.
//!
//! Why a `#[cfg(test)]` kind in the library rather than a kind registered by a test crate: the
//! translator reads one closed `Snapshot` and reports one closed `ObjectKind`, both generated
//! from the declarations, so a kind must be declared where they are; compiling it only into
//! the library's own test build adds no build of the library (the unit-test build exists
//! anyway), and the product never sees it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::admission::Crds;
use crate::kinds::routes::RouteKindId;
use crate::metrics::Metrics;
use crate::provider::file::ConfigDir;
use crate::proxy::{Proxy, ProxyOptions};
use crate::status::ObjectKind;
use crate::translate::{translate, Capabilities, TranslateOptions};

const CONTROLLER: &str = "edgeplane.dev/gateway-controller";
/// Bound on every wait of these tests.
const WAIT: Duration = Duration::from_secs(5);

/// The CRD of the throwaway kind: any spec is admitted.
fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "throwawayroutes.gateway.networking.k8s.io"},
        "spec": {"group": "gateway.networking.k8s.io",
            "names": {"kind": "ThrowawayRoute", "plural": "throwawayroutes"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

/// A Gateway with one TCP listener on `port`, a Service whose one endpoint is `backend`, and a
/// ThrowawayRoute from the listener to the Service.
fn manifests(port: u16, backend: SocketAddr) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: c}}
spec: {{controllerName: {CONTROLLER}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: ns}}
spec:
  gatewayClassName: c
  listeners:
  - {{name: tcp, port: {port}, protocol: TCP}}
---
apiVersion: v1
kind: Service
metadata: {{name: echo, namespace: ns}}
spec: {{ports: [{{port: 80}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: echo-1, namespace: ns, labels: {{kubernetes.io/service-name: echo}}}}
addressType: IPv4
endpoints: [{{addresses: ['{ip}']}}]
ports: [{{port: {backend_port}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ThrowawayRoute
metadata: {{name: r, namespace: ns}}
spec:
  parentRefs: [{{name: gw, sectionName: tcp}}]
  rules: [{{backendRefs: [{{name: echo, port: 80}}]}}]
",
        ip = backend.ip(),
        backend_port = backend.port(),
    )
}

/// A TCP backend that echoes what each connection sends, until the test ends.
async fn echo_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
    let addr = listener.local_addr().expect("echo address");
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 || conn.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("address").port()
}

/// What a connection to `addr` gets back for `ping`.
async fn round_trip(addr: SocketAddr) -> Result<Vec<u8>, String> {
    let exchange = async {
        let mut conn = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        conn.write_all(b"ping").await.map_err(|e| e.to_string())?;
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
        Ok(buf.to_vec())
    };
    tokio::time::timeout(WAIT, exchange)
        .await
        .map_err(|_| "timed out".to_owned())?
}

/// The `(type, status)` of each condition of the route's first parent.
fn parent_conditions(status: &Value) -> Vec<(String, String)> {
    let conditions = status["parents"][0]["conditions"].as_array();
    conditions
        .into_iter()
        .flatten()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (text("type"), text("status"))
        })
        .collect()
}

#[tokio::test]
async fn a_throwaway_route_kind_attaches_routes_and_reports_status_standalone() {
    let backend = echo_backend().await;
    let port = free_port();
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), manifests(port, backend)).expect("write");
    let mut crds = Crds::new();
    crate::admission::builtin::register(&mut crds).expect("built-in CRDs");
    crds.register(&crd()).expect("throwaway CRD");

    let load = ConfigDir::new(dir.path(), Arc::new(crds))
        .load()
        .expect("read dir");
    assert!(load.errors.is_empty(), "{:?}", load.errors);
    assert!(load.skipped.is_empty(), "{:?}", load.skipped);
    assert_eq!(load.snapshot.throwaway_routes.len(), 1);

    let options = TranslateOptions {
        ingress: Default::default(),
        controller_name: CONTROLLER.into(),
        bind_address: "127.0.0.1".parse().expect("address"),
        now: "2026-01-01T00:00:00Z".parse().expect("timestamp"),
        generation: 1,
        port_map: Default::default(),
        capabilities: Capabilities::STANDALONE,
    };
    let t = translate(&load.snapshot, &options);

    // Status: the route is accepted with its refs resolved, the listener counts it and lists
    // the kind among those it supports.
    let kind = ObjectKind::Route(RouteKindId::ThrowawayRoute);
    let route = t.status.get(kind, Some("ns"), "r").expect("route status");
    let route = route.status.to_json().into_owned();
    assert_eq!(
        parent_conditions(&route),
        [
            ("Accepted".to_owned(), "True".to_owned()),
            ("ResolvedRefs".to_owned(), "True".to_owned())
        ]
    );
    assert_eq!(route["parents"][0]["controllerName"], CONTROLLER);
    let gateway = t
        .status
        .get(ObjectKind::Gateway, Some("ns"), "gw")
        .expect("Gateway status");
    let listener = gateway.status.to_json()["listeners"][0].clone();
    assert_eq!(listener["attachedRoutes"], 1);
    let kinds: Vec<&str> = listener["supportedKinds"]
        .as_array()
        .expect("supportedKinds")
        .iter()
        .filter_map(|k| k["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["TCPRoute", "ThrowawayRoute"]);

    // Routing: a connection to the listener reaches the echo backend through the real proxy.
    let table = Arc::new(ArcSwap::from_pointee(t.table));
    let proxy = Proxy::new(table.clone(), Metrics::new(), ProxyOptions::default());
    let errors = proxy.sync_listeners(&table.load()).await;
    assert!(errors.is_empty(), "{errors:?}");
    let addr = SocketAddr::new(options.bind_address, port);
    assert_eq!(round_trip(addr).await, Ok(b"ping".to_vec()));
    proxy.shutdown().await;
}

/// The in-process Kubernetes API emulator of the integration tests, compiled into this test
/// build (its `edgeplane::` paths name this crate): with the throwaway kind declared, it serves
/// the kind like every other declared one. `net` is the sibling it binds its socket with.
#[allow(dead_code, unused_imports)]
#[path = "../tests/support/apiserver/mod.rs"]
mod apiserver;
#[allow(dead_code)]
#[path = "../tests/support/net.rs"]
mod net;

/// A Gateway API object as JSON, from the YAML of [`manifests`].
fn documents(port: u16, backend: SocketAddr) -> Vec<Value> {
    manifests(port, backend)
        .split("\n---\n")
        .map(|d| serde_yaml_ng::from_str(d).expect("fixture"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throwaway_route_kind_attaches_routes_and_reports_status_in_kubernetes() {
    use crate::provider::kube::{KubeOptions, KubeProvider};
    use crate::reconcile::{Published, ReconcileOptions, Reconciler};
    use apiserver::ApiServer;

    let api = ApiServer::start().await;
    let backend = echo_backend().await;
    for o in documents(9000, backend) {
        api.insert(o);
    }
    let bind = net::loopback_ip();
    let mut options = KubeOptions::new(CONTROLLER, "edgeplane-system", "one");
    options.lease_duration = Duration::from_secs(2);
    options.lease_renew_deadline = Duration::from_secs(1);
    options.lease_retry_period = Duration::from_millis(200);
    options.status_retry = Duration::from_millis(200);
    options.port_base = fastrand::u16(20_000..60_000);
    options.port_count = 50;
    let metrics = Metrics::new();
    let published = Published::new(metrics.clone());
    let proxy = Proxy::new(
        published.shared_table(),
        metrics.clone(),
        ProxyOptions::default(),
    );
    let provider = KubeProvider::start(api.client(), options, published.clone(), metrics);
    let mut snapshots = provider.snapshots.clone();
    let reconciler = Reconciler::new(
        published.clone(),
        Some(proxy.clone()),
        ReconcileOptions {
            ingress: Default::default(),
            controller_name: CONTROLLER.to_owned(),
            bind_address: bind,
            port_map: Default::default(),
            sources: Default::default(),
            capabilities: Capabilities::KUBERNETES,
        },
    );
    let reconcile = tokio::spawn(async move {
        if snapshots.changed().await.is_ok() {
            reconciler.run(snapshots).await;
        }
    });

    // Status: the status writer patches the route's `parents[]` as for every route kind.
    let accepted = api
        .wait_until(WAIT, |a| {
            let route = a.object("throwawayroutes", "ns", "r").unwrap_or_default();
            parent_conditions(&route["status"]).contains(&("Accepted".into(), "True".into()))
        })
        .await;
    let route = api.object("throwawayroutes", "ns", "r").unwrap_or_default();
    assert!(accepted, "route status never written: {route}");
    assert_eq!(
        parent_conditions(&route["status"]),
        [
            ("Accepted".to_owned(), "True".to_owned()),
            ("ResolvedRefs".to_owned(), "True".to_owned())
        ]
    );
    let counted = api
        .wait_until(WAIT, |a| {
            let gw = a.object("gateways", "ns", "gw").unwrap_or_default();
            gw["status"]["listeners"][0]["attachedRoutes"] == 1
        })
        .await;
    assert!(counted, "{:?}", api.object("gateways", "ns", "gw"));

    // Routing: the Gateway's Service maps the listener port to the port this replica binds.
    let mut target = None;
    api.wait_until(WAIT, |a| {
        target = a.objects("services").into_iter().find_map(|s| {
            let ours = s["metadata"]["namespace"] == "ns"
                && s["metadata"]["labels"]["gateway.networking.k8s.io/gateway-name"] == "gw";
            let ports = s["spec"]["ports"].as_array().filter(|_| ours)?;
            let port = ports.iter().find(|p| p["port"] == 9000)?;
            port["targetPort"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
        });
        target.is_some()
    })
    .await;
    let target = target.expect("the Gateway's Service maps port 9000");
    let addr = SocketAddr::new(bind, target);
    let mut reply = Err(String::new());
    for _ in 0..50 {
        reply = round_trip(addr).await;
        if reply.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(reply, Ok(b"ping".to_vec()));

    reconcile.abort();
    provider.stop().await;
    proxy.shutdown().await;
}
