//! The TCP idle timeout through the real binary: `--tcp-idle-timeout` closes a TCPRoute stream
//! that sends nothing either way, on the client's and the backend's side, and
//! `/metrics` counts it in `edgeplane_l4_idle_closed_total`.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::{admin_get, ip, serve_with, service, test_net, write};

/// Bound on every wait for a close.
const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn the_binary_closes_a_silent_tcp_stream_after_the_tcp_idle_timeout() {
    let net = test_net();
    // A backend that sends nothing and reports when the proxy closes its connection.
    let backend = SocketAddr::new(ip(net, 10), 3000);
    let listener = TcpListener::bind(backend).await.expect("bind backend");
    let (closed_tx, mut closed) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = closed_tx.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
                let _ = tx.send(());
            });
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: edge}}\n\
         spec: {{controllerName: edgeplane.dev/gateway-controller}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw}}\n\
         spec:\n  gatewayClassName: edge\n  listeners:\n  - {{name: tcp, port: 8080, protocol: TCP}}\n\
         ---\napiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\n\
         metadata: {{name: stream}}\nspec:\n  parentRefs: [{{name: gw}}]\n\
         \x20 rules: [{{backendRefs: [{{name: backend, port: 80}}]}}]\n{}",
        service("backend", &[backend])
    );
    write(dir.path(), "l4.yaml", &manifests);
    let server = serve_with(
        dir.path(),
        net,
        &["--tcp-idle-timeout", "300ms"],
        std::process::Stdio::inherit(),
    )
    .await;
    let mut client = None;
    for _ in 0..50 {
        if let Ok(s) = TcpStream::connect(server.proxy).await {
            client = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut client = client.expect("the TCP listener accepts");
    // Nothing is sent either way: the proxy closes both sides.
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(WAIT, client.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "the silent stream was not closed: {read:?}"
    );
    let upstream = tokio::time::timeout(WAIT, closed.recv()).await;
    assert_eq!(
        upstream,
        Ok(Some(())),
        "the backend connection was not closed"
    );
    // The stream's task counts the close after both sockets are gone, possibly on another
    // worker than the one the test saw close: the count shows up within a short while.
    let want = "edgeplane_l4_idle_closed_total{protocol=\"tcp\"} 1";
    let mut metrics = String::new();
    for _ in 0..50 {
        let (status, text) = admin_get(server.admin, "/metrics").await.expect("metrics");
        assert_eq!(status, 200);
        metrics = text;
        if metrics.lines().any(|l| l == want) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(metrics.lines().any(|l| l == want), "{metrics}");
}
