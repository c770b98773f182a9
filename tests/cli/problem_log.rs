//! `serve` names each problem in its log where it happens: one warning with the object,
//! condition, reason, message and file:line when a problem appears, nothing more while it
//! stays, one info line when it clears; a document of an unknown kind of our groups is an
//! error naming its file and line while the rest is served.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{config, free_port, write, Running, BIN};

/// The lines of the child's stderr, as they come.
struct Log {
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Log {
    /// The first line (read already, or read until it comes) that contains every part of
    /// `want`, as JSON; panics (with the log) after 20 s.
    fn wait_for(&mut self, want: &[&str]) -> Value {
        let found = |line: &str| want.iter().all(|w| line.contains(w));
        if let Some(line) = self.seen.iter().find(|l| found(l)) {
            return serde_json::from_str(line).expect("a JSON log line");
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if found(&line) {
                        return serde_json::from_str(&line).expect("a JSON log line");
                    }
                }
                Err(_) => panic!("no line with {want:?} in:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// Lines read so far that contain `part`.
    fn count(&self, part: &str) -> usize {
        self.seen.iter().filter(|l| l.contains(part)).count()
    }
}

#[test]
fn serve_logs_a_problem_once_when_it_appears_and_once_when_it_clears() {
    let dir = tempfile::tempdir().unwrap();
    let (port, backend) = (free_port(), free_port());
    let good = config(port, backend, "/");
    let broken = good.replace("- name: echo\n      port", "- name: missing\n      port");
    write(dir.path(), "all.yaml", &broken);
    write(
        dir.path(),
        "typo.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HttpRoute\nmetadata:\n  name: typo\n",
    );
    let route_line = broken
        .lines()
        .position(|l| l == "kind: HTTPRoute")
        .expect("a route");
    let admin = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(BIN)
        .args(["--log-format", "json", "serve", "--admin-addr", &admin])
        .args(["--dashboard-addr", "127.0.0.1:0"])
        .arg("--config-dir")
        .arg(dir.path())
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn edgeplane");
    let stderr = child.stderr.take().unwrap();
    let _running = Running(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = Log {
        lines: rx,
        seen: Vec::new(),
    };
    let typo = log.wait_for(&["typo.yaml:1: unknown kind HttpRoute"]);
    assert_eq!(typo["level"], "ERROR", "{typo}");
    assert!(
        typo["fields"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("did you mean HTTPRoute?")),
        "{typo}"
    );
    let source = format!("{}:{route_line}", dir.path().join("all.yaml").display());
    let warn = log.wait_for(&["problem: HTTPRoute default/web"]);
    let fields = &warn["fields"];
    assert_eq!(warn["level"], "WARN", "{warn}");
    assert_eq!(
        fields["message"],
        "problem: HTTPRoute default/web parent gw: ResolvedRefs=False (BackendNotFound): Service default/missing not found"
    );
    assert_eq!(fields["object"], "HTTPRoute default/web parent gw");
    assert_eq!(fields["condition"], "ResolvedRefs");
    assert_eq!(fields["reason"], "BackendNotFound");
    assert_eq!(fields["source"], source.as_str());
    log.wait_for(&["route table published", "\"generation\":1,"]);
    // The rest is served: the Gateway's listener is up.
    log.wait_for(&["listening", &format!(":{port}")]);

    // Republished with the problem unchanged (a new object elsewhere): nothing more is said.
    write(
        dir.path(),
        "more.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: other\nspec:\n  ports:\n  - port: 80\n",
    );
    log.wait_for(&["route table published", "\"generation\":2,"]);
    assert_eq!(log.count("problem: HTTPRoute default/web"), 1);

    write(dir.path(), "all.yaml", &good);
    let cleared = log.wait_for(&["problem cleared: HTTPRoute default/web"]);
    assert_eq!(cleared["level"], "INFO", "{cleared}");
    assert_eq!(cleared["fields"]["condition"], "ResolvedRefs");
    assert_eq!(cleared["fields"]["source"], source.as_str());
    log.wait_for(&["route table published", "\"generation\":3,"]);
    assert_eq!(log.count("problem: HTTPRoute default/web"), 1);
    assert_eq!(log.count("problem cleared"), 1);
}
