//! The upstream timeouts of ingress-nginx that Gateway API has no field for, through `serve
//! --config-dir`: `proxy-send-timeout` fails a request whose backend stops reading its body
//! (504), and leaves a backend that reads alone; `proxy-next-upstream-timeout` starts no retry
//! past its budget.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use tokio::io::AsyncReadExt;
use tokio::task::JoinHandle;

use crate::standalone::serve;
use crate::support::client::{
    channel_body, full, get, h1_client, request, send, Reply, TestClient,
};
use crate::support::echo::start_fleet;
use crate::support::faulty::{start_faulty, Mode};
use crate::support::net::bind_loopback;

const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
    metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}\n";

/// Service `name` (port 80) with the one endpoint `addr`.
fn service_at(name: &str, addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n\
         spec: {{ports: [{{name: http, port: 80}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: {name}-1, labels: {{kubernetes.io/service-name: {name}}}}}\n\
         addressType: IPv4\nports: [{{name: http, port: {port}}}]\n\
         endpoints: [{{addresses: [\"{ip}\"], conditions: {{ready: true}}}}]\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

/// An Ingress of class `edge` for `host`, `/` to Service `service`, with these annotations.
fn ingress(name: &str, host: &str, service: &str, annotations: &[(&str, &str)]) -> String {
    let notes: String = annotations
        .iter()
        .map(|(k, v)| format!("    nginx.ingress.kubernetes.io/{k}: {v:?}\n"))
        .collect();
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
         annotations:\n{notes}spec:\n  ingressClassName: edge\n  rules:\n  - host: {host}\n    \
         http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: \
         {service}, port: {{number: 80}}}}}}}}\n"
    )
}

/// A backend that reads each request's head and then nothing: the connection stays open,
/// unanswered, for at most a minute.
async fn deaf_backend() -> (SocketAddr, JoinHandle<()>) {
    let listener = bind_loopback().await;
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                tokio::time::sleep(Duration::from_secs(60)).await;
                drop(stream);
            });
        }
    });
    (addr, task)
}

async fn call(client: &TestClient, req: http::Request<crate::support::client::TestBody>) -> Reply {
    send(client, req).await.expect("request through edgeplane")
}

#[tokio::test]
async fn send_timeout_fails_a_request_its_backend_stops_reading() {
    let (deaf, deaf_task) = deaf_backend().await;
    let fleet = start_fleet(&["reader"]).await;
    let mut text = format!(
        "{CLASS}{}{}",
        service_at("deaf", deaf),
        service_at("reader", fleet[0].addr)
    );
    let send_timeout = [("proxy-send-timeout", "1"), ("proxy-read-timeout", "60")];
    text.push_str(&ingress("deaf", "deaf.test", "deaf", &send_timeout));
    text.push_str(&ingress("reader", "reader.test", "reader", &send_timeout));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let http = server.http();
    let deadline = Instant::now() + Duration::from_secs(20);
    while call(&client, get(http, "reader.test", "/")).await.status != 200 {
        assert!(Instant::now() < deadline, "the Ingresses were never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A backend that reads: the body goes through.
    let post = request(Method::POST, http, "reader.test", "/")
        .body(full(vec![b'x'; 256 * 1024]))
        .expect("request");
    assert_eq!(call(&client, post).await.status, 200);

    // A body far larger than the socket buffers, to a backend that stopped reading after the
    // head: once the proxy's writes wait for a second, the client gets 504 (the read timeout
    // of 60 s is not what ends it).
    let (tx, body) = channel_body();
    let feeder = tokio::spawn(async move {
        let chunk = Bytes::from(vec![b'y'; 64 * 1024]);
        for _ in 0..2048 {
            if tx.send(chunk.clone()).await.is_err() {
                return;
            }
        }
    });
    let post = request(Method::POST, http, "deaf.test", "/")
        .body(body)
        .expect("request");
    let r = tokio::time::timeout(Duration::from_secs(30), call(&client, post))
        .await
        .expect("answered before the read timeout");
    assert_eq!(r.status, 504);
    feeder.abort();
    deaf_task.abort();
}

#[tokio::test]
async fn next_upstream_timeout_starts_no_retry_past_its_budget() {
    // Each try is answered 503 after 400 ms: 10 tries take 4 s, a budget of 1 s allows 3.
    let slow = start_faulty("slow", Mode::Late(Duration::from_millis(400), 503)).await;
    let mut text = format!("{CLASS}{}", service_at("slow", slow.addr));
    let retry = [
        ("proxy-next-upstream", "error http_503"),
        ("proxy-next-upstream-tries", "10"),
        ("proxy-next-upstream-timeout", "1"),
    ];
    text.push_str(&ingress("bounded", "bounded.test", "slow", &retry));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let http = server.http();
    let deadline = Instant::now() + Duration::from_secs(20);
    while call(&client, get(http, "bounded.test", "/")).await.status != 503 {
        assert!(Instant::now() < deadline, "the Ingress was never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = slow.requests();
    let r = call(&client, get(http, "bounded.test", "/")).await;
    assert_eq!(r.status, 503, "the last answer");
    let tries = slow.requests() - before;
    assert!(
        (2..=4).contains(&tries),
        "{tries} tries within a budget of 1 s"
    );
}
