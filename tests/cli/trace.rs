//! `edgeplane trace` against a running `edgeplane serve`: it waits for the next matching
//! request and prints its way (the rule tried first and why it did not match, the rule that
//! did, the backend and endpoint, the status), as text and as JSON; it exits 1 when no
//! request matched in time.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{config, free_port, get, serve_ready_with, service, text, write, Running, BIN};

/// A route for `/web` requests with `x-role: admin`: it outranks the plain `/web` route.
const ADMIN: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: admin
spec:
  parentRefs:
  - name: gw
  rules:
  - name: admins
    matches:
    - path:
        type: PathPrefix
        value: /web
      headers:
      - name: x-role
        value: admin
    backendRefs:
    - name: echo
      port: 8080
"#;

/// A route for `/x` to Service `down`.
const DOWN: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: down
spec:
  parentRefs:
  - name: gw
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /x
    backendRefs:
    - name: down
      port: 8080
"#;

/// [`DOWN`] and its Service, whose one endpoint refuses connections (nothing listens on
/// `port`): the request is tried again and fails with 502.
fn down(port: u16) -> String {
    format!("{DOWN}{}", service("down", port))
}

/// Starts `edgeplane trace` with `args` and waits (bounded) until it is subscribed.
fn start_trace(dashboard: SocketAddr, args: &[&str]) -> Child {
    let mut child = Command::new(BIN)
        .args(["trace", "--dashboard-addr", &dashboard.to_string()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run edgeplane trace");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let first = lines.next().expect("a line").expect("stderr readable");
    assert!(first.starts_with("waiting for"), "{first}");
    // Keep draining stderr so the child never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    child
}

/// Waits (bounded) for `child` to exit; its exit success and stdout.
fn finish(mut child: Child) -> (bool, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "edgeplane trace did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    (status.success(), out)
}

#[test]
fn trace_prints_the_way_of_the_next_matching_request() {
    let (port, backend, dead) = (free_port(), free_port(), free_port());
    let _echo = Running::spawn(&["echo", "--listen", &format!("127.0.0.1:{backend}")]);
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "config.yaml",
        &(config(port, backend, "/web") + ADMIN + &down(dead)),
    );
    let admin: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let dashboard: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let _serve = serve_ready_with(dir.path(), admin, dashboard, "1s");
    let proxy: SocketAddr = ([127, 0, 0, 1], port).into();

    let trace = start_trace(dashboard, &["--path", "/web"]);
    // Not wanted by the filter, then wanted.
    assert_eq!(get(proxy, "/other", &[]).map(|r| r.0), Some(404));
    assert_eq!(get(proxy, "/web/page", &[]).map(|r| r.0), Some(200));
    let (ok, out) = finish(trace);
    assert!(ok, "{out}");
    assert!(
        out.starts_with("GET 127.0.0.1/web/page HTTP/1.1 from 127.0.0.1 -> 200"),
        "{out}"
    );
    assert!(
        out.contains("tried      HTTPRoute/default/admin rule admins (match 0) on host *: header x-role does not match"),
        "{out}"
    );
    assert!(
        out.contains("matched    HTTPRoute/default/web rule 0 (match 0) on host *"),
        "{out}"
    );
    assert!(
        out.contains(&format!("listener   127.0.0.1:{port} (default/gw/http)")),
        "{out}"
    );
    assert!(
        out.contains("backend    default/echo:8080 weight 1: 1 ready"),
        "{out}"
    );
    assert!(
        out.contains(&format!("endpoint   127.0.0.1:{backend}")),
        "{out}"
    );
    assert!(out.contains("timings    routing "), "{out}");
    assert!(
        out.contains(&format!(
            "attempt 1  127.0.0.1:{backend} (least requests of two random endpoints): answered 200"
        )),
        "{out}"
    );
    assert!(
        out.contains("; picked the only backendRef (1 of 1)"),
        "{out}"
    );

    // Every attempt at an endpoint that refuses connections: each is shown with what followed.
    let trace = start_trace(dashboard, &["--path", "/x"]);
    assert_eq!(get(proxy, "/x", &[]).map(|r| r.0), Some(502));
    let (ok, out) = finish(trace);
    assert!(ok, "{out}");
    let refused = format!(
        "attempt 1  127.0.0.1:{dead} (least requests of two random endpoints): connect to 127.0.0.1:{dead}"
    );
    assert!(out.contains(&refused), "{out}");
    assert!(out.contains("; retried (unsent) after"), "{out}");
    assert!(
        out.contains("attempt 3  ") && out.contains("; not retried: retry attempts used up"),
        "{out}"
    );
    assert!(!out.contains("attempt 4"), "{out}");

    // JSON, filtered by header: the admin route matches at once.
    let trace = start_trace(dashboard, &["--header", "x-role=admin", "--json"]);
    assert_eq!(get(proxy, "/web", &[]).map(|r| r.0), Some(200));
    assert_eq!(
        get(proxy, "/web", &[("x-role", "admin")]).map(|r| r.0),
        Some(200)
    );
    let (ok, out) = finish(trace);
    assert!(ok, "{out}");
    let record: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON line");
    assert_eq!(record["route"], "HTTPRoute/default/admin");
    assert_eq!(record["rule"], "admins");
    assert_eq!(record["status"], 200);
    assert_eq!(record["considered"].as_array().map(Vec::len), Some(1));
    assert_eq!(record["requestId"].as_str().map(str::len), Some(32));

    // Nothing matches within the timeout: exit 1.
    let trace = start_trace(dashboard, &["--host", "nothing.example", "--timeout", "1s"]);
    let (ok, out) = finish(trace);
    assert!(!ok && out.is_empty(), "{out}");
    let refused = Command::new(BIN)
        .args([
            "trace",
            "--dashboard-addr",
            &dashboard.to_string(),
            "--header",
            "novalue",
        ])
        .output()
        .expect("run");
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("NAME=VALUE"),
        "{}",
        text(&refused.stderr)
    );
}
