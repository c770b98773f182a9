//! TrafficPolicy `concurrencyLimit` through the real binary: with `perClient: 1`, a client
//! address with a request in progress gets 503 for the next, another address still passes,
//! and the place is free again once the response is through.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;

use super::policies::wait_reason;
use super::{admin_get, ip, route, serve, service, test_net, write, BASE};

const POLICY: &str = r#"
---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {name: one-each}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: held}]
  concurrencyLimit: {perClient: 1}
"#;

/// A backend on `addr` that counts the requests it reads and answers each `200` only when
/// the gate gives it a permit.
async fn gated_backend(addr: SocketAddr) -> (Arc<AtomicUsize>, Arc<Semaphore>) {
    let listener = TcpListener::bind(addr).await.expect("bind backend");
    let (seen, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Semaphore::new(0)));
    let (count, opens) = (seen.clone(), gate.clone());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (count, opens) = (count.clone(), opens.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                    }
                    buf.clear();
                    count.fetch_add(1, Ordering::AcqRel);
                    match opens.acquire().await {
                        Ok(permit) => permit.forget(),
                        Err(_) => return,
                    }
                    let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if stream.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (seen, gate)
}

/// `GET path` written from source address `from` on a new connection, not yet answered.
async fn start(proxy: SocketAddr, from: SocketAddr, path: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.bind(from).expect("bind client");
    let mut stream = socket.connect(proxy).await.expect("connect proxy");
    let req = format!("GET {path} HTTP/1.1\r\nhost: example.com\r\nconnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.expect("write");
    stream
}

/// The status code and body of the answer on `stream`.
async fn answer(mut stream: TcpStream) -> (String, String) {
    let mut text = Vec::new();
    stream.read_to_end(&mut text).await.expect("read answer");
    let text = String::from_utf8_lossy(&text).into_owned();
    let status = text.split(' ').nth(1).unwrap_or_default().to_owned();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

/// Waits (bounded) until `seen` reaches `n`.
async fn until_seen(seen: &AtomicUsize, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.load(Ordering::Acquire) < n {
        assert!(
            Instant::now() < deadline,
            "the backend never got request {n}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn concurrency_limit_holds_one_request_per_client_address() {
    let net = test_net();
    let backend = SocketAddr::new(ip(net, 10), 3000);
    let (seen, gate) = gated_backend(backend).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let text = format!(
        "{BASE}{}{}{POLICY}",
        service("app", &[backend]),
        route("held", "/held", "app")
    );
    write(dir.path(), "all.yaml", &text);
    let server = serve(dir.path(), net).await;
    let (a, b) = (
        SocketAddr::new(ip(net, 50), 0),
        SocketAddr::new(ip(net, 51), 0),
    );

    wait_reason(
        server.dashboard,
        "TrafficPolicy",
        "one-each",
        "Accepted",
        "Accepted",
    )
    .await;

    // One request of address a in progress: its next is refused before any backend sees it.
    let held = start(server.proxy, a, "/held").await;
    until_seen(&seen, 1).await;
    let (status, body) = answer(start(server.proxy, a, "/held").await).await;
    assert_eq!(status, "503", "{body}");
    assert!(body.contains("in progress"), "{body}");
    let (_, metrics) = admin_get(server.admin, "/metrics").await.expect("metrics");
    assert!(
        metrics.contains("edgeplane_policy_denied_total{reason=\"concurrency_limit\"} 1"),
        "{metrics}"
    );
    let count = seen.load(Ordering::Acquire);

    // Another client address has its own place.
    let other = start(server.proxy, b, "/held").await;
    until_seen(&seen, count + 1).await;
    gate.add_permits(2);
    assert_eq!(answer(other).await.0, "200");
    assert_eq!(answer(held).await.0, "200");

    // The first address's place is free again.
    let again = start(server.proxy, a, "/held").await;
    until_seen(&seen, count + 2).await;
    gate.add_permits(1);
    assert_eq!(answer(again).await.0, "200");
}
