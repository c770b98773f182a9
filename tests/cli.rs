//! The built binary: `check` exit codes and output, `serve` start-up failures, reload and drain,
//! and the demo's printed commands. Children are killed when a test fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "support/port.rs"]
mod port;
#[path = "support/upstream.rs"]
mod upstream;

use port::free_port;

#[path = "cli/auth.rs"]
mod auth;
#[path = "cli/configuration_doc.rs"]
mod configuration_doc;
#[path = "cli/convert.rs"]
mod convert;
#[path = "cli/docs.rs"]
mod docs;
#[path = "cli/interface.rs"]
mod interface;
/// The build script's linker-script maker (its tests are in the file).
#[path = "../build/link_order.rs"]
mod link_order;
#[path = "cli/namespace.rs"]
mod namespace;
#[path = "cli/nothing_checked.rs"]
mod nothing_checked;
#[path = "cli/problem_log.rs"]
mod problem_log;
#[path = "cli/rejections.rs"]
mod rejections;
#[path = "cli/rollout.rs"]
mod rollout;
#[path = "cli/trace.rs"]
mod trace;
#[path = "cli/typos.rs"]
mod typos;
#[path = "cli/views.rs"]
mod views;
#[path = "cli/yaml_readers.rs"]
mod yaml_readers;

const BIN: &str = env!("CARGO_BIN_EXE_edgeplane");
const CONTROLLER: &str = "edgeplane.dev/gateway-controller";

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

fn check(dir: &Path) -> Output {
    Command::new(BIN)
        .args(["check", "--config-dir"])
        .arg(dir)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run edgeplane check")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A gateway with one HTTP listener on `port` and a route to Service `echo` (port 8080) whose
/// endpoint is `backend`; `path` is the route's prefix.
fn config(port: u16, backend: u16, path: &str) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: edgeplane
spec:
  controllerName: {CONTROLLER}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gw
spec:
  gatewayClassName: edgeplane
  listeners:
  - name: http
    protocol: HTTP
    port: {port}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
spec:
  parentRefs:
  - name: gw
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: {path}
    backendRefs:
    - name: echo
      port: 8080
"#
    ) + &service("echo", backend)
}

/// A Service `name` (port 8080) with one ready endpoint, 127.0.0.1 on `port`.
fn service(name: &str, port: u16) -> String {
    format!(
        r#"---
apiVersion: v1
kind: Service
metadata:
  name: {name}
spec:
  ports:
  - name: http
    port: 8080
    targetPort: {port}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {name}-1
  labels:
    kubernetes.io/service-name: {name}
addressType: IPv4
endpoints:
- addresses: ["127.0.0.1"]
  conditions:
    ready: true
ports:
- name: http
  port: {port}
"#
    )
}

#[test]
fn check_parse_error_exits_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "ok.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n",
    );
    write(
        dir.path(),
        "sub/bad.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: [oops\n",
    );
    let out = check(dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("bad.yaml:5"), "no file:line in {err}");
    // The status of what was admitted is still printed.
    assert!(
        text(&out.stdout).is_empty() || text(&out.stdout).starts_with("[]"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn check_missing_directory_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = check(&dir.path().join("absent"));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("absent"));
}

#[test]
fn check_valid_config_exits_0_with_yaml_status() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "all.yaml",
        &config(free_port(), free_port(), "/"),
    );
    let out = check(dir.path());
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stderr.contains("problem:"), "{stderr}");
    let entries: serde_yaml_ng::Value = serde_yaml_ng::from_str(&stdout).expect("YAML status");
    let kinds: Vec<&str> = entries
        .as_sequence()
        .expect("a list of entries")
        .iter()
        .filter_map(|e| e.get("kind").and_then(|k| k.as_str()))
        .collect();
    assert_eq!(kinds, ["GatewayClass", "Gateway", "HTTPRoute"], "{stdout}");
    let route = &entries[2];
    assert_eq!(route["name"].as_str(), Some("web"));
    assert_eq!(route["namespace"].as_str(), Some("default"));
    assert!(
        route["status"]["parents"][0]["conditions"].is_sequence(),
        "{stdout}"
    );
}

#[test]
fn check_problems_exit_1_and_go_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(free_port(), free_port(), "/")
        .replace("- name: echo\n      port", "- name: missing\n      port");
    write(dir.path(), "all.yaml", &cfg);
    let out = check(dir.path());
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("problem: HTTPRoute default/web"),
        "{stderr}"
    );
    assert!(stderr.contains("ResolvedRefs=False"), "{stderr}");
    assert!(
        stdout.contains("kind: HTTPRoute"),
        "status still printed: {stdout}"
    );
}

fn conformance_dir() -> Option<PathBuf> {
    upstream::upstream(
        "conformance/base/manifests.yaml",
        "check over the upstream manifests",
    )?;
    Some(upstream::release_dir().join("conformance"))
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
}

