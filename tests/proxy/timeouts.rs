//! Rule timeouts: `request` counts from the start of the request, `backendRequest` per upstream
//! attempt; both answer 504 when the response head is late, and unset means no timeout. The
//! global `--upstream-response-timeout` alone answers 504 too. The echo backend's `delay`
//! parameter makes it late.

use std::time::{Duration, Instant};

use edgeplane::proxy::ProxyOptions;
use edgeplane::table::{PathMatch, RuleFilters, Timeouts};

use crate::support::client::{get, h1_client, send};
use crate::support::echo::start_echo;
use crate::support::net::free_addr;
use crate::support::proxy::{start, start_with, test_options};
use crate::support::tables::*;

#[tokio::test]
async fn late_responses_get_504_and_disabled_timeouts_wait() {
    let echo = start_echo("e").await;
    let svc = service("e", &[echo.addr]);
    let timed = |name: &str, prefix: &str, timeouts: Timeouts| {
        rule(name)
            .path(PathMatch::prefix(prefix))
            .filters(RuleFilters {
                timeouts,
                ..Default::default()
            })
            .backend(to(&svc))
            .build()
    };
    let ms = |v| Some(Duration::from_millis(v));
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![
            timed(
                "request",
                "/request-timeout",
                Timeouts {
                    request: ms(400),
                    backend_request: None,
                },
            ),
            timed(
                "backend",
                "/backend-timeout",
                Timeouts {
                    request: None,
                    backend_request: ms(300),
                },
            ),
            timed("none", "/no-timeout", Timeouts::default()),
        ],
    ))
    .await;
    let c = h1_client();
    let started = Instant::now();
    let r = send(&c, get(addr, "h", "/request-timeout?delay=3s"))
        .await
        .unwrap();
    assert_eq!(r.status, 504);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(2),
        "{took:?}"
    );
    let r = send(&c, get(addr, "h", "/request-timeout?delay=10ms"))
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let r = send(&c, get(addr, "h", "/backend-timeout?delay=2s"))
        .await
        .unwrap();
    assert_eq!(r.status, 504);
    let r = send(&c, get(addr, "h", "/backend-timeout")).await.unwrap();
    assert_eq!(r.status, 200);
    let started = Instant::now();
    let r = send(&c, get(addr, "h", "/no-timeout?delay=700ms"))
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(700));
}

#[tokio::test]
async fn the_global_upstream_response_timeout_alone_gives_504() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    // A rule without `timeouts`: only the proxy-wide limit applies.
    let options = ProxyOptions {
        upstream_response_timeout: Duration::from_millis(300),
        ..test_options()
    };
    let p = start_with(
        single(
            addr,
            vec![rule("plain")
                .backend(to(&service("e", &[echo.addr])))
                .build()],
        ),
        options,
    )
    .await;
    let c = h1_client();
    let r = send(&c, get(addr, "h", "/late?delay=3s")).await.unwrap();
    assert_eq!(r.status, 504);
    let r = send(&c, get(addr, "h", "/prompt")).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.field("path").as_deref(), Some("/prompt"));
    let text = p.metrics.encode();
    assert!(
        text.contains(r#"edgeplane_request_errors_total{fault="upstream"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn echo_sets_requested_response_headers() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r").backend(to(&service("e", &[echo.addr]))).build()],
    ))
    .await;
    let req = crate::support::client::request(http::Method::GET, addr, "h", "/")
        .header("x-echo-set-header", "X-Foo: one, X-Bar: two")
        .body(crate::support::client::empty())
        .unwrap();
    let r = send(&h1_client(), req).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-foo").as_deref(), Some("one"));
    assert_eq!(r.header("x-bar").as_deref(), Some("two"));
}
