//! Route propagation in Kubernetes mode: the time from an HTTPRoute create (through the API
//! emulator, over real HTTP) to the first correctly routed response from the proxy, with 100,
//! 1,000 and 5,000 routes already in place, while a client keeps sending requests to existing
//! routes and counts those not answered 2xx. Prints p50/p99 per size as a table.
//!
//! `cargo bench --bench propagation` (set `PROPAGATION_SIZES=100,1000` to pick sizes,
//! `PROPAGATION_LOG=1` for the replica's log on stderr, with each sample's create, the return of
//! the create call and the first routed answer timestamped beside it). The
//! replica runs as a follower (another identity holds the Lease), so the figures measure watch,
//! snapshot, translation, table swap and routing, not status writes.

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgeplane::metrics::Metrics;
use edgeplane::provider::kube::{KubeOptions, KubeProvider};
use edgeplane::proxy::Proxy;
use edgeplane::reconcile::{Published, ReconcileOptions, Reconciler};
use gateway_api::apis::experimental::httproutes::HttpRoute;
use kube::api::PostParams;
use kube::Api;
use serde_json::{json, Value};
use support::apiserver::ApiServer;
use support::client::{get, h1_client, send};

/// The allocator of the `edgeplane` binary, so that translation costs what it costs there.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const NS: &str = "bench";
const SYSTEM_NS: &str = "edgeplane-system";
const CONTROLLER: &str = "edgeplane.dev/gateway-controller";

fn route(i: &str) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"namespace": NS, "name": format!("r-{i}")},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [format!("{i}.example")],
            "rules": [{"backendRefs": [{"name": "echo", "port": 80}]}]}})
}

