//! RequestMirror: copies reach every mirror with the rule's request headers and the whole body,
//! shares are sampled, and a mirror that is slow, stalled or down never touches the main request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use edgeplane::table::{Fraction, Mirror, RuleFilters};
use http::Method;

use crate::support::client::{self, get, h1_client, send, H2c};
use crate::support::echo::start_echo;
use crate::support::mirror::{start_black_hole, start_recorder};
use crate::support::net::free_addr;
use crate::support::proxy::start;
use crate::support::tables::*;

const WAIT: Duration = Duration::from_secs(5);

fn mirror(
    svc: &std::sync::Arc<edgeplane::table::ServiceBackend>,
    share: Option<(u32, u32)>,
) -> Mirror {
    Mirror {
        backend: svc.clone(),
        fraction: share.map(|(numerator, denominator)| Fraction {
            numerator,
            denominator,
        }),
    }
}

#[tokio::test]
async fn every_mirror_gets_the_filtered_request_and_its_body() {
    let echo = start_echo("main").await;
    let (m1, mut rec1) = start_recorder("m1").await;
    let (m2, mut rec2) = start_recorder("m2").await;
    let mut backend = to(&service("main", &[echo.addr]));
    // A backendRef-level mirror next to the rule-level one.
    Arc::make_mut(&mut backend.filters).mirrors = vec![mirror(&service("m2", &[m2.addr]), None)];
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r")
            .filters(RuleFilters {
                request_headers: Some(Box::new(header_mod(
                    &[("x-set", "set")],
                    &[],
                    &["x-remove"],
                ))),
                mirrors: vec![mirror(&service("m1", &[m1.addr]), None)],
                ..Default::default()
            })
            .backend(backend)
            .build()],
    ))
    .await;
    let req = client::request(Method::POST, addr, "site.example", "/mirror?q=1")
        .header("x-remove", "gone")
        .body(client::full("hello mirror"))
        .unwrap();
    let r = send(&h1_client(), req).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.pod().as_deref(), Some("main"));
    assert_eq!(r.echoed_header("x-set"), vec!["set"]);
    for rec in [&mut rec1, &mut rec2] {
        let got = rec.next(WAIT).await.expect("the mirror receives a copy");
        assert_eq!(got.method, Method::POST);
        assert_eq!(got.path, "/mirror?q=1");
        assert_eq!(got.host, "site.example");
        assert_eq!(got.headers["x-set"], "set");
        assert!(!got.headers.contains_key("x-remove"));
        assert_eq!(&got.body[..], b"hello mirror");
    }
    // An HTTP/2 client's streamed body is mirrored too.
    let mut h2 = H2c::connect(addr).await.unwrap();
    let r = h2
        .send(
            H2c::request(Method::PUT, "h2.example", "/up")
                .body(client::full(vec![b'z'; 300_000]))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let got = rec1.next(WAIT).await.expect("the mirror receives a copy");
    assert_eq!((got.host.as_str(), got.body.len()), ("h2.example", 300_000));
}

#[tokio::test]
async fn stalled_and_dead_mirrors_never_slow_or_fail_the_main_request() {
    let echo = start_echo("main").await;
    let hole = start_black_hole().await;
    let dead = free_addr();
    let (ok, mut rec) = start_recorder("ok").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r")
            .filters(RuleFilters {
                mirrors: vec![
                    mirror(&service("hole", &[hole.addr]), None),
                    mirror(&service("dead", &[dead]), None),
                    mirror(&service("none", &[]), None),
                    mirror(&service("ok", &[ok.addr]), None),
                ],
                ..Default::default()
            })
            .backend(to(&service("main", &[echo.addr])))
            .build()],
    ))
    .await;
    // 8 MiB streamed: far more than a stalled mirror's queue holds.
    let (tx, body) = client::channel_body();
    let req = client::request(Method::POST, addr, "h", "/big")
        .body(body)
        .unwrap();
    let c = h1_client();
    let sending = tokio::spawn(async move {
        let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
        for _ in 0..128 {
            if tx.send(chunk.clone()).await.is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let r = send(&c, req).await.unwrap();
    sending.await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["bodyLength"], 8 * 1024 * 1024);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The healthy mirror either got the whole body or lost its copy; never a truncated one.
    if let Some(got) = rec.next(WAIT).await {
        assert_eq!(got.body.len(), 8 * 1024 * 1024);
    }
    // Small requests keep flowing while the black hole holds its connections. A new client:
    // when the healthy mirror lost its copy the wait above lasts `WAIT`, as long as the proxy's
    // request-head timeout, which closes the first client's idle connection meanwhile.
    let c = h1_client();
    for _ in 0..5 {
        let r = send(&c, get(addr, "h", "/small")).await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(rec.next(WAIT).await.expect("copy").path, "/small");
    }
}

#[tokio::test]
async fn shares_are_sampled_per_request() {
    let echo = start_echo("main").await;
    let (half, mut rec_half) = start_recorder("half").await;
    let (never, mut rec_never) = start_recorder("never").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r")
            .filters(RuleFilters {
                mirrors: vec![
                    mirror(&service("half", &[half.addr]), Some((25, 50))),
                    mirror(&service("never", &[never.addr]), Some((0, 100))),
                ],
                ..Default::default()
            })
            .backend(to(&service("main", &[echo.addr])))
            .build()],
    ))
    .await;
    let c = h1_client();
    for _ in 0..200 {
        assert_eq!(send(&c, get(addr, "h", "/s")).await.unwrap().status, 200);
    }
    let n = rec_half
        .count(Duration::from_millis(500), Duration::from_secs(10))
        .await;
    // Binomial(200, 0.5): 100 +- 7; outside 50..150 is a broken sampler, not bad luck.
    assert!((50..=150).contains(&n), "mirrored {n} of 200");
    assert_eq!(
        rec_never
            .count(Duration::from_millis(100), Duration::from_secs(1))
            .await,
        0
    );
}