/// One temporary config dir per upstream test file: the base manifests, our GatewayClass and the
/// file, with the suite's placeholders filled in.
fn conformance_cases(root: &Path) -> Vec<(String, tempfile::TempDir)> {
    let fill = |s: String| {
        s.replace("{GATEWAY_CLASS_NAME}", "edgeplane")
            .replace("{GATEWAY_CONTROLLER_NAME}", CONTROLLER)
            // The upstream suite fills these with addresses before applying the file.
            .replace("PLACEHOLDER_UNUSABLE_ADDRS", "192.0.2.10")
            .replace("PLACEHOLDER_USABLE_ADDRS", "127.0.0.1")
    };
    let base = fill(std::fs::read_to_string(root.join("base/manifests.yaml")).unwrap());
    let class = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: edgeplane\nspec:\n  controllerName: {CONTROLLER}\n"
    );
    let mut files = Vec::new();
    yaml_files(&root.join("tests"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let name = f.strip_prefix(root).unwrap().display().to_string();
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), "base.yaml", &base);
            write(dir.path(), "class.yaml", &class);
            write(
                dir.path(),
                "test.yaml",
                &fill(std::fs::read_to_string(&f).unwrap()),
            );
            (name, dir)
        })
        .collect()
}

/// Upstream files whose content is invalid on purpose, so an error is expected. None of
/// v1.6.1's files is: every object is admitted by the upstream CRDs, others are skipped.
const EXPECTED_PARSE_ERRORS: &[&str] = &[];

/// The upstream experimental-channel CRDs (a superset of the standard channel).
fn upstream_crds(root: &Path) -> std::sync::Arc<edgeplane::admission::Crds> {
    let dir = root.join("../config/crd/experimental");
    let (crds, names) = edgeplane::provider::crds::load_crds(&[dir]).expect("upstream CRDs load");
    assert!(names.len() >= 10, "only {names:?}");
    std::sync::Arc::new(crds)
}

#[test]
fn conformance_manifests_all_load() {
    let Some(root) = conformance_dir() else {
        return;
    };
    let cases = conformance_cases(&root);
    assert!(cases.len() > 100, "found only {} files", cases.len());
    let crds = upstream_crds(&root);
    let mut failed = Vec::new();
    for (name, dir) in &cases {
        let errors = match edgeplane::provider::file::load_dir(dir.path(), crds.clone()) {
            Ok(loaded) => loaded.errors.iter().map(ToString::to_string).collect(),
            Err(e) => vec![e.to_string()],
        };
        if !errors.is_empty() && !EXPECTED_PARSE_ERRORS.contains(&name.as_str()) {
            failed.push(format!("{name}: {}", errors.join("; ")));
        }
    }
    println!("{} conformance files loaded", cases.len());
    assert!(
        failed.is_empty(),
        "unexpected parse errors:\n{}",
        failed.join("\n")
    );
}

