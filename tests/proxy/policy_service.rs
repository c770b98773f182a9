//! Service-targeted TrafficPolicy limits (`ServiceBackend::limits`) through the proxy: a
//! Service's own circuit-breaker limit sheds its extra requests while a Service without one
//! keeps serving; a Service's own outlier threshold ejects a failing endpoint sooner.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use edgeplane::proxy::OVERLOADED;
use edgeplane::table::{PathMatch, ServiceBackend, ServiceKey, ServiceLimits, UpstreamProtocol};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::client::{get, h1_client, send};
use crate::support::echo::start_echo;
use crate::support::net::{bind_loopback, free_addr};
use crate::support::proxy::start;
use crate::support::tables::*;

fn svc(name: &str, endpoints: &[SocketAddr], limits: Option<ServiceLimits>) -> Arc<ServiceBackend> {
    Arc::new(ServiceBackend {
        service: ServiceKey {
            namespace: "default".into(),
            name: name.into(),
            port: 80,
        },
        endpoints: endpoints.to_vec(),
        terminating: Vec::new(),
        protocol: UpstreamProtocol::Http1,
        balance: Default::default(),
        limits: limits.map(Arc::new),
    })
}

#[tokio::test]
async fn a_services_own_request_limit_sheds_while_others_serve() {
    let echo = start_echo("a").await;
    let limited = svc(
        "limited",
        &[echo.addr],
        Some(ServiceLimits {
            max_requests: Some(1),
            ..ServiceLimits::default()
        }),
    );
    let free = svc("free", &[echo.addr], None);
    let addr = free_addr();
    let _proxy = start(single(
        addr,
        vec![
            rule("limited")
                .path(PathMatch::prefix("/limited"))
                .backend(to(&limited))
                .build(),
            rule("free")
                .path(PathMatch::prefix("/free"))
                .backend(to(&free))
                .build(),
        ],
    ))
    .await;
    let held: Vec<_> = ["/limited?delay=3s", "/free?delay=3s"]
        .into_iter()
        .map(|path| {
            tokio::spawn(async move {
                send(&h1_client(), get(addr, "h", path))
                    .await
                    .unwrap()
                    .status
            })
        })
        .collect();
    // Wait (bounded) until the held request occupies the limited Service's one slot.
    let client = h1_client();
    let mut shed = None;
    for _ in 0..100 {
        let r = send(&client, get(addr, "h", "/limited")).await.unwrap();
        if r.status == 503 {
            shed = Some(r);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let shed = shed.expect("the second request to the limited Service is shed");
    assert_eq!(shed.header(OVERLOADED).as_deref(), Some("max-requests"));
    // The other Service, with the command line's limits, takes a second request at once.
    let other = send(&client, get(addr, "h", "/free")).await.unwrap();
    assert_eq!(other.status, 200);
    for h in held {
        assert_eq!(h.await.unwrap(), 200, "held requests finish normally");
    }
}

/// A keep-alive backend answering every request with 502, counting requests.
async fn start_failing() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = s.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        seen.fetch_add(1, Ordering::SeqCst);
                        let resp = b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n";
                        if s.write_all(resp).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, count)
}

#[tokio::test]
async fn a_services_own_outlier_threshold_ejects_after_one_failure() {
    let echo = start_echo("good").await;
    let (bad, bad_count) = start_failing().await;
    let app = svc(
        "app",
        &[echo.addr, bad],
        Some(ServiceLimits {
            outlier_consecutive_errors: Some(1),
            ..ServiceLimits::default()
        }),
    );
    let addr = free_addr();
    let _proxy = start(single(addr, vec![rule("r").backend(to(&app)).build()])).await;
    let client = h1_client();
    let mut codes = Vec::new();
    for _ in 0..12 {
        codes.push(
            send(&client, get(addr, "h", "/"))
                .await
                .unwrap()
                .status
                .as_u16(),
        );
    }
    // The command line's threshold is 5; this Service's is 1: one failure, then ejected.
    assert_eq!(bad_count.load(Ordering::SeqCst), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 502).count(), 1, "{codes:?}");
}
