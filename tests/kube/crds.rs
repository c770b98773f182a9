//! A cluster without the edgeplane.dev CRDs: the missing kinds count as empty and are retried
//! with a growing backoff while nothing is republished, one WARN line and a gauge say so, the
//! kinds are picked up when their CRDs are created and emptied when deleted. And the
//! controller's namespace: empty is a start-up error.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use crate::harness::*;
use crate::support;
use crate::support::apiserver::ApiServer;
use crate::support::echo::start_fleet;
use crate::support::net::loopback_ip;
use crate::T;

const EDGEPLANE_CRDS: [&str; 2] = [
    "proxyconfigs.edgeplane.dev",
    "trafficpolicies.edgeplane.dev",
];
const POLICY_LIST: &str = "/apis/edgeplane.dev/v1beta1/trafficpolicies?";

/// Creates the CRDs `edgeplane crds` prints; the emulator then serves their kinds, as an API
/// server does once a CRD is established.
fn install_crds(api: &ApiServer) {
    for crd in edgeplane::kinds::crd::generate::crd_values().expect("CRDs generate") {
        api.insert(crd);
    }
}

/// List requests for TrafficPolicies the emulator has answered so far.
fn policy_lists(api: &ApiServer) -> usize {
    api.requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path_and_query.starts_with(POLICY_LIST))
        .count()
}

/// The most list attempts a reflector retrying with waits of `initial` doubling to `max` (each
/// at least 3/4 of that) can make within `elapsed`: the first, plus one per wait that fits.
fn most_attempts(elapsed: Duration, initial: Duration, max: Duration) -> usize {
    let (mut at, mut wait, mut n) = (Duration::ZERO, initial, 1);
    loop {
        at += wait.min(max).mul_f64(0.75);
        if at > elapsed {
            return n;
        }
        n += 1;
        wait = wait.saturating_mul(2);
    }
}

/// A TrafficPolicy denying loopback clients on route `web/r`.
fn deny_policy() -> Value {
    json!({"apiVersion": "edgeplane.dev/v1beta1", "kind": "TrafficPolicy",
        "metadata": {"namespace": "web", "name": "deny"},
        "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
            "name": "r"}], "ipAccess": {"deny": ["127.0.0.0/8"]}}})
}

fn policy_accepted(api: &ApiServer) -> bool {
    let Some(p) = api.object("trafficpolicies.edgeplane.dev", "web", "deny") else {
        return false;
    };
    p["status"]["ancestors"].as_array().is_some_and(|a| {
        a.iter().any(|x| {
            x["controllerName"] == CONTROLLER
                && cond(&x["conditions"], "Accepted").is_some_and(|c| c["status"] == "True")
        })
    })
}