#[test]
fn check_over_conformance_manifests_never_panics() {
    let Some(root) = conformance_dir() else {
        return;
    };
    let mut counts = [0usize; 3];
    let mut bad = Vec::new();
    for (name, dir) in conformance_cases(&root) {
        let out = check(dir.path());
        match out.status.code() {
            Some(c @ 0..=1) => counts[c as usize] += 1,
            Some(2) if EXPECTED_PARSE_ERRORS.contains(&name.as_str()) => counts[2] += 1,
            code => bad.push(format!("{name}: exit {code:?}: {}", text(&out.stderr))),
        }
    }
    println!(
        "check over conformance files: {} clean, {} with problems, {} parse errors",
        counts[0], counts[1], counts[2]
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn serve_exits_nonzero_when_a_crd_file_does_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "crds/x.yaml", "kind: [\n");
    let out = Command::new(BIN)
        .args(["serve", "--admin-addr", "127.0.0.1:0", "--config-dir"])
        .arg(dir.path())
        .arg("--crds")
        .arg(dir.path().join("crds"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("x.yaml:"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn serve_kubernetes_without_a_cluster_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--kubernetes", "--admin-addr", "127.0.0.1:0"])
        .args(["--dashboard-addr", "127.0.0.1:0"])
        .env("KUBECONFIG", dir.path().join("missing"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("Kubernetes client"),
        "{}",
        text(&out.stderr)
    );
}

/// Kills the child when a test ends early.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    fn spawn(args: &[&str]) -> Self {
        let child = Command::new(BIN)
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn edgeplane");
        Self(child)
    }

    /// Sends SIGTERM and waits (bounded) for the exit code.
    fn terminate(&mut self) -> Option<i32> {
        let pid = self.0.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.0.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("did not exit after SIGTERM");
    }
}

/// `edgeplane serve` on `dir` with its admin server on `admin` (the dashboard on a port of
/// its choosing), once `/readyz` answers 200.
fn serve_ready(dir: &Path, admin: SocketAddr, drain_timeout: &str) -> Running {
    serve_ready_with(dir, admin, "127.0.0.1:0".parse().unwrap(), drain_timeout)
}

/// [`serve_ready`] with the dashboard server on `dashboard`.
fn serve_ready_with(
    dir: &Path,
    admin: SocketAddr,
    dashboard: SocketAddr,
    drain_timeout: &str,
) -> Running {
    let serve = Running::spawn(&[
        "serve",
        "--config-dir",
        dir.to_str().unwrap(),
        "--admin-addr",
        &admin.to_string(),
        "--dashboard-addr",
        &dashboard.to_string(),
        "--drain-timeout",
        drain_timeout,
    ]);
    wait_get(admin, "/readyz", |c, _| c == 200);
    serve
}

/// One HTTP/1.1 GET on a fresh connection: (status, head, body). None when nothing answers.
fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Option<(u16, String, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let raw = text(&raw);
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let code = head.split(' ').nth(1)?.parse().ok()?;
    Some((code, head.to_owned(), body.to_owned()))
}

/// Polls (bounded) until `ok` holds for a GET answer.
fn wait_get(addr: SocketAddr, path: &str, ok: impl Fn(u16, &str) -> bool) -> (u16, String) {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut last = None;
    while Instant::now() < deadline {
        if let Some((code, _, body)) = get(addr, path, &[]) {
            if ok(code, &body) {
                return (code, body);
            }
            last = Some((code, body));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("GET {addr}{path}: no expected answer in time; last {last:?}");
}

#[test]
fn serve_routes_reloads_and_drains_on_sigterm() {
    let (port, backend, admin) = (free_port(), free_port(), free_port());
    let mut echo = Running::spawn(&[
        "echo",
        "--listen",
        &format!("127.0.0.1:{backend}"),
        "--pod",
        "p1",
    ]);
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "config.yaml", &config(port, backend, "/one"));
    let admin_addr: SocketAddr = ([127, 0, 0, 1], admin).into();
    let dashboard: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let mut serve = serve_ready_with(dir.path(), admin_addr, dashboard, "2s");
    let proxy: SocketAddr = ([127, 0, 0, 1], port).into();
    let (_, body) = wait_get(proxy, "/one/x", |c, _| c == 200);
    assert!(body.contains("\"p1\""), "{body}");
    assert_eq!(get(proxy, "/two", &[]).map(|r| r.0), Some(404));

    write(dir.path(), "config.yaml", &config(port, backend, "/two"));
    wait_get(proxy, "/two", |c, _| c == 200);
    assert_eq!(get(proxy, "/one/x", &[]).map(|r| r.0), Some(404));

    // A broken edit keeps the last good table.
    write(dir.path(), "config.yaml", "kind: [\n");
    wait_get(admin_addr, "/metrics", |_, b| {
        b.contains("edgeplane_config_errors_total{source=\"file\"}")
    });
    assert_eq!(get(proxy, "/two", &[]).map(|r| r.0), Some(200));

    let (_, status) = wait_get(dashboard, "/debug/status", |c, _| c == 200);
    assert!(status.contains("\"HTTPRoute\""), "{status}");
    assert_eq!(serve.terminate(), Some(0));
    assert_eq!(echo.terminate(), Some(0));
}

#[test]
fn demo_commands_work() {
    if Command::new("curl").arg("--version").output().is_err() {
        println!("skipped: curl is not installed");
        return;
    }
    let listen = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{}", free_port());
    let dashboard = format!("127.0.0.1:{}", free_port());
    let mut demo = Running::spawn(&[
        "demo",
        "--listen",
        &listen,
        "--admin-addr",
        &admin,
        "--dashboard-addr",
        &dashboard,
    ]);
    let stdout = demo.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut commands = Vec::new();
    let mut printed = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("demo printed its commands in time");
        if line.contains("Ctrl-C") {
            break;
        }
        printed.push(line.clone());
        let t = line.trim();
        if t.starts_with("curl ") || t.starts_with("for ") {
            commands.push(t.to_owned());
        }
    }
    assert_eq!(commands.len(), 8, "{commands:?}");
    let dashboard_line = format!("dashboard on http://{dashboard}/");
    assert!(printed.contains(&dashboard_line), "{printed:#?}");
    let run = |cmd: &str| {
        let out = Command::new("sh").args(["-c", cmd]).output().unwrap();
        assert!(out.status.success(), "{cmd}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let expect = [
        vec!["demo-v1-"],
        vec!["\"demo-v2-0\""],
        vec!["\"demo-v2-0\""],
        vec!["demo-v1-"],
        vec!["301", "/v2/page"],
        vec!["x-served-by: edgeplane", "x-demo", "hello"],
        vec!["\"HTTPRoute\"", "\"canary\""],
        vec!["\"listeners\"", "edgeplane_table_generation 1"],
    ];
    for (cmd, needles) in commands.iter().zip(expect) {
        let out = run(cmd);
        for n in needles {
            assert!(
                out.to_lowercase().contains(&n.to_lowercase()),
                "{cmd}: no {n} in\n{out}"
            );
        }
    }
    // The weighted split reaches both versions over enough requests (bounded).
    let addr: SocketAddr = listen.parse().unwrap();
    let mut seen_v2 = false;
    for _ in 0..300 {
        if get(addr, "/split", &[]).is_some_and(|r| r.2.contains("demo-v2")) {
            seen_v2 = true;
            break;
        }
    }
    assert!(seen_v2, "10% weight never reached demo-v2 in 300 requests");
    assert_eq!(demo.terminate(), Some(0));
}
