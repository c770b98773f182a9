//! What bounds a request through the real binary: a request target longer than
//! `--max-request-target` is 414 before any route (regular expressions included) looks at it; a
//! body trickled below `--min-body-rate` is 408 though it never idles; one HTTP/2 client
//! connection holds at most `--max-upstream-per-client` upstream connections; connections
//! still open when a drain window ends are cut, logged and counted.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{admin_get, echo_fleet, get, ip, route, serve_with, service, test_net, write, BASE};

/// An HTTPRoute for `example.com` whose rule is a regular expression on the path.
fn regex_route() -> String {
    "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: re}\n\
     spec:\n  parentRefs: [{name: gw}]\n  hostnames: [example.com]\n  rules:\n\
     \x20 - matches: [{path: {type: RegularExpression, value: \"/re/(a+)+b\"}}]\n\
     \x20   backendRefs: [{name: v1, port: 80}]\n"
        .to_owned()
}

#[tokio::test]
async fn long_targets_are_414_and_trickled_bodies_408() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let all = format!(
        "{BASE}{}{}{}",
        service("v1", &v1),
        route("r", "/", "v1"),
        regex_route()
    );
    write(dir.path(), "all.yaml", &all);
    let flags = ["--min-body-rate", "1000", "--min-body-rate-grace", "500ms"];
    let server = serve_with(dir.path(), net, &flags, Stdio::inherit()).await;

    // 8 KiB of target is served; one byte more is 414, whichever rule would have matched.
    let at_limit = format!("/re/{}", "a".repeat(8192 - 4));
    assert_eq!(get(server.proxy, &at_limit).await.expect("at limit").0, 200);
    let over = format!("/re/{}", "a".repeat(8192 - 3));
    assert_eq!(get(server.proxy, &over).await.expect("over").0, 414);
    let query_over = format!("/?q={}", "x".repeat(8192));
    assert_eq!(get(server.proxy, &query_over).await.expect("query").0, 414);
    assert_eq!(get(server.proxy, "/re/aab").await.expect("regex").0, 200);

    // A body sent whole is forwarded.
    let fast = post_trickled(server.proxy, 4000, 4000, Duration::ZERO).await;
    assert!(fast.starts_with("HTTP/1.1 200"), "{fast}");
    // 20 bytes every 100 ms (200 B/s) never idles, yet falls behind 1000 B/s: 408 while the
    // client is still sending.
    let slow = post_trickled(server.proxy, 20_000, 20, Duration::from_millis(100)).await;
    assert!(slow.starts_with("HTTP/1.1 408"), "{slow}");
}

/// POSTs a body of `len` bytes in `chunk`-byte writes `pause` apart on a raw connection until
/// a response arrives (at most 15 s), and returns the response's first line.
async fn post_trickled(addr: SocketAddr, len: usize, chunk: usize, pause: Duration) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head =
        format!("POST /upload HTTP/1.1\r\nhost: example.com\r\ncontent-length: {len}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("head");
    let (mut read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        let mut sent = 0;
        while sent < len {
            let n = chunk.min(len - sent);
            if write.write_all(&vec![b'x'; n]).await.is_err() {
                break;
            }
            sent += n;
            tokio::time::sleep(pause).await;
        }
        // The write half is kept open: dropping it would half-close the connection, which
        // the server takes for the client leaving.
        (sent, write)
    });
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(15), read.read(&mut buf))
        .await
        .expect("a response within 15 s")
        .expect("read");
    if pause.is_zero() {
        let (sent, _write) = writer.await.expect("writer");
        assert_eq!(sent, len);
    } else {
        writer.abort();
    }
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

/// A backend that holds each request for 300 ms and records the most it ever held at once.
async fn counting_backend(addr: SocketAddr) -> Arc<(AtomicUsize, AtomicUsize)> {
    let counts = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let listener = TcpListener::bind(addr).await.expect("bind backend");
    let shared = counts.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let counts = shared.clone();
            let service = hyper::service::service_fn(move |_req| {
                let counts = counts.clone();
                async move {
                    let now = counts.0.fetch_add(1, Ordering::AcqRel) + 1;
                    counts.1.fetch_max(now, Ordering::AcqRel);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    counts.0.fetch_sub(1, Ordering::AcqRel);
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from("ok"))))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    counts
}

