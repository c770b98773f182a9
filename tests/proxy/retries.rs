//! Retries against backends that fail on command: a reset on a reused pooled connection and a
//! refused connection are retried on their own; a rule's `retry` retries its statuses and
//! backend timeouts on another endpoint, never a non-idempotent request after it was sent, and
//! the retry budget stops retries from multiplying an outage (counted at the backends).

use std::net::SocketAddr;
use std::time::Duration;

use edgeplane::proxy::{BudgetLimits, ProxyOptions};
use edgeplane::table::{RetryPolicy, RuleFilters, Timeouts};
use http::Method;

use crate::support::client::{empty, full, get, h1_client, request, send};
use crate::support::faulty::{start_faulty, Mode};
use crate::support::net::free_addr;
use crate::support::proxy::{start, start_with, test_options, Running};
use crate::support::tables::*;

fn policy(codes: &[u16], attempts: u32) -> RetryPolicy {
    RetryPolicy {
        codes: codes.to_vec(),
        attempts,
        backoff: Some(Duration::from_millis(10)),
        within: None,
    }
}

/// A proxy with one rule to `endpoints` under `retry` (none: the default retries only).
async fn proxy_to(
    endpoints: &[SocketAddr],
    retry: Option<RetryPolicy>,
    timeouts: Timeouts,
    options: ProxyOptions,
) -> (SocketAddr, Running) {
    let svc = service("s", endpoints);
    let addr = free_addr();
    let filters = RuleFilters {
        retry: retry.map(Box::new),
        timeouts,
        ..Default::default()
    };
    let table = single(
        addr,
        vec![rule("r").filters(filters).backend(to(&svc)).build()],
    );
    (addr, start_with(table, options).await)
}

fn retries_metric(p: &Running, reason: &str) -> u64 {
    p.metrics
        .upstream_retries
        .with_label_values(&["default/s:80", reason])
        .get()
}

#[tokio::test]
async fn a_reset_on_a_reused_pooled_connection_is_retried_transparently() {
    let backend = start_faulty("b", Mode::ResetReused).await;
    let (addr, p) = proxy_to(&[backend.addr], None, Timeouts::default(), test_options()).await;
    let c = h1_client();
    for n in 0..3 {
        let req = request(Method::GET, addr, "h", &format!("/{n}?q={n}"))
            .header("x-probe", format!("probe-{n}"))
            .body(empty())
            .expect("request");
        let r = send(&c, req).await.expect("response");
        assert_eq!(r.status, 200, "request {n}: {:?}", r.body);
    }
    // The 2nd and 3rd went out on the pooled connection, were reset, and went again.
    assert_eq!(backend.requests(), 5);
    assert_eq!(retries_metric(&p, "error"), 2);
    // Each went again as it was sent the first time: the same target and headers (the
    // request id and `traceparent` included), nothing lost or added.
    let heads = backend.heads();
    assert_eq!(heads.len(), 5);
    for (n, (reset, again)) in [(1, (1, 2)), (2, (3, 4))] {
        assert!(
            heads[reset].starts_with(&format!("get /{n}?q={n} http/1.1\r\n")),
            "{}",
            heads[reset]
        );
        assert!(heads[reset].contains(&format!("x-probe: probe-{n}\r\n")));
        assert_eq!(heads[again], heads[reset]);
    }
}

#[tokio::test]
async fn a_refused_connection_goes_to_another_endpoint_on_any_method() {
    let good = start_faulty("good", Mode::Ok).await;
    let refused = free_addr();
    let (addr, p) = proxy_to(
        &[refused, good.addr],
        None,
        Timeouts::default(),
        test_options(),
    )
    .await;
    let c = h1_client();
    for n in 0..20 {
        let req = request(Method::POST, addr, "h", "/")
            .body(full("payload"))
            .expect("request");
        let r = send(&c, req).await.expect("response");
        assert_eq!(r.status, 200, "request {n}");
        assert_eq!(r.body, "good");
    }
    assert_eq!(good.requests(), 20);
    assert!(
        retries_metric(&p, "unsent") > 0,
        "some picks hit the refused endpoint"
    );
}

