//! Backend protocols end to end from the Service port's `appProtocol`: `kubernetes.io/h2c`
//! carries the client's authority as `:authority`, and `kubernetes.io/ws` carries a real
//! WebSocket handshake and its frames both ways.

use edgeplane::table::{PathMatch, UpstreamProtocol};
use http::Method;

use crate::support::client::{self, get_h1, H2c};
use crate::support::mirror::start_recorder;
use crate::support::net::free_addr;
use crate::support::proxy::{start, start_with, test_options};
use crate::support::tables::*;
use crate::support::websocket::{start_ws_echo, ws_connect, ws_round_trip};

#[tokio::test]
async fn h2c_backends_see_the_client_authority() {
    let (backend, mut rec) = start_recorder("h2").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("h2")
            .backend(to(&service_with(
                "h2",
                &[backend.addr],
                UpstreamProtocol::H2c,
            )))
            .build()],
    ))
    .await;
    let wait = std::time::Duration::from_secs(5);
    // HTTP/1.1 client: the Host header becomes :authority.
    let r = get_h1(addr, "site.example:8080", "/one").await;
    assert_eq!(r.status, 200);
    let got = rec.next(wait).await.expect("request reached the backend");
    assert_eq!(got.host, "site.example:8080");
    assert!(
        got.headers.get("host").is_none(),
        "HTTP/2 carries :authority, not Host"
    );
    // HTTP/2 client: its :authority passes through.
    let mut h2 = H2c::connect(addr).await.unwrap();
    let r = h2
        .send(
            H2c::request(Method::POST, "other.example", "/two")
                .body(client::full("x"))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let got = rec.next(wait).await.expect("request reached the backend");
    assert_eq!(
        (got.host.as_str(), got.path.as_str()),
        ("other.example", "/two")
    );
}

#[tokio::test]
async fn websocket_handshake_and_frames_reach_a_ws_backend() {
    let ws = start_ws_echo("ws").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("ws")
            .path(PathMatch::prefix("/ws"))
            .backend(to(&service_with("ws", &[ws.addr], UpstreamProtocol::Http1)))
            .build()],
    ))
    .await;
    let mut conn = ws_connect(addr, "chat.example", "/ws/room").await.unwrap();
    assert_eq!(
        ws_round_trip(&mut conn, "hello").await.unwrap(),
        "ws: hello"
    );
    let long = "y".repeat(200_000);
    assert_eq!(
        ws_round_trip(&mut conn, &long).await.unwrap(),
        format!("ws: {long}")
    );
    // A second connection is independent of the first.
    let mut other = ws_connect(addr, "chat.example", "/ws/other").await.unwrap();
    assert_eq!(ws_round_trip(&mut other, "two").await.unwrap(), "ws: two");
    assert_eq!(
        ws_round_trip(&mut conn, "again").await.unwrap(),
        "ws: again"
    );
}

/// A proxy with one WebSocket route to `backend` and the given drain window.
async fn ws_proxy(
    backend: std::net::SocketAddr,
    drain: std::time::Duration,
) -> (std::net::SocketAddr, crate::support::proxy::Running) {
    let addr = free_addr();
    let table = single(
        addr,
        vec![rule("ws")
            .backend(to(&service_with("ws", &[backend], UpstreamProtocol::Http1)))
            .build()],
    );
    let options = edgeplane::proxy::ProxyOptions {
        drain_timeout: drain,
        ..test_options()
    };
    (addr, start_with(table, options).await)
}

#[tokio::test]
async fn shutdown_lets_open_websockets_finish_within_the_drain_window() {
    let ws = start_ws_echo("ws").await;
    let (addr, p) = ws_proxy(ws.addr, std::time::Duration::from_secs(10)).await;
    let mut conn = ws_connect(addr, "chat.example", "/").await.unwrap();
    assert_eq!(ws_round_trip(&mut conn, "one").await.unwrap(), "ws: one");
    assert_eq!(p.proxy.open_tunnels(), 1);

    let proxy = p.proxy.clone();
    let shutdown = tokio::spawn(async move { proxy.shutdown().await });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        !shutdown.is_finished(),
        "shutdown did not wait for the open WebSocket"
    );
    // The tunnel still carries messages while the proxy drains.
    assert_eq!(ws_round_trip(&mut conn, "two").await.unwrap(), "ws: two");

    conn.close(None).await.unwrap();
    drop(conn);
    tokio::time::timeout(std::time::Duration::from_secs(5), shutdown)
        .await
        .expect("shutdown finishes once the WebSocket closed")
        .unwrap();
    assert_eq!(p.proxy.open_tunnels(), 0);
}

#[tokio::test]
async fn shutdown_closes_websockets_still_open_when_the_window_ends() {
    let ws = start_ws_echo("ws").await;
    let (addr, p) = ws_proxy(ws.addr, std::time::Duration::from_millis(300)).await;
    let mut conn = ws_connect(addr, "chat.example", "/").await.unwrap();
    assert_eq!(ws_round_trip(&mut conn, "one").await.unwrap(), "ws: one");

    tokio::time::timeout(std::time::Duration::from_secs(5), p.proxy.shutdown())
        .await
        .expect("shutdown ends after the drain window");
    // The proxy closed its side: the client sees the connection end.
    assert!(ws_round_trip(&mut conn, "late").await.is_err());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while p.proxy.open_tunnels() != 0 {
        assert!(std::time::Instant::now() < deadline, "tunnel never ended");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
