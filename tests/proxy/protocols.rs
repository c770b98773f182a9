//! Protocols and streaming: large bodies, h2c in and out, absolute-form targets, malformed
//! input, upgrades, slow clients, pipelining and `Expect: 100-continue`.

use std::io::{Read, Write};
use std::time::Duration;

use bytes::Bytes;
use edgeplane::table::{PathMatch, UpstreamProtocol};
use http::Method;

use crate::support::client::{self, get_h1, h1_client, send, H2c};
use crate::support::echo::start_echo;
use crate::support::net::free_addr;
use crate::support::proxy::start;
use crate::support::tables::*;

#[tokio::test]
async fn large_request_body_streams_through() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r").backend(to(&service("e", &[echo.addr]))).build()],
    ))
    .await;
    // Streamed in chunks without a length (chunked), 4 MiB in total.
    let (tx, body) = client::channel_body();
    let req = client::request(Method::POST, addr, "h", "/upload")
        .body(body)
        .unwrap();
    let c = h1_client();
    let sending = tokio::spawn(async move {
        let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
        for _ in 0..64 {
            tx.send(chunk.clone()).await.unwrap();
        }
    });
    let r = send(&c, req).await.unwrap();
    sending.await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["bodyLength"], 4 * 1024 * 1024);
    // And with a Content-Length, over HTTP/2.
    let mut h2 = H2c::connect(addr).await.unwrap();
    let req = H2c::request(Method::PUT, "h", "/upload")
        .body(client::full(vec![b'y'; 3 * 1024 * 1024 + 7]))
        .unwrap();
    let r = h2.send(req).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["bodyLength"], 3 * 1024 * 1024 + 7);
}

#[tokio::test]
async fn h2c_client_reaches_http1_backend_and_h2c_backend() {
    let h1 = start_echo("h1").await;
    let h2 = start_echo("h2").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![
            rule("h1").backend(to(&service("h1", &[h1.addr]))).build(),
            rule("h2")
                .path(PathMatch::prefix("/h2"))
                .backend(to(&service_with("h2", &[h2.addr], UpstreamProtocol::H2c)))
                .build(),
        ],
    ))
    .await;
    let mut conn = H2c::connect(addr).await.unwrap();
    let r = conn
        .send(
            H2c::request(Method::GET, "site.example", "/x?y=1")
                .body(client::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.version, http::Version::HTTP_2);
    assert_eq!(r.pod().as_deref(), Some("h1"));
    assert_eq!(r.field("proto").as_deref(), Some("HTTP/1.1"));
    assert_eq!(r.field("host").as_deref(), Some("site.example"));
    assert_eq!(r.field("path").as_deref(), Some("/x?y=1"));
    let r = conn
        .send(
            H2c::request(Method::GET, "site.example", "/h2/z")
                .body(client::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.pod().as_deref(), Some("h2"));
    assert_eq!(r.field("proto").as_deref(), Some("HTTP/2.0"));
    assert_eq!(r.field("host").as_deref(), Some("site.example"));
    // HTTP/1.1 client to the h2c backend too.
    let r = get_h1(addr, "site.example", "/h2").await;
    assert_eq!(r.pod().as_deref(), Some("h2"));
    assert_eq!(r.field("proto").as_deref(), Some("HTTP/2.0"));
}

#[tokio::test]
async fn absolute_form_targets_become_origin_form() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    let svc = service("e", &[echo.addr]);
    let _p = start(table(
        1,
        vec![listener(
            addr,
            vec![vhost(
                "abs.example",
                vec![rule("abs").backend(to(&svc)).build()],
            )],
        )],
    ))
    .await;
    // The absolute-form authority wins over the Host header (RFC 9112 3.2.2).
    const REQUEST: &[u8] =
        b"GET http://abs.example/a/b?c=d HTTP/1.1\r\nHost: ignored.example\r\nConnection: close\r\n\r\n";
    let echo_addr = echo.addr;
    let (reply, direct) = tokio::task::spawn_blocking(move || {
        (
            raw_exchange(addr, REQUEST),
            raw_exchange(echo_addr, REQUEST),
        )
    })
    .await
    .unwrap();
    // The echo reports an absolute-form target whole, so the proxied answer below shows that
    // the proxy sent origin form.
    assert!(
        direct.contains(r#""path":"http://abs.example/a/b?c=d""#),
        "{direct}"
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains(r#""path":"/a/b?c=d""#), "{reply}");
    assert!(reply.contains(r#""host":"abs.example""#), "{reply}");
}

/// Writes `request` on a fresh blocking connection and reads until the server closes.
fn raw_exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn malformed_requests_get_400_and_the_proxy_keeps_serving() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r").backend(to(&service("e", &[echo.addr]))).build()],
    ))
    .await;
    let addr2 = addr;
    let replies = tokio::task::spawn_blocking(move || {
        [
            raw_exchange(addr2, b"GARBAGE\r\n\r\n"),
            raw_exchange(addr2, b"GET / HTTP/1.1\r\nHost: h\r\nBad Header\r\n\r\n"),
            raw_exchange(
                addr2,
                b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: x\r\n\r\n",
            ),
        ]
    })
    .await
    .unwrap();
    for reply in replies {
        assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    }
    assert_eq!(get_h1(addr, "h", "/").await.status, 200);
}

#[tokio::test]
async fn websocket_upgrade_tunnels_bytes_both_ways() {
    let backend = crate::support::echo::start_upgrade_echo().await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("ws")
            .backend(to(&service("ws", &[backend.addr])))
            .build()],
    ))
    .await;
    let reply = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(
            b"GET /chat HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
              Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 4096 {
            if s.read(&mut byte).unwrap() == 0 {
                break;
            }
            head.push(byte[0]);
        }
        s.write_all(b"ping over the tunnel").unwrap();
        let mut echoed = [0u8; 20];
        s.read_exact(&mut echoed).unwrap();
        (String::from_utf8_lossy(&head).into_owned(), echoed)
    })
    .await
    .unwrap();
    let (head, echoed) = reply;
    let lower = head.to_ascii_lowercase();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(lower.contains("upgrade: websocket"), "{head}");
    assert!(lower.contains("connection: upgrade"), "{head}");
    assert_eq!(&echoed, b"ping over the tunnel");
}

