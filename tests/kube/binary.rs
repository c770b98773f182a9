//! The `edgeplane` binary in Kubernetes mode, with a kubeconfig pointing at the emulator.

use std::time::Duration;

use crate::harness::*;
use crate::support;
use crate::support::apiserver::ApiServer;
use crate::support::echo::start_fleet;
use crate::T;

/// The binary itself: `serve --kubernetes` with a kubeconfig for the emulator. Not ready while
/// the API server is unavailable; ready, routing and writing status once it is back; releases
/// the lease on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_kubernetes_binary() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &["gw"], &[("svc", echoes[0].addr)]);
    api.insert(route("web", "r", "gw", "example.com", "/", "svc"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    api.set_unavailable(true);
    let admin = support::net::free_addr();
    let bind = support::net::loopback_ip();
    let base = port_base().to_string();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_edgeplane"))
        .args([
            "serve",
            "--kubernetes",
            "--namespace",
            SYSTEM_NS,
            "--pod-name",
            "bin",
        ])
        .args([
            "--admin-addr",
            &admin.to_string(),
            "--dashboard-addr",
            "127.0.0.1:0",
            "--bind-address",
            &bind.to_string(),
        ])
        .args(["--gateway-port-base", &base, "--drain-timeout", "1s"])
        .args(["--webhook-addr", "127.0.0.1:0"])
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "edgeplane=warn")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client = support::client::h1_client();
    let status = |path: &'static str| {
        let client = client.clone();
        async move {
            support::client::send(
                &client,
                support::client::get(admin, &admin.to_string(), path),
            )
            .await
            .map(|r| r.status.as_u16())
            .ok()
        }
    };
    let deadline = std::time::Instant::now() + T;
    while status("/healthz").await != Some(200) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status("/healthz").await, Some(200));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        status("/readyz").await,
        Some(503),
        "ready before the first sync"
    );
    api.set_unavailable(false);
    let deadline = std::time::Instant::now() + T;
    while status("/readyz").await != Some(200) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status("/readyz").await, Some(200));
    let port = wait_gateway_port(&api, "web", "gw", 80).await;
    let deadline = std::time::Instant::now() + T;
    let addr = std::net::SocketAddr::new(bind, port);
    let mut last = None;
    while std::time::Instant::now() < deadline {
        let r =
            support::client::send(&client, support::client::get(addr, "example.com", "/")).await;
        last = r.as_ref().ok().map(|r| r.status.as_u16());
        if last == Some(200) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(last, Some(200));
    let written = api
        .wait_until(T, |a| {
            let r = a.object("httproutes", "web", "r").unwrap_or_default();
            r["status"]["parents"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
        })
        .await;
    assert!(written, "route status not written by the binary");
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(killed.is_ok_and(|s| s.success()));
    let exit = tokio::time::timeout(T, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit.code(), Some(0));
    let lease = api.object("leases", SYSTEM_NS, "edgeplane-leader").unwrap();
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or("")
            .is_empty(),
        "lease kept: {lease}"
    );
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 1, "{lease}");
}

/// A `serve --kubernetes` process named `pod` with short leader-election timing.
fn spawn_replica(
    kubeconfig: &std::path::Path,
    pod: &str,
    timing: [&str; 3],
) -> tokio::process::Child {
    let admin = support::net::free_addr();
    let bind = support::net::loopback_ip();
    let base = port_base().to_string();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_edgeplane"))
        .args(["serve", "--kubernetes", "--namespace", SYSTEM_NS])
        .args(["--pod-name", pod])
        .args(["--admin-addr", &admin.to_string()])
        .args(["--dashboard-addr", "127.0.0.1:0"])
        .args(["--bind-address", &bind.to_string()])
        .args(["--gateway-port-base", &base, "--drain-timeout", "1s"])
        .args(["--webhook-addr", "127.0.0.1:0"])
        .args(["--leader-lease-duration", timing[0]])
        .args(["--leader-renew-deadline", timing[1]])
        .args(["--leader-retry-period", timing[2]])
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "edgeplane=warn")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The Lease's holder as the emulator has it.
fn lease_holder(api: &ApiServer) -> Option<String> {
    api.object("leases", SYSTEM_NS, "edgeplane-leader")
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_owned))
        .filter(|h| !h.is_empty())
}

/// Waits (bounded by `limit`) until the Lease names `who`; returns how long that took.
async fn held_by(api: &ApiServer, who: &str, limit: Duration) -> Option<Duration> {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if lease_holder(api).as_deref() == Some(who) {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// Three processes of the binary: SIGKILL of the leader is taken over within lease duration
/// plus retry period (measured from the kill, so it includes the last renewal's age), and a
/// SIGTERM of the next leader hands the Lease over in under 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_terminated_leaders_are_replaced_in_time() {
    let api = ApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let (lease, retry) = (Duration::from_secs(3), Duration::from_millis(500));
    let timing = ["3s", "2s", "500ms"];
    let mut first = spawn_replica(&kubeconfig, "bin-1", timing);
    assert!(held_by(&api, "bin-1", T).await.is_some(), "bin-1 never led");
    let mut second = spawn_replica(&kubeconfig, "bin-2", timing);
    let mut third = spawn_replica(&kubeconfig, "bin-3", ["15s", "10s", "2s"]);
    // Let the others watch a few renewals.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(lease_holder(&api).as_deref(), Some("bin-1"));
    first.kill().await.unwrap();
    let killed = std::time::Instant::now();
    let took = loop {
        match lease_holder(&api) {
            Some(h) if h != "bin-1" => break Some((h, killed.elapsed())),
            _ if killed.elapsed() > lease * 4 => break None,
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    };
    let (next, took) = took.expect("nobody took over the killed leader's Lease");
    eprintln!("takeover {took:?} after SIGKILL of the leader, by {next}");
    // bin-2 tries every 500 ms, so it takes over within a lease duration and a retry period
    // of the kill (bin-3, trying every 2 s, may win the race only earlier than that).
    assert!(
        took <= lease + retry + Duration::from_millis(1500),
        "{took:?}"
    );
    // Graceful stop of the new leader: the other takes the released Lease at its next try
    // (a retry period of at most 2 s).
    let (leader, other) = if next == "bin-2" {
        (&mut second, "bin-3")
    } else {
        (&mut third, "bin-2")
    };
    let pid = leader.id().unwrap().to_string();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(term.is_ok_and(|s| s.success()));
    let stopped = std::time::Instant::now();
    let handed = held_by(&api, other, Duration::from_secs(10)).await;
    let handed = handed.map(|_| stopped.elapsed());
    eprintln!("handover {handed:?} after SIGTERM of the leader, to {other}");
    assert!(
        handed.is_some_and(|t| t < Duration::from_secs(3)),
        "{handed:?}"
    );
    let _ = tokio::time::timeout(T, leader.wait()).await;
    second.kill().await.unwrap();
    third.kill().await.unwrap();
}