#[tokio::test]
async fn listed_statuses_are_retried_on_another_endpoint_up_to_the_attempts() {
    let failing = start_faulty("failing", Mode::Status(503)).await;
    let good = start_faulty("good", Mode::Ok).await;
    let (addr, _p) = proxy_to(
        &[failing.addr, good.addr],
        Some(policy(&[503], 2)),
        Timeouts::default(),
        test_options(),
    )
    .await;
    let c = h1_client();
    for _ in 0..10 {
        let r = send(&c, get(addr, "h", "/")).await.expect("response");
        assert_eq!(r.status, 200);
    }
    // A retry never returns to the endpoint that just failed.
    assert!(failing.requests() <= 10, "{}", failing.requests());
    // With every endpoint failing, 1 + attempts tries, then the last answer.
    good.set(Mode::Status(503));
    let before = failing.requests() + good.requests();
    let r = send(&c, get(addr, "h", "/")).await.expect("response");
    assert_eq!(r.status, 503);
    assert_eq!(failing.requests() + good.requests() - before, 3);
    // Unlisted statuses are not retried.
    good.set(Mode::Status(500));
    failing.set(Mode::Status(500));
    let before = failing.requests() + good.requests();
    let r = send(&c, get(addr, "h", "/")).await.expect("response");
    assert_eq!(r.status, 500);
    assert_eq!(failing.requests() + good.requests() - before, 1);
}

#[tokio::test]
async fn a_sent_post_is_not_retried_but_a_get_is() {
    let failing = start_faulty("failing", Mode::Status(503)).await;
    let (addr, _p) = proxy_to(
        &[failing.addr],
        Some(policy(&[503], 3)),
        Timeouts::default(),
        test_options(),
    )
    .await;
    let c = h1_client();
    let req = request(Method::POST, addr, "h", "/")
        .body(full("x"))
        .expect("request");
    assert_eq!(send(&c, req).await.expect("response").status, 503);
    assert_eq!(failing.requests(), 1, "POST is not idempotent");
    let r = send(&c, get(addr, "h", "/")).await.expect("response");
    assert_eq!(r.status, 503);
    assert_eq!(
        failing.requests(),
        1 + 4,
        "GET: the first try and 3 retries"
    );
}

#[tokio::test]
async fn a_backend_timeout_is_retried_and_the_request_timeout_bounds_all_tries() {
    let slow = start_faulty("slow", Mode::Hang).await;
    let good = start_faulty("good", Mode::Ok).await;
    let timeouts = Timeouts {
        request: Some(Duration::from_secs(3)),
        backend_request: Some(Duration::from_millis(200)),
    };
    let (addr, p) = proxy_to(
        &[slow.addr, good.addr],
        Some(policy(&[500], 2)),
        timeouts,
        test_options(),
    )
    .await;
    let c = h1_client();
    for _ in 0..6 {
        let r = send(&c, get(addr, "h", "/")).await.expect("response");
        assert_eq!(r.status, 200);
    }
    assert!(retries_metric(&p, "timeout") > 0 || slow.requests() == 0);
    // Every endpoint hangs: 504 once the tries are spent, well within the request timeout.
    good.set(Mode::Hang);
    let started = std::time::Instant::now();
    let r = send(&c, get(addr, "h", "/")).await.expect("response");
    assert_eq!(r.status, 504);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn the_retry_budget_keeps_retries_from_multiplying_an_outage() {
    // Every request fails, late, so all of them are active when they fail.
    let backend = start_faulty("down", Mode::Late(Duration::from_millis(300), 503)).await;
    let mut options = test_options();
    options.retry_budget = BudgetLimits {
        percent: 20,
        min_concurrent: 1,
    };
    let (addr, p) = proxy_to(
        &[backend.addr],
        Some(policy(&[503], 3)),
        Timeouts::default(),
        options,
    )
    .await;
    let c = h1_client();
    let requests = (0..10).map(|_| send(&c, get(addr, "h", "/")));
    for reply in futures_util::future::join_all(requests).await {
        assert_eq!(reply.expect("response").status, 503);
    }
    // Without a budget: 10 x (1 + 3) = 40 backend requests. With 20% of 10 active requests
    // (2 retries in flight, at least 1), far fewer.
    let seen = backend.requests();
    assert!(seen < 25, "{seen} backend requests");
    assert!(retries_metric(&p, "budget_exhausted") > 0);
}

#[tokio::test]
async fn no_retry_without_a_policy_when_the_backend_answered() {
    let failing = start_faulty("failing", Mode::Status(503)).await;
    let svc = service("s", &[failing.addr]);
    let addr = free_addr();
    let _p = start(single(addr, vec![rule("r").backend(to(&svc)).build()])).await;
    let r = send(&h1_client(), get(addr, "h", "/"))
        .await
        .expect("response");
    assert_eq!(r.status, 503);
    assert_eq!(failing.requests(), 1);
}
