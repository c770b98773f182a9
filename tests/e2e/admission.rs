//! Objects are admitted as a cluster would admit them: with `--crds`, a route file rewritten to a
//! version the CRD rejects (or to text that does not parse) leaves the previous version serving,
//! while every other file's changes go live, and the error names the file, line and rule.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{admin_get, echo_fleet, get, pod, route, serve_with, service, test_net, write, BASE};

/// Polls until `path` answers 200 from pod `want`.
async fn wait_pod(proxy: std::net::SocketAddr, path: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok((200, body)) = get(proxy, path).await {
            if pod(&body) == want {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{path} never answered by {want}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls the log file until it contains every one of `parts` on one line; returns that line.
async fn wait_log(log: &Path, parts: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| parts.iter().all(|p| l.contains(p))) {
            return line.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no log line with {parts:?} in:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_rejected_update_keeps_the_admitted_version_serving() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let v2 = echo_fleet(net, 20, &["v2-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config");
    std::fs::create_dir(&config).expect("config dir");
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/crds");
    let log = dir.path().join("edgeplane.log");
    write(
        &config,
        "base.yaml",
        &format!("{BASE}{}{}", service("v1", &v1), service("v2", &v2)),
    );
    write(&config, "route.yaml", &route("r", "/app", "v1"));
    write(&config, "other.yaml", &route("o", "/other", "v1"));
    let stderr = std::fs::File::create(&log).expect("log file");
    let server = serve_with(&config, net, &["--crds", crds], Stdio::from(stderr)).await;
    wait_pod(server.proxy, "/app", "v1-a").await;

    // The route's new version breaks a CEL rule of the CRD: rejected, the old one keeps
    // serving, and the other file's change goes live.
    write(&config, "route.yaml", &route("r", "app", "v2"));
    write(&config, "other.yaml", &route("o", "/other", "v2"));
    wait_pod(server.proxy, "/other", "v2-a").await;
    wait_pod(server.proxy, "/app", "v1-a").await;
    let line = wait_log(&log, &["route.yaml:8", "spec.rules[0].matches[0].path"]).await;
    assert!(
        line.contains("value must be an absolute path and start with '/'"),
        "{line}"
    );
    assert!(
        line.contains("the previously admitted version stays in force"),
        "{line}"
    );
    let (_, metrics) = admin_get(server.admin, "/metrics").await.expect("metrics");
    let counted = metrics
        .lines()
        .find(|l| l.starts_with("edgeplane_config_errors_total{source=\"file\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(counted >= 1.0, "{metrics}");

    // A version that does not parse at all: the file's objects keep their versions too.
    write(&config, "route.yaml", "kind: [\n");
    write(&config, "other.yaml", &route("o", "/other", "v1"));
    wait_pod(server.proxy, "/other", "v1-a").await;
    wait_pod(server.proxy, "/app", "v1-a").await;
    wait_log(
        &log,
        &[
            "route.yaml:2:1",
            "previously admitted objects stay in force",
        ],
    )
    .await;

    // A valid version is admitted.
    write(&config, "route.yaml", &route("r", "/app", "v2"));
    wait_pod(server.proxy, "/app", "v2-a").await;
}