/// Waits until the replica's table generation stays put for 700 ms (status writes and the
/// rebuilds they cause are over); bounded.
async fn settled(replica: &Replica) {
    let deadline = Instant::now() + T;
    loop {
        let g = replica.published.table().generation;
        tokio::time::sleep(Duration::from_millis(700)).await;
        if replica.published.table().generation == g || Instant::now() > deadline {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_crds_back_off_publish_nothing_and_are_picked_up_when_created() {
    let api = ApiServer::start().await;
    for resource in EDGEPLANE_CRDS {
        api.unregister(resource);
    }
    // Gateway API kinds missing (the experimental channel not installed) are treated alike.
    api.unregister("tcproutes.gateway.networking.k8s.io");
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &["gw"], &[("svc-a", echoes[0].addr)]);
    api.insert(route("web", "r", "gw", "example.com", "/", "svc-a"));
    let mut options = options("one", port_base());
    options.watch_retry.max = Duration::from_secs(4);
    let (initial, max) = (options.watch_retry.initial, options.watch_retry.max);
    let started = Instant::now();
    let replica = Replica::start_with(&api, options, loopback_ip()).await;
    let port = wait_gateway_port(&api, "web", "gw", 80).await;
    replica
        .wait_for(port, "example.com", "/", 200, Some("pod-a"), T)
        .await
        .unwrap();
    let metrics = replica.published.metrics();
    let available = |kind: &str| {
        metrics
            .watch_kind_available
            .with_label_values(&[kind])
            .get()
    };
    assert_eq!(available("TrafficPolicy"), 0);
    assert_eq!(available("ProxyConfig"), 0);
    assert_eq!(available("TCPRoute"), 0);
    assert_eq!(available("Gateway"), 1);
    assert_eq!(available("HTTPRoute"), 1);
    settled(&replica).await;

    // Five quiet seconds: no rebuild, no new table, and a handful of lists at growing
    // intervals (kube's default backoff, reset by every attempt's Init, listed about once a
    // second and republished each time).
    let rebuilds = || {
        metrics
            .rebuild_seconds
            .with_label_values(&["ok"])
            .get_sample_count()
    };
    let (generation, rebuilt, lists) = (
        replica.published.table().generation,
        rebuilds(),
        policy_lists(&api),
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(replica.published.table().generation, generation);
    assert_eq!(rebuilds(), rebuilt, "rebuilt with nothing changed");
    let in_window = policy_lists(&api) - lists;
    assert!(
        (1..=3).contains(&in_window),
        "{in_window} TrafficPolicy lists in 5 s (waits of at least 3 s by then)"
    );
    let total = policy_lists(&api);
    let bound = most_attempts(started.elapsed(), initial, max);
    assert!(
        total <= bound,
        "{total} lists in {:?}, backoff allows {bound}",
        started.elapsed()
    );

    // The CRDs are created, then a TrafficPolicy: picked up at the next retry, applied and
    // its status written.
    install_crds(&api);
    api.insert(deny_policy());
    replica
        .wait_for(port, "example.com", "/", 403, None, T)
        .await
        .unwrap();
    assert!(
        api.wait_until(T, policy_accepted).await,
        "no status written"
    );
    assert_eq!(available("TrafficPolicy"), 1);
    let both = api.wait_until(T, |_| available("ProxyConfig") == 1).await;
    assert!(both, "ProxyConfig not picked up");
    assert!(replica.published.table().generation > generation);

    // The TrafficPolicy CRD deleted: its watch ends (as the API server ends it) and answers
    // 404 from then on; the kind empties and the route serves again.
    api.remove(
        "customresourcedefinitions",
        "",
        "trafficpolicies.edgeplane.dev",
    )
    .unwrap();
    api.close_watches();
    replica
        .wait_for(port, "example.com", "/", 200, Some("pod-a"), T)
        .await
        .unwrap();
    assert_eq!(available("TrafficPolicy"), 0);
    replica.stop().await;
}

/// The value of a metric line `name{labels} value` in a Prometheus text page.
fn metric(page: &str, series: &str) -> Option<String> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ').map(str::to_owned))
}

/// The binary without the CRDs: ready (an optional kind does not hold readiness back), one
/// WARN line per missing kind naming what to apply, the gauge at 0, then 1 and an INFO line
/// once the CRDs are created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_reports_missing_crds_once_and_picks_them_up() {
    let api = ApiServer::start().await;
    for resource in EDGEPLANE_CRDS {
        api.unregister(resource);
    }
    seed(&api, &["gw"], &[]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let admin = support::net::free_addr();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_edgeplane"))
        .args(["serve", "--kubernetes", "--pod-name", "bin"])
        .args(["--admin-addr", &admin.to_string()])
        .args(["--dashboard-addr", "127.0.0.1:0"])
        .args(["--bind-address", &loopback_ip().to_string()])
        .args(["--gateway-port-base", &port_base().to_string()])
        .args(["--webhook-addr", "127.0.0.1:0", "--drain-timeout", "1s"])
        .args(["--watch-retry-max", "2s"])
        .env("POD_NAMESPACE", SYSTEM_NS)
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "edgeplane=info")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let collected = lines.clone();
    let reader = tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            collected.lock().unwrap().push(line);
        }
    });
    let client = support::client::h1_client();
    let get = |path: &'static str| {
        let client = client.clone();
        async move {
            let r = support::client::send(
                &client,
                support::client::get(admin, &admin.to_string(), path),
            )
            .await
            .ok()?;
            Some((
                r.status.as_u16(),
                String::from_utf8_lossy(&r.body).into_owned(),
            ))
        }
    };
    let deadline = Instant::now() + T;
    while get("/readyz").await.map(|r| r.0) != Some(200) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(get("/readyz").await.map(|r| r.0), Some(200), "not ready");
    let gauge = |kind: &str| format!("edgeplane_watch_kind_available{{kind=\"{kind}\"}}");
    // Settled: the leader's status writes and the rebuilds they cause are over.
    let mut page = get("/metrics").await.unwrap().1;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let next = get("/metrics").await.unwrap().1;
        let same = metric(&next, "edgeplane_table_generation")
            == metric(&page, "edgeplane_table_generation");
        page = next;
        if same {
            break;
        }
    }
    assert_eq!(metric(&page, &gauge("TrafficPolicy")).as_deref(), Some("0"));
    assert_eq!(metric(&page, &gauge("HTTPRoute")).as_deref(), Some("1"));
    let generation = metric(&page, "edgeplane_table_generation");
    // A few retries (waits of 1 s and 2 s): still one warning, no new table.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let page = get("/metrics").await.unwrap().1;
    assert_eq!(metric(&page, "edgeplane_table_generation"), generation);
    assert!(policy_lists(&api) >= 2, "not retried");

    install_crds(&api);
    let deadline = Instant::now() + T;
    let mut page = String::new();
    while Instant::now() < deadline {
        page = get("/metrics").await.map(|r| r.1).unwrap_or_default();
        if metric(&page, &gauge("TrafficPolicy")).as_deref() == Some("1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(metric(&page, &gauge("TrafficPolicy")).as_deref(), Some("1"));
    let pid = child.id().unwrap().to_string();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(term.is_ok_and(|s| s.success()));
    let exit = tokio::time::timeout(T, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit.code(), Some(0));
    let _ = tokio::time::timeout(T, reader).await;
    let lines = lines.lock().unwrap().clone();
    let about = |level: &str, what: &str| {
        lines
            .iter()
            .filter(|l| l.contains(level) && l.contains("TrafficPolicy") && l.contains(what))
            .count()
    };
    assert_eq!(
        about("WARN", "edgeplane crds | kubectl apply --server-side -f -"),
        1,
        "{lines:#?}"
    );
    assert_eq!(about("WARN", ""), 1, "{lines:#?}");
    assert_eq!(about("INFO", "picked up"), 1, "{lines:#?}");
}

/// An empty or blank controller namespace (`POD_NAMESPACE=""`, `--namespace " "`) stops the
/// start with an error naming the flag and the variable, before anything is bound or the API
/// server is asked anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_namespace_is_a_start_up_error() {
    let api = ApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let admin = support::net::free_addr();
    for (flag, env) in [(None, ""), (Some(" "), "edgeplane-system"), (None, "  ")] {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_edgeplane"));
        cmd.args(["serve", "--kubernetes", "--admin-addr", &admin.to_string()])
            .args(["--dashboard-addr", "127.0.0.1:0"])
            .args(["--webhook-addr", "127.0.0.1:0"])
            .env("POD_NAMESPACE", env)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .kill_on_drop(true);
        if let Some(ns) = flag {
            cmd.args(["--namespace", ns]);
        }
        let out = tokio::time::timeout(T, cmd.output())
            .await
            .unwrap()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag:?}/{env:?}: {stderr}");
        assert!(
            stderr.contains("--namespace") && stderr.contains("POD_NAMESPACE"),
            "{stderr}"
        );
        assert!(stderr.contains("empty"), "{stderr}");
    }
    assert!(api.requests().is_empty(), "{:?}", api.requests());
    assert!(
        std::net::TcpStream::connect(admin).is_err(),
        "the admin address was bound"
    );
}