fn setup(api: &ApiServer, routes: usize, echo: SocketAddr, target_port: u16) {
    api.insert(
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "ep"}, "spec": {"controllerName": CONTROLLER}}),
    );
    api.insert(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"namespace": NS, "name": "gw"},
        "spec": {"gatewayClassName": "ep", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP",
            "allowedRoutes": {"namespaces": {"from": "Same"}}}]}}));
    // What the leader would have made: the Gateway's Service (beside the Gateway) and its
    // target port.
    api.insert(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"namespace": NS, "name": "gw-edgeplane",
            "labels": {"edgeplane.dev/gateway": format!("{NS}.gw"),
                "app.kubernetes.io/managed-by": "edgeplane",
                "gateway.networking.k8s.io/gateway-name": "gw"}},
        "spec": {"ports": [{"name": "port-80", "port": 80, "targetPort": target_port}]}}));
    // A lease held by someone else for an hour: this replica stays a follower.
    api.insert(
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"namespace": SYSTEM_NS, "name": "edgeplane-leader"},
        "spec": {"holderIdentity": "elsewhere", "leaseDurationSeconds": 3600,
            "renewTime": "2030-01-01T00:00:00.000000Z"}}),
    );
    api.insert(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": NS, "name": "echo"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": echo.port()}]}}),
    );
    api.insert(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": NS, "name": "echo-1", "labels": {"kubernetes.io/service-name": "echo"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": echo.port()}],
        "endpoints": [{"addresses": [echo.ip().to_string()], "conditions": {"ready": true}}]}));
    for i in 0..routes {
        api.insert(route(&format!("base-{i}")));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// What one size measured.
struct Figures {
    p50: Duration,
    p99: Duration,
    max: Duration,
    /// Mean rebuild (translate + publish) time.
    rebuild: Duration,
    /// Requests a client sent to existing routes while the samples ran, and how many of them
    /// were not answered 2xx.
    requests: u64,
    failed: u64,
}

/// Sends requests to existing routes (one after another, over one keep-alive client) until
/// `stop`, counting them and those not answered 2xx.
async fn steady_client(addr: SocketAddr, routes: usize, stop: Arc<AtomicBool>) -> (u64, u64) {
    let client = h1_client();
    let (mut sent, mut failed) = (0u64, 0u64);
    let hosts: Vec<String> = [0, routes / 2, routes - 1]
        .iter()
        .map(|i| format!("base-{i}.example"))
        .collect();
    while !stop.load(Ordering::Acquire) {
        let host = &hosts[(sent % hosts.len() as u64) as usize];
        sent += 1;
        if !matches!(send(&client, get(addr, host, "/")).await, Ok(r) if r.status.is_success()) {
            failed += 1;
        }
    }
    (sent, failed)
}

/// Propagation figures with `routes` routes in place, over `samples` new routes.
async fn measure(routes: usize, samples: usize) -> Option<Figures> {
    let api = ApiServer::start().await;
    let echo = support::echo::start_echo("bench").await;
    let target_port = support::net::free_addr().port();
    setup(&api, routes, echo.addr, target_port);
    let bind = support::net::loopback_ip();
    let metrics = Metrics::new();
    let published = Published::new(metrics.clone());
    let proxy = Proxy::new(
        published.shared_table(),
        metrics.clone(),
        support::proxy::test_options(),
    );
    let mut options = KubeOptions::new(CONTROLLER, SYSTEM_NS, "bench");
    options.lease_retry_period = Duration::from_secs(1);
    let provider = KubeProvider::start(api.client(), options, published.clone(), metrics.clone());
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
            capabilities: edgeplane::translate::Capabilities::KUBERNETES,
        },
    );
    let reconcile = tokio::spawn(async move {
        if snapshots.changed().await.is_ok() {
            reconciler.run(snapshots).await;
        }
    });
    let addr = SocketAddr::new(bind, target_port);
    let client = h1_client();
    let ready = Instant::now() + Duration::from_secs(120);
    while !published.is_ready()
        || !matches!(send(&client, get(addr, "base-0.example", "/")).await, Ok(r) if r.status == 200)
    {
        if Instant::now() > ready {
            eprintln!("{routes} routes: the first table never served");
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let routes_api: Api<HttpRoute> = Api::namespaced(api.client(), NS);
    // The emulator checks every write against the built-in schemas, which it builds at its
    // first write (tens of milliseconds): not part of propagation, so built before the clock.
    let schemas = Instant::now();
    drop(edgeplane::admission::builtin::crds());
    tracing::debug!(
        build_us = schemas.elapsed().as_micros() as u64,
        "the emulator's schemas built"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let steady = tokio::spawn(steady_client(addr, routes, stop.clone()));
    let mut times = Vec::with_capacity(samples);
    for k in 0..samples {
        let name = format!("new-{k}");
        let obj: HttpRoute = serde_json::from_value(route(&name)).ok()?;
        let host = format!("{name}.example");
        let started = Instant::now();
        tracing::debug!(sample = k, "creating");
        routes_api.create(&PostParams::default(), &obj).await.ok()?;
        tracing::debug!(
            sample = k,
            create_us = started.elapsed().as_micros() as u64,
            "created"
        );
        let mut tries = 0u64;
        let deadline = started + Duration::from_secs(60);
        loop {
            tries += 1;
            if let Ok(r) = send(&client, get(addr, &host, "/")).await {
                if r.status == 200 {
                    tracing::debug!(
                        sample = k,
                        tries,
                        served_us = started.elapsed().as_micros() as u64,
                        "served"
                    );
                    break;
                }
            }
            if Instant::now() > deadline {
                eprintln!("{routes} routes: sample {k} never served");
                return None;
            }
            tokio::task::yield_now().await;
        }
        times.push(started.elapsed());
        // Let any follow-up rebuild finish before the next sample.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Release);
    let (requests, failed) = steady.await.ok()?;
    let rebuilds = metrics.rebuild_seconds.with_label_values(&["ok"]);
    let mean_rebuild = Duration::from_secs_f64(
        rebuilds.get_sample_sum() / rebuilds.get_sample_count().max(1) as f64,
    );
    reconcile.abort();
    provider.stop().await;
    proxy.shutdown().await;
    times.sort();
    Some(Figures {
        p50: percentile(&times, 0.5),
        p99: percentile(&times, 0.99),
        max: times[times.len() - 1],
        rebuild: mean_rebuild,
        requests,
        failed,
    })
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    if std::env::var_os("PROPAGATION_LOG").is_some() {
        // The replica's log and the samples' steps on stderr (`RUST_LOG` filters them;
        // default: debug for edgeplane and this benchmark).
        let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new("edgeplane=debug,propagation=debug")
        });
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let sizes: Vec<usize> = std::env::var("PROPAGATION_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 1000, 5000]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!("| existing routes | samples | p50 | p99 | max | mean rebuild | requests to existing routes | non-2xx |");
    println!("|---|---|---|---|---|---|---|---|");
    for routes in sizes {
        let samples = if routes >= 5000 { 20 } else { 50 };
        match runtime.block_on(measure(routes, samples)) {
            Some(f) => println!(
                "| {routes} | {samples} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {} | {} |",
                f.p50.as_secs_f64() * 1e3,
                f.p99.as_secs_f64() * 1e3,
                f.max.as_secs_f64() * 1e3,
                f.rebuild.as_secs_f64() * 1e3,
                f.requests,
                f.failed
            ),
            None => println!("| {routes} | {samples} | failed | | | | | |"),
        }
    }
}
