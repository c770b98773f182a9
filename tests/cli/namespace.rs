//! Through the binary: `echo` reports POD_NAMESPACE (as `serve` reads it), NAMESPACE only as a
//! fallback; `serve` without a source names both ways to give it one.

use super::*;

/// The namespace an `echo` started with `env` reports.
fn echo_namespace(env: &[(&str, &str)]) -> String {
    let port = free_port();
    let mut cmd = Command::new(BIN);
    cmd.args(["echo", "--listen", &format!("127.0.0.1:{port}")])
        .env_remove("POD_NAMESPACE")
        .env_remove("NAMESPACE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut echo = Running(cmd.spawn().expect("spawn edgeplane echo"));
    let (_, body) = wait_get(([127, 0, 0, 1], port).into(), "/", |c, _| c == 200);
    assert_eq!(echo.terminate(), Some(0));
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    json["namespace"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn echo_reads_pod_namespace_then_namespace() {
    assert_eq!(echo_namespace(&[]), "default");
    assert_eq!(echo_namespace(&[("NAMESPACE", "old")]), "old");
    assert_eq!(
        echo_namespace(&[("POD_NAMESPACE", "pod"), ("NAMESPACE", "old")]),
        "pod"
    );
}

#[test]
fn serve_without_a_source_says_which_flags_give_one() {
    let out = Command::new(BIN).arg("serve").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--config-dir DIR") && stderr.contains("--kubernetes"),
        "{stderr}"
    );
}
