//! Body size limits of TrafficPolicies through the proxy: a request whose `Content-Length` is
//! over the limit gets 413 before any backend sees it, a chunked one is aborted with 413 as it
//! passes the limit; a response whose `Content-Length` is over gets 502, a chunked one is cut.

use std::net::SocketAddr;

use bytes::Bytes;
use edgeplane::table::RequestPolicy;
use http::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::policy_access::policy_table;
use crate::support::client::{channel_body, full, h1_client, request, send};
use crate::support::echo::start_echo;
use crate::support::net::{bind_loopback, free_addr};
use crate::support::proxy::start;

fn body_policy(request: Option<u64>, response: Option<u64>) -> RequestPolicy {
    RequestPolicy {
        max_request_body: request,
        max_response_body: response,
        ..RequestPolicy::default()
    }
}

#[tokio::test]
async fn request_bodies_over_the_limit_get_413() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let proxy = start(policy_table(
        addr,
        echo.addr,
        Some(body_policy(Some(10), None)),
        None,
    ))
    .await;
    let client = h1_client();
    let post = |body: &'static str| {
        request(Method::POST, addr, "example.com", "/")
            .header("content-length", body.len())
            .body(full(body))
            .unwrap()
    };
    let ok = send(&client, post("0123456789")).await.unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["bodyLength"], 10);
    assert_eq!(
        send(&client, post("0123456789X")).await.unwrap().status,
        413
    );
    // Chunked: no length up front; the proxy counts as the body streams.
    let (tx, body) = channel_body();
    let req = request(Method::POST, addr, "example.com", "/")
        .body(body)
        .unwrap();
    let sending = tokio::spawn(async move {
        for _ in 0..4 {
            if tx.send(Bytes::from_static(b"abcd")).await.is_err() {
                return;
            }
        }
    });
    let reply = send(&h1_client(), req).await.unwrap();
    assert_eq!(reply.status, 413);
    let _ = sending.await;
    let metrics = proxy.metrics.encode();
    assert!(
        metrics.contains("edgeplane_policy_denied_total{reason=\"body\"} 2"),
        "{metrics}"
    );
}

/// A backend answering every request with `size` bytes, chunked (no `Content-Length`).
async fn chunked_backend(size: usize) -> SocketAddr {
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let mut resp = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
                for _ in 0..size / 100 {
                    resp.extend_from_slice(b"64\r\n");
                    resp.extend_from_slice(&[b'x'; 100]);
                    resp.extend_from_slice(b"\r\n");
                }
                resp.extend_from_slice(b"0\r\n\r\n");
                let _ = s.write_all(&resp).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn response_bodies_over_the_limit_get_502_or_are_cut() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    // The echo's JSON answer is a few hundred bytes with a Content-Length.
    let proxy = start(policy_table(
        addr,
        echo.addr,
        Some(body_policy(None, Some(20))),
        None,
    ))
    .await;
    let client = h1_client();
    let get = || {
        request(Method::GET, addr, "example.com", "/")
            .body(crate::support::client::empty())
            .unwrap()
    };
    assert_eq!(send(&client, get()).await.unwrap().status, 502);
    // A streamed body is cut once it passes the limit.
    let streaming = chunked_backend(1000).await;
    proxy
        .publish(policy_table(
            addr,
            streaming,
            Some(body_policy(None, Some(500))),
            None,
        ))
        .await;
    assert!(send(&client, get()).await.is_err(), "the body is cut");
    proxy
        .publish(policy_table(
            addr,
            streaming,
            Some(body_policy(None, Some(1000))),
            None,
        ))
        .await;
    let whole = send(&client, get()).await.unwrap();
    assert_eq!((whole.status.as_u16(), whole.body.len()), (200, 1000));
}
