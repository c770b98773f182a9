//! `edgeplane status` and `edgeplane routes` against a running `edgeplane serve` whose
//! configuration holds a route with a missing backend, and their error when nothing listens.

use std::net::SocketAddr;
use std::process::Command;

use super::{config, free_port, get, serve_ready_with, text, wait_get, write, Running, BIN};

/// A second route whose backend Service does not exist.
const BROKEN: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: broken
spec:
  parentRefs:
  - name: gw
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /broken
    backendRefs:
    - name: missing
      port: 8080
"#;

fn view(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run edgeplane")
}

#[test]
fn status_and_routes_read_a_running_edgeplane() {
    let (port, backend) = (free_port(), free_port());
    let _echo = Running::spawn(&["echo", "--listen", &format!("127.0.0.1:{backend}")]);
    let dir = tempfile::tempdir().unwrap();
    let manifests = config(port, backend, "/web") + BROKEN;
    write(dir.path(), "config.yaml", &manifests);
    let admin: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let dashboard: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let _serve = serve_ready_with(dir.path(), admin, dashboard, "1s");
    let addr = dashboard.to_string();

    let out = view(&["status", "--dashboard-addr", &addr]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "KIND",
            "NAMESPACE/NAME",
            "ACCEPTED",
            "PROGRAMMED",
            "RESOLVEDREFS",
            "REASON",
            "AGE"
        ]
    );
    let row = |name: &str| -> Vec<String> {
        let line = lines
            .iter()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no row for {name} in\n{table}"));
        line.split_whitespace().map(str::to_owned).collect()
    };
    assert_eq!(
        row("default/web")[..6],
        ["HTTPRoute", "default/web", "True", "-", "True", "Accepted"]
    );
    assert_eq!(
        row("default/broken")[..6],
        [
            "HTTPRoute",
            "default/broken",
            "True",
            "-",
            "False",
            "BackendNotFound"
        ]
    );
    assert_eq!(
        row("default/gw")[..4],
        ["Gateway", "default/gw", "True", "True"]
    );
    assert_eq!(row("edgeplane")[0], "GatewayClass");

    let out = view(&["status", "--dashboard-addr", &addr, "-o", "wide"]);
    let wide = text(&out.stdout);
    assert!(wide.lines().next().unwrap().ends_with("MESSAGE"), "{wide}");
    let broken = wide.lines().find(|l| l.contains("default/broken")).unwrap();
    assert!(
        broken.contains("missing"),
        "the message names the Service: {broken}"
    );

    // -o json prints the entries of /debug/status.
    let out = view(&["status", "--dashboard-addr", &addr, "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let (_, _, served) = get(dashboard, "/debug/status", &[]).expect("debug status");
    let served: serde_json::Value = serde_json::from_str(&served).unwrap();
    assert_eq!(printed, served);
    assert_eq!(printed.as_array().map(Vec::len), Some(4), "{printed}");

    let out = view(&["status", "--dashboard-addr", &addr, "-o", "yaml"]);
    let yaml = text(&out.stdout);
    assert!(
        out.status.success() && yaml.contains("kind: HTTPRoute"),
        "{yaml}"
    );
    assert!(yaml.contains("reason: BackendNotFound"), "{yaml}");

    // Traffic first, so the tree's endpoint is known to answer.
    wait_get(([127, 0, 0, 1], port).into(), "/web", |c, _| c == 200);
    let out = view(&["routes", "--dashboard-addr", &addr]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tree = text(&out.stdout);
    for line in [
        "Gateway default/gw".to_owned(),
        format!("  listener http (HTTP on 127.0.0.1:{port})"),
        "      HTTPRoute/default/web rule 0".to_owned(),
        "        match Prefix /web".to_owned(),
        "        -> default/echo:8080 weight 1".to_owned(),
        format!("             127.0.0.1:{backend} ready"),
        "      HTTPRoute/default/broken rule 0".to_owned(),
        "        -> invalid backend weight 1: ".to_owned(),
    ] {
        assert!(
            tree.lines().any(|l| l.starts_with(&line)),
            "no line {line:?} in\n{tree}"
        );
    }
}

#[test]
fn views_fail_clearly_when_nothing_listens() {
    let addr = format!("127.0.0.1:{}", free_port());
    for cmd in ["status", "routes"] {
        let out = view(&[cmd, "--dashboard-addr", &addr]);
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("cannot reach edgeplane's dashboard at {addr}")),
            "{cmd}: {err}"
        );
        assert!(out.stdout.is_empty(), "{cmd} printed nothing");
    }
}
