//! The access log's file sink through the real binary: lines land in `--access-log-file`; a
//! file moved away by a log rotator is replaced by a new one at the path (and SIGHUP reopens it
//! too); a sink that stops taking lines (a FIFO nobody reads) never holds a request: requests
//! are answered while the lines past `--access-log-queue` are dropped and counted.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{admin_get, echo_fleet, get, route, serve_with, service, test_net, write, BASE};

/// The lines of `path`, waiting (bounded) until it has at least `n`.
async fn wait_lines(path: &Path, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        if lines.len() >= n {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "{} has {} lines, expected {n}",
            path.display(),
            lines.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_file_sink_follows_rotation_and_sighup() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "all.yaml",
        &format!("{BASE}{}{}", service("v1", &v1), route("r", "/", "v1")),
    );
    let logs = tempfile::tempdir().expect("log dir");
    let log = logs.path().join("access.log");
    let log_arg = log.to_str().expect("utf-8 path");
    let flags = ["--access-log", "json", "--access-log-file", log_arg];
    let server = serve_with(dir.path(), net, &flags, Stdio::inherit()).await;

    assert_eq!(get(server.proxy, "/one").await.expect("one").0, 200);
    let lines = wait_lines(&log, 1).await;
    assert_eq!(lines[0]["path"], "/one");
    assert_eq!(lines[0]["route"], "HTTPRoute/default/r");
    assert_eq!(lines[0]["requestId"].as_str().map(str::len), Some(32));

    // A rotator renames the file: the next lines go to a new file at the path.
    let rotated = logs.path().join("access.log.1");
    std::fs::rename(&log, &rotated).expect("rotate");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !log.exists() {
        // Lines written before the writer noticed may still land in the rotated file.
        assert_eq!(get(server.proxy, "/two").await.expect("two").0, 200);
        assert!(Instant::now() < deadline, "no new file after rotation");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(get(server.proxy, "/three").await.expect("three").0, 200);
    // `/two` lines may reach the new file first: wait (bounded) for the `/three` one.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lines = wait_lines(&log, 1).await;
        if lines.iter().any(|l| l["path"] == "/three") {
            break;
        }
        assert!(Instant::now() < deadline, "no /three line: {lines:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(wait_lines(&rotated, 1).await[0]["path"], "/one");

    // SIGHUP reopens the path at once (here: after it was removed), and the process lives on.
    std::fs::remove_file(&log).expect("remove");
    let pid = server.child.id().to_string();
    let hup = Command::new("kill").args(["-HUP", &pid]).status();
    assert!(hup.expect("kill").success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert_eq!(get(server.proxy, "/four").await.expect("four").0, 200);
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("\"/four\"") {
            break;
        }
        assert!(Instant::now() < deadline, "no line after SIGHUP");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_stuck_sink_drops_lines_and_never_holds_a_request() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "all.yaml",
        &format!("{BASE}{}{}", service("v1", &v1), route("r", "/", "v1")),
    );
    // A FIFO with no reader: the writer blocks opening it, for good.
    let logs = tempfile::tempdir().expect("log dir");
    let fifo = logs.path().join("stuck");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let fifo_arg = fifo.to_str().expect("utf-8 path");
    let flags = [
        "--access-log",
        "json",
        "--access-log-file",
        fifo_arg,
        "--access-log-queue",
        "8",
    ];
    let server = serve_with(dir.path(), net, &flags, Stdio::inherit()).await;

    // Far more requests than the queue holds, each answered (bounded by the client's own
    // timeout) while no line can be written.
    for i in 0..40 {
        let answered = tokio::time::timeout(
            Duration::from_secs(10),
            get(server.proxy, &format!("/r{i}")),
        )
        .await;
        assert_eq!(answered.expect("answered").expect("request").0, 200);
    }
    let (status, metrics) = admin_get(server.admin, "/metrics").await.expect("metrics");
    assert_eq!(status, 200);
    let dropped: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("edgeplane_access_log_dropped_total "))
        .expect("the dropped counter")
        .trim()
        .parse()
        .expect("a count");
    // 40 lines, at most 8 waiting for the stuck writer.
    assert!(dropped >= 40 - 8 - 1, "dropped {dropped}");
}
