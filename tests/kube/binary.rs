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
            "--bind-address",
            &bind.to_string(),
        ])
        .args(["--gateway-port-base", &base, "--drain-timeout", "1s"])
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