#[tokio::test]
async fn silent_and_slow_clients_are_disconnected() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    let mut options = crate::support::proxy::test_options();
    options.header_read_timeout = Duration::from_millis(300);
    // Silence before the first byte is the handshake phase.
    options.handshake_timeout = Duration::from_millis(300);
    let _p = crate::support::proxy::start_with(
        single(
            addr,
            vec![rule("r").backend(to(&service("e", &[echo.addr]))).build()],
        ),
        options,
    )
    .await;
    let closed_after = |prefix: &'static [u8]| {
        tokio::task::spawn_blocking(move || {
            let start = std::time::Instant::now();
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(prefix).unwrap();
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out);
            start.elapsed()
        })
    };
    let silent = closed_after(b"").await.unwrap();
    let slow = closed_after(b"GET / HTTP/1.1\r\nHost: h\r\n")
        .await
        .unwrap();
    assert!(
        silent < Duration::from_secs(3),
        "silent client kept {silent:?}"
    );
    assert!(slow < Duration::from_secs(3), "slow client kept {slow:?}");
    assert_eq!(get_h1(addr, "h", "/").await.status, 200);
}

/// Reads from `s` until `done` holds for what was read or the server closes (bounded: 5 s of
/// silence ends it).
async fn read_until(s: &mut tokio::net::TcpStream, done: impl Fn(&str) -> bool) -> String {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    for _ in 0..1000 {
        let text = String::from_utf8_lossy(&out).into_owned();
        if done(&text) {
            return text;
        }
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => out.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_and_100_continue_comes_before_the_body() {
    use tokio::io::AsyncWriteExt;
    let echo = start_echo("e").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r").backend(to(&service("e", &[echo.addr]))).build()],
    ))
    .await;
    assert_eq!(get_h1(addr, "h", "/").await.status, 200);
    // Two requests in one write: two answers, in order, then the close the second asked for.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        b"GET /first HTTP/1.1\r\nHost: h\r\n\r\n\
          GET /second HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let both = read_until(&mut s, |_| false).await;
    assert_eq!(both.matches("HTTP/1.1 200 OK").count(), 2, "{both}");
    let (first, second) = (both.find("/first"), both.find("/second"));
    assert!(first.is_some() && first < second, "{both}");
    // The interim answer comes before the client sends its body, and the body goes through.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\
          Connection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let interim = read_until(&mut s, |t| t.contains("\r\n\r\n")).await;
    assert_eq!(interim, "HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"hello").await.unwrap();
    let answer = read_until(&mut s, |_| false).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains("\"bodyLength\":5"), "{answer}");
}
