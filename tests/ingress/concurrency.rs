//! `limit-connections` through `serve --config-dir`: at most N requests of one client address
//! in progress at once, the next answered 503 with its reason; a finished request and a
//! request whose client went away both give their place back.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::standalone::serve;
use crate::support::client::{get, h1_client, send};
use crate::support::faulty::{start_faulty, Faulty, Mode};

const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
    metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}\n";

/// Service `app` to `addr`, and an Ingress for `conn.test` to it with `limit-connections: "2"`.
fn manifests(addr: SocketAddr) -> String {
    format!(
        "{CLASS}---\napiVersion: v1\nkind: Service\nmetadata: {{name: app}}\n\
         spec: {{ports: [{{name: http, port: 80, targetPort: {port}}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: app-1, labels: {{kubernetes.io/service-name: app}}}}\n\
         addressType: IPv4\nports: [{{name: http, port: {port}}}]\n\
         endpoints: [{{addresses: [\"{ip}\"], conditions: {{ready: true}}}}]\n\
         ---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: conn\n  \
         annotations:\n    nginx.ingress.kubernetes.io/limit-connections: \"2\"\nspec:\n  \
         ingressClassName: edge\n  rules:\n  - host: conn.test\n    http:\n      paths:\n      \
         - {{path: /, pathType: Prefix, backend: {{service: {{name: app, port: {{number: 80}}}}}}}}\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

/// A request for `conn.test` written on its own connection, its answer not yet read.
async fn start(proxy: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: conn.test\r\nconnection: close\r\n\r\n")
        .await
        .expect("write request");
    stream
}

/// The status line of the answer on `stream`.
async fn status_line(mut stream: TcpStream) -> String {
    let mut text = Vec::new();
    stream.read_to_end(&mut text).await.expect("read answer");
    let text = String::from_utf8_lossy(&text).into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

/// Waits (bounded) until the backend has received `n` requests.
async fn until_received(backend: &Faulty, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while backend.requests() < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n} requests",
            backend.requests()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn limit_connections_bounds_the_requests_of_a_client_in_progress() {
    let backend = start_faulty("app", Mode::Ok).await;
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), manifests(backend.addr)).expect("write");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = send(&client, get(server.http(), "conn.test", "/")).await;
        if r.is_ok_and(|r| r.status == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "conn.test never answered 200");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    backend.set(Mode::Gated);
    let base = backend.requests();

    // Two in progress reach the backend (in this order: it answers in order of arrival); the
    // third is refused without reaching it.
    let first = start(server.http()).await;
    until_received(&backend, base + 1).await;
    let second = start(server.http()).await;
    until_received(&backend, base + 2).await;
    let third = send(&client, get(server.http(), "conn.test", "/"))
        .await
        .expect("an answer");
    assert_eq!(third.status, 503);
    let body = String::from_utf8_lossy(&third.body).into_owned();
    assert!(body.contains("in progress"), "{body}");
    assert_eq!(backend.requests(), base + 2);

    // One finishes: its place is free again.
    backend.release(1);
    let done = status_line(first).await;
    assert!(done.contains(" 200 "), "{done}");
    let fourth = start(server.http()).await;
    until_received(&backend, base + 3).await;

    // A client that goes away mid-request gives its place back.
    drop(second);
    let deadline = Instant::now() + Duration::from_secs(20);
    let fifth = loop {
        let stream = start(server.http()).await;
        let before = backend.requests();
        // Either the backend receives it, or the proxy refuses it at once.
        let mut stream = Some(stream);
        let reached = loop {
            if backend.requests() > before {
                break true;
            }
            if let Some(s) = &stream {
                let mut peek = [0u8; 1];
                if let Ok(Ok(n)) =
                    tokio::time::timeout(Duration::from_millis(20), s.peek(&mut peek)).await
                {
                    if n > 0 {
                        break false;
                    }
                }
            }
            assert!(Instant::now() < deadline, "no answer and no request");
        };
        if reached {
            break stream.take().expect("stream");
        }
        let line = status_line(stream.take().expect("stream")).await;
        assert!(line.contains(" 503 "), "{line}");
        assert!(
            Instant::now() < deadline,
            "the cancelled request's place was never freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // The backend still waits on the request whose client went away: three answers.
    backend.release(3);
    for stream in [fourth, fifth] {
        let line = status_line(stream).await;
        assert!(line.contains(" 200 "), "{line}");
    }
}