#[tokio::test]
async fn one_h2_client_gets_a_bounded_share_of_upstream_connections() {
    let net = test_net();
    let backend = SocketAddr::new(ip(net, 30), 3000);
    let counts = counting_backend(backend).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let all = format!(
        "{BASE}{}{}",
        service("slow", &[backend]),
        route("r", "/", "slow")
    );
    write(dir.path(), "all.yaml", &all);
    let flags = ["--max-upstream-per-client", "4"];
    let server = serve_with(dir.path(), net, &flags, Stdio::inherit()).await;

    let stream = TcpStream::connect(server.proxy).await.expect("connect");
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2c handshake");
    tokio::spawn(conn);
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..24 {
        let mut sender = sender.clone();
        calls.spawn(async move {
            let req = hyper::Request::get(format!("http://example.com/{i}"))
                .body(Full::new(Bytes::new()))
                .expect("request");
            let resp = sender.send_request(req).await.expect("response");
            let status = resp.status().as_u16();
            let _ = resp.into_body().collect().await;
            status
        });
    }
    let mut statuses = Vec::new();
    while let Some(status) = calls.join_next().await {
        statuses.push(status.expect("join"));
    }
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let most = counts.1.load(Ordering::Acquire);
    assert!(
        (1..=4).contains(&most),
        "24 streams of one connection reached the backend {most} at once"
    );
}

#[tokio::test]
async fn connections_cut_at_the_drain_timeout_are_logged_and_counted() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "base.yaml",
        &format!("{BASE}{}{}", service("v1", &v1), route("r", "/", "v1")),
    );
    let second = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n\
                  metadata: {name: gw2}\nspec:\n  gatewayClassName: edge\n  listeners:\n\
                  \x20 - {name: http, port: 8081, protocol: HTTP}\n---\n\
                  apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
                  metadata: {name: r2}\nspec:\n  parentRefs: [{name: gw2}]\n  rules:\n\
                  \x20 - backendRefs: [{name: v1, port: 80}]\n";
    write(dir.path(), "second.yaml", second);
    let flags = ["--drain-timeout", "1s", "--log-format", "json"];
    let mut server = serve_with(dir.path(), net, &flags, Stdio::piped()).await;
    let log = capture_stderr(&mut server);
    let other = SocketAddr::new(server.proxy.ip(), 8081);
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(other, "/").await.map(|r| r.0).unwrap_or(0) != 200 {
        assert!(Instant::now() < deadline, "second listener never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A request that outlasts the drain window is in flight when the listener goes.
    let in_flight = tokio::spawn(async move { get(other, "/slow?delay=20s").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::remove_file(dir.path().join("second.yaml")).expect("remove");
    let cut = tokio::time::timeout(Duration::from_secs(10), in_flight)
        .await
        .expect("cut within the drain window")
        .expect("join");
    assert!(cut.is_err(), "the request was not cut: {cut:?}");

    let counted = "edgeplane_connections_closed_total{reason=\"drain_timeout\"} 1";
    let (_, metrics) = admin_get(server.admin, "/metrics").await.expect("metrics");
    assert!(metrics.contains(counted), "{metrics}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = log.lock().map(|l| l.clone()).unwrap_or_default();
        let line = text.lines().find(|l| l.contains("drain timeout"));
        if let Some(line) = line {
            assert!(line.contains("\"cut\":1"), "{line}");
            assert!(line.contains(":8081"), "{line}");
            break;
        }
        assert!(Instant::now() < deadline, "no drain log line in:\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Collects the server's standard error on a thread as it is written.
fn capture_stderr(server: &mut super::Server) -> Arc<Mutex<String>> {
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = server.child.stderr.take().expect("stderr piped");
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(mut l) = sink.lock() {
                l.push_str(&line);
                l.push('\n');
            }
        }
    });
    log
}
