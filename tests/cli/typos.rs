//! A misspelt field in a Gateway API object, without `--crds`: `check` refuses it as the API
//! server's strict field validation would (exit 2, file, line and field path), and `serve`
//! logs it, keeps the object's last admitted version and serves every other change.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{check, config, free_port, get, text, wait_get, write, Running, BIN};

/// A second route, in its own file, to Service `echo` under `path`.
fn other_route(path: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: other
spec:
  parentRefs:
  - name: gw
  rules:
  - matches:
    - path:
        value: {path}
    backendRefs:
    - name: echo
      port: 8080
"
    )
}

#[test]
fn check_refuses_misspelt_fields_with_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(free_port(), free_port(), "/").replace("    backendRefs:", "    backendRef:");
    write(dir.path(), "all.yaml", &cfg);
    write(
        dir.path(),
        "sub/lost.yaml",
        &other_route("/lost").replace("  parentRefs:", "  parentRef:"),
    );
    let out = check(dir.path());
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    let line_of = |text: &str, needle: &str| {
        text.lines()
            .position(|l| l.trim_start().starts_with(needle))
            .unwrap()
            + 1
    };
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 2, "{stderr}");
    let web = format!(
        "all.yaml:{}: HTTPRoute.gateway.networking.k8s.io \"web\" is invalid: \
         spec.rules[0].backendRef: field not declared in schema",
        line_of(&cfg, "backendRef:")
    );
    assert!(
        errors.iter().any(|l| l.contains(&web)),
        "no {web:?} in\n{stderr}"
    );
    let lost = format!(
        "{}:6: HTTPRoute.gateway.networking.k8s.io \"other\" is invalid: \
         spec.parentRef: field not declared in schema",
        std::path::Path::new("sub").join("lost.yaml").display()
    );
    assert!(
        errors.iter().any(|l| l.contains(&lost)),
        "no {lost:?} in\n{stderr}"
    );
    // Neither route is admitted, so neither reports a status of its own.
    let entries: serde_yaml_ng::Value = serde_yaml_ng::from_str(&stdout).expect("YAML status");
    let kinds: Vec<&str> = entries
        .as_sequence()
        .expect("a list of entries")
        .iter()
        .filter_map(|e| e.get("kind").and_then(|k| k.as_str()))
        .collect();
    assert_eq!(kinds, ["GatewayClass", "Gateway"], "{stdout}");
}

/// `serve` with stderr collected, once `/readyz` answers.
struct Logged {
    serve: Running,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Logged {
    fn start(dir: &std::path::Path, admin: SocketAddr) -> Self {
        let mut child = Command::new(BIN)
            .args(["serve", "--config-dir"])
            .arg(dir)
            .args(["--admin-addr", &admin.to_string(), "--drain-timeout", "1s"])
            .args(["--dashboard-addr", "127.0.0.1:0"])
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn edgeplane serve");
        let stderr = child.stderr.take().expect("stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let serve = Running(child);
        wait_get(admin, "/readyz", |c, _| c == 200);
        Logged { serve, lines }
    }

    /// Waits (bounded) for a logged line containing every needle.
    fn wait_line(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            let found = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| needles.iter().all(|n| l.contains(n)))
                .cloned();
            if let Some(line) = found {
                return line;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "no log line with {needles:?} in\n{}",
            self.lines.lock().unwrap().join("\n")
        );
    }
}

#[test]
fn serve_keeps_the_admitted_version_of_a_misspelt_route_and_serves_the_rest() {
    let (port, backend, admin) = (free_port(), free_port(), free_port());
    let mut echo = Running::spawn(&["echo", "--listen", &format!("127.0.0.1:{backend}")]);
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "config.yaml", &config(port, backend, "/one"));
    write(dir.path(), "other.yaml", &other_route("/a"));
    let admin_addr: SocketAddr = ([127, 0, 0, 1], admin).into();
    let mut logged = Logged::start(dir.path(), admin_addr);
    let proxy: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_get(proxy, "/one/x", |c, _| c == 200);
    wait_get(proxy, "/a", |c, _| c == 200);

    // One edit misspells `backendRefs` while moving the route to /two; the other file moves
    // its route to /b. The misspelt object is refused; the other change goes live.
    let typo = config(port, backend, "/two").replace("    backendRefs:", "    backendRef:");
    write(dir.path(), "config.yaml", &typo);
    write(dir.path(), "other.yaml", &other_route("/b"));
    wait_get(proxy, "/b", |c, _| c == 200);
    let line = typo
        .lines()
        .position(|l| l.trim_start().starts_with("backendRef:"))
        .unwrap()
        + 1;
    logged.wait_line(&[
        &format!("config.yaml:{line}: HTTPRoute.gateway.networking.k8s.io \"web\" is invalid: "),
        "spec.rules[0].backendRef: field not declared in schema",
        "the previously admitted version stays in force",
    ]);
    // The last admitted version of the route still serves; the refused one never did.
    assert_eq!(get(proxy, "/one/x", &[]).map(|r| r.0), Some(200));
    assert_eq!(get(proxy, "/two", &[]).map(|r| r.0), Some(404));
    assert_eq!(get(proxy, "/a", &[]).map(|r| r.0), Some(404));
    let (_, metrics) = wait_get(admin_addr, "/metrics", |c, _| c == 200);
    assert!(
        metrics.contains("edgeplane_config_errors_total{source=\"file\"}"),
        "{metrics}"
    );

    // Fixing the typo admits the new version.
    write(dir.path(), "config.yaml", &config(port, backend, "/two"));
    wait_get(proxy, "/two", |c, _| c == 200);
    assert_eq!(get(proxy, "/one/x", &[]).map(|r| r.0), Some(404));
    assert_eq!(logged.serve.terminate(), Some(0));
    assert_eq!(echo.terminate(), Some(0));
}
