//! Basic auth through the real binary: `--basic-auth-workers` and `--basic-auth-queue` shape
//! the hashing pool (shown in `/metrics`, 0 workers refused), an unknown user runs the hash
//! verification a wrong password runs, and a second `Authorization` header gets 400.

use std::net::SocketAddr;
use std::process::Command;

use base64::Engine;

use super::{config, free_port, get, text, wait_get, write, Running, BIN};

/// A TrafficPolicy putting basic auth (user `alice`, bcrypt) on the route `web`.
fn members(hash: &str) -> String {
    format!(
        r#"---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {{name: members}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}}]
  basicAuth: {{secretRef: {{name: members}}, realm: team}}
---
apiVersion: v1
kind: Secret
metadata: {{name: members}}
stringData:
  .htpasswd: "alice:{hash}\n"
"#
    )
}

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

/// The value of an unlabelled or fully labelled series in a `/metrics` text.
fn series(metrics: &str, name: &str) -> Option<u64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn the_hashing_pool_flags_shape_the_pool_and_unknown_users_cost_a_verification() {
    let (port, backend, admin) = (free_port(), free_port(), free_port());
    let mut echo = Running::spawn(&["echo", "--listen", &format!("127.0.0.1:{backend}")]);
    let dir = tempfile::tempdir().unwrap();
    let hash = bcrypt::hash("wonderland", 4).unwrap();
    let all = format!("{}{}", config(port, backend, "/"), members(&hash));
    write(dir.path(), "all.yaml", &all);
    let admin_addr: SocketAddr = ([127, 0, 0, 1], admin).into();
    let mut serve = Running::spawn(&[
        "serve",
        "--config-dir",
        dir.path().to_str().unwrap(),
        "--admin-addr",
        &admin_addr.to_string(),
        "--dashboard-addr",
        "127.0.0.1:0",
        "--basic-auth-workers",
        "3",
        "--basic-auth-queue",
        "5",
    ]);
    let proxy: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_get(proxy, "/", |c, _| c == 401);
    let (_, metrics) = wait_get(admin_addr, "/metrics", |c, _| c == 200);
    assert_eq!(series(&metrics, "edgeplane_basic_auth_workers"), Some(3));
    assert_eq!(
        series(&metrics, "edgeplane_basic_auth_queue_limit"),
        Some(5)
    );

    let verified = || {
        let (_, metrics) = wait_get(admin_addr, "/metrics", |c, _| c == 200);
        series(
            &metrics,
            "edgeplane_basic_auth_verifications_total{hash=\"bcrypt\"}",
        )
        .unwrap_or(0)
    };
    let status = |headers: &[(&str, &str)]| get(proxy, "/", headers).map(|r| r.0);
    let wrong = basic("alice", "wrong");
    assert_eq!(status(&[("authorization", &wrong)]), Some(401));
    assert_eq!(verified(), 1);
    let unknown = basic("mallory", "wrong");
    assert_eq!(status(&[("authorization", &unknown)]), Some(401));
    assert_eq!(verified(), 2, "an unknown user verifies a hash too");
    let alice = basic("alice", "wonderland");
    assert_eq!(status(&[("authorization", &alice)]), Some(200));
    let twice = [
        ("authorization", alice.as_str()),
        ("authorization", "Basic Zm9v"),
    ];
    assert_eq!(status(&twice), Some(400));
    assert_eq!(serve.terminate(), Some(0));
    assert_eq!(echo.terminate(), Some(0));
}

#[test]
fn a_pool_without_workers_is_refused_at_start() {
    let out = Command::new(BIN)
        .args(["serve", "--basic-auth-workers", "0"])
        .output()
        .expect("run edgeplane serve");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("--basic-auth-workers"), "{err}");
}
