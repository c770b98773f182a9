//! Lifecycle: table swaps under load, listener removal and addition, graceful shutdown.

use std::time::Duration;

use bytes::Bytes;
use http::Method;

use crate::support::client::{self, get, get_h1, h1_client, send, H2c};
use crate::support::echo::{start_echo, start_fleet};
use crate::support::net::free_addr;
use crate::support::proxy::{accepts, start};
use crate::support::tables::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_swaps_never_fail_keep_alive_requests() {
    let fleet = start_fleet(&["blue", "green"]).await;
    let blue = service("blue", &[fleet[0].addr]);
    let green = service("green", &[fleet[1].addr]);
    let addr = free_addr();
    let make = |generation: u64, svc: &std::sync::Arc<edgeplane::table::ServiceBackend>| {
        let mut t = single(addr, vec![rule("app").backend(to(svc)).build()]);
        t.generation = generation;
        t
    };
    let p = start(make(1, &blue)).await;
    let c = h1_client();
    let mut expected = "blue";
    let mut failures = 0;
    for i in 0..300u64 {
        if i % 5 == 4 {
            let (next, svc) = if expected == "blue" {
                ("green", &green)
            } else {
                ("blue", &blue)
            };
            p.publish(make(i + 2, svc)).await;
            expected = next;
        }
        match send(&c, get(addr, "h", "/")).await {
            Ok(r) if r.status == 200 => {
                // Every request after a publish sees the new table.
                assert_eq!(r.pod().as_deref(), Some(expected), "request {i}");
            }
            other => {
                failures += 1;
                eprintln!("request {i} failed: {other:?}");
            }
        }
    }
    assert_eq!(failures, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_requests_survive_swaps_and_listener_changes() {
    let echo = start_echo("e").await;
    let svc = service("e", &[echo.addr]);
    let first = free_addr();
    let second = free_addr();
    let one = |addr| {
        listener(
            addr,
            vec![vhost("*", vec![rule("r").backend(to(&svc)).build()])],
        )
    };
    let p = start(table(1, vec![one(first)])).await;
    assert_eq!(p.proxy.bound(), vec![first]);

    // A slow upload: the request stays in flight while its body trickles in.
    let (tx, body) = client::channel_body();
    let req = client::request(Method::POST, first, "h", "/slow")
        .body(body)
        .unwrap();
    let c = h1_client();
    let in_flight = tokio::spawn(async move { send(&c, req).await });
    tx.send(Bytes::from_static(b"part one;")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Swap to a table where the first listener is gone and a second one exists.
    p.publish(table(2, vec![one(second)])).await;
    assert_eq!(p.proxy.bound(), vec![second]);
    assert!(!accepts(first).await, "removed listener still accepts");
    assert!(accepts(second).await, "new listener does not accept");
    assert_eq!(get_h1(second, "h", "/").await.status, 200);

    // The slow request finishes on its old connection.
    tx.send(Bytes::from_static(b"part two")).await.unwrap();
    drop(tx);
    let r = in_flight.await.unwrap().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["bodyLength"], 17);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_in_flight_then_refuses() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    let p = start(single(
        addr,
        vec![rule("r").backend(to(&service("e", &[echo.addr]))).build()],
    ))
    .await;
    let mut h2 = H2c::connect(addr).await.unwrap();
    let (tx, body) = client::channel_body();
    let req = H2c::request(Method::POST, "h", "/").body(body).unwrap();
    let in_flight = tokio::spawn(async move { h2.send(req).await });
    tx.send(Bytes::from_static(b"abc")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let proxy = p.proxy.clone();
    let shutdown = tokio::spawn(async move { proxy.shutdown().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!accepts(addr).await, "accepting after shutdown began");
    assert!(
        !shutdown.is_finished(),
        "shutdown did not wait for the in-flight request"
    );

    tx.send(Bytes::from_static(b"def")).await.unwrap();
    drop(tx);
    let r = in_flight.await.unwrap().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["bodyLength"], 6);
    tokio::time::timeout(Duration::from_secs(5), shutdown)
        .await
        .expect("shutdown ends once drained")
        .unwrap();
    assert!(p.proxy.bound().is_empty());
}
