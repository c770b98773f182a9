//! Authentication under hostile input, through the proxy: an unknown basic-auth user costs
//! the same hash verification as a known user with a wrong password (counted, not timed); the
//! bcrypt pool's worker and queue bounds refuse the excess with 503 while an unrelated route
//! and a client verified before keep being answered; a second `Authorization` header on a basic-auth or JWT route is refused
//! with 400 before any backend sees the request.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use edgeplane::metrics::Metrics;
use edgeplane::proxy::{HashLimits, ProxyOptions};
use edgeplane::table::{PasswordHash, RequestPolicy, RouteTable, RuleFilters};
use http::Method;
use serde_json::json;
use sha1::{Digest, Sha1};

use crate::policy_access::{basic, credentials, get_with, policy_table};
use crate::policy_jwt::{claims, jwt_policy};
use crate::support::client::{empty, h1_client, request, send, Reply};
use crate::support::echo::start_echo;
use crate::support::faulty::{start_faulty, Mode};
use crate::support::jwt::Issuer;
use crate::support::net::free_addr;
use crate::support::proxy::{start, start_with, test_options};
use crate::support::raw::h2_status;
use crate::support::tables::*;

fn verifications(metrics: &Metrics, kind: &str) -> u64 {
    metrics
        .basic_auth_verifications
        .with_label_values(&[kind])
        .get()
}

#[tokio::test]
async fn an_unknown_user_costs_the_verification_of_a_wrong_password() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let users = BTreeMap::from([(
        "alice".to_owned(),
        PasswordHash::Bcrypt(bcrypt::hash("wonderland", 4).unwrap()),
    )]);
    let proxy = start(policy_table(addr, echo.addr, Some(basic(users)), None)).await;
    let client = h1_client();
    let wrong = credentials("alice", "wrong");
    let r = get_with(&client, addr, &[("authorization", &wrong)]).await;
    assert_eq!(r.status, 401);
    assert_eq!(verifications(&proxy.metrics, "bcrypt"), 1);
    let unknown = credentials("mallory", "wrong");
    let r = get_with(&client, addr, &[("authorization", &unknown)]).await;
    assert_eq!(r.status, 401);
    assert_eq!(
        verifications(&proxy.metrics, "bcrypt"),
        2,
        "an unknown user verifies a bcrypt hash too"
    );
    // A realm of `{SHA}` users only: the unknown user's dummy is a `{SHA}` digest.
    let sha = BTreeMap::from([(
        "bob".to_owned(),
        PasswordHash::Sha1(Sha1::digest(b"builder").into()),
    )]);
    proxy
        .publish(policy_table(addr, echo.addr, Some(basic(sha)), None))
        .await;
    for who in ["bob", "mallory"] {
        let bad = credentials(who, "wrong");
        assert_eq!(
            get_with(&client, addr, &[("authorization", &bad)])
                .await
                .status,
            401
        );
    }
    assert_eq!(verifications(&proxy.metrics, "sha1"), 2);
    assert_eq!(verifications(&proxy.metrics, "bcrypt"), 2);
}

/// `auth.example` behind basic auth with one user at `cost`, `open.example` without policy.
fn two_hosts(addr: SocketAddr, backend: SocketAddr, cost: u32) -> RouteTable {
    let users = BTreeMap::from([(
        "alice".to_owned(),
        PasswordHash::Bcrypt(bcrypt::hash("wonderland", cost).unwrap()),
    )]);
    let svc = service("app", &[backend]);
    let guarded = RuleFilters {
        policy: Some(Arc::new(basic(users))),
        ..RuleFilters::default()
    };
    let auth = vhost(
        "auth.example",
        vec![rule("auth").filters(guarded).backend(to(&svc)).build()],
    );
    let open = vhost("open.example", vec![rule("open").backend(to(&svc)).build()]);
    table(1, vec![listener(addr, vec![auth, open])])
}

/// Waits (bounded) until the pool shows `busy` running and `queued` waiting checks.
async fn pool_reaches(metrics: &Metrics, busy: i64, queued: i64) {
    for _ in 0..1000 {
        if (
            metrics.basic_auth_busy.get(),
            metrics.basic_auth_queued.get(),
        ) == (busy, queued)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!(
        "pool never reached busy {busy}, queued {queued}: {} {}",
        metrics.basic_auth_busy.get(),
        metrics.basic_auth_queued.get()
    );
}

#[tokio::test]
async fn past_its_workers_and_queue_the_hashing_pool_answers_503_and_other_routes_answer() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let options = ProxyOptions {
        basic_auth: HashLimits {
            workers: 1,
            queue: 1,
        },
        ..test_options()
    };
    // An expensive cost: the first check holds the only worker while the test looks on.
    let proxy = start_with(two_hosts(addr, echo.addr, COST), options).await;
    let metrics = proxy.metrics.clone();
    assert!(metrics
        .encode()
        .contains("edgeplane_basic_auth_workers 1\n"));
    assert!(metrics
        .encode()
        .contains("edgeplane_basic_auth_queue_limit 1\n"));
    let wrong = credentials("alice", "wrong");
    let attempt = |wrong: String| async move {
        let client = h1_client();
        let req = request(Method::GET, addr, "auth.example", "/")
            .header("authorization", wrong)
            .body(empty())
            .unwrap();
        send(&client, req).await.expect("request completes")
    };
    // Alice logs in before the flood: her success is remembered.
    let alice = credentials("alice", "wonderland");
    assert_eq!(attempt(alice.clone()).await.status, 200);
    let first = tokio::spawn(attempt(wrong.clone()));
    pool_reaches(&metrics, 1, 0).await;
    let second = tokio::spawn(attempt(wrong.clone()));
    pool_reaches(&metrics, 1, 1).await;
    // The worker and the queue place are taken: refused at once, without a verification.
    let refused = attempt(wrong.clone()).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"));
    assert_eq!(
        refused.header("x-edgeplane-overloaded").as_deref(),
        Some("basic-auth")
    );
    assert_eq!(metrics.basic_auth_rejected.get(), 1);
    // An unrelated route needs no worker: it answers while the pool is still full.
    let req = request(Method::GET, addr, "open.example", "/")
        .body(empty())
        .unwrap();
    assert_eq!(send(&h1_client(), req).await.unwrap().status, 200);
    // Nor does a client whose credentials were verified before: no worker needed.
    assert_eq!(attempt(alice).await.status, 200);
    assert_eq!(metrics.basic_auth_queued.get(), 1, "still full");
    let (first, second): (Reply, Reply) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!((first.status.as_u16(), second.status.as_u16()), (401, 401));
    assert_eq!(
        verifications(&metrics, "bcrypt"),
        3,
        "alice once, two wrong passwords"
    );
    pool_reaches(&metrics, 0, 0).await;
    assert!(metrics
        .encode()
        .contains("edgeplane_request_errors_total{fault=\"route\"}"));
}

/// bcrypt cost of the pool test: long enough in a debug build that the first check is still
/// running when the third request arrives (the test waits on the gauges, not on a clock).
const COST: u32 = 12;

#[tokio::test]
async fn a_second_authorization_header_is_refused_before_the_backend() {
    let backend = start_faulty("b", Mode::Ok).await;
    let addr = free_addr();
    let ec = Issuer::es256("ec-1");
    let proxy = start(policy_table(
        addr,
        backend.addr,
        Some(jwt_policy(&[&ec], false)),
        None,
    ))
    .await;
    let client = h1_client();
    let valid = format!("Bearer {}", ec.token(&claims(json!({}))));
    let forged = format!("Bearer {}", ec.token(&claims(json!({}))).replace('.', "x"));
    let twice = get_with(
        &client,
        addr,
        &[("authorization", &valid), ("authorization", &forged)],
    )
    .await;
    assert_eq!(twice.status, 400);
    // The same credential twice is refused too: the rule is about the count.
    let same = get_with(
        &client,
        addr,
        &[("authorization", &valid), ("authorization", &valid)],
    )
    .await;
    assert_eq!(same.status, 400);
    // Two credentials joined into one line are no valid token: 401.
    let joined = format!("{valid}, {forged}");
    let one_line = get_with(&client, addr, &[("authorization", &joined)]).await;
    assert_eq!(one_line.status, 401);
    assert_eq!(backend.requests(), 0, "the backend never saw them");
    assert_eq!(
        get_with(&client, addr, &[("authorization", &valid)])
            .await
            .status,
        200
    );
    assert_eq!(backend.requests(), 1);
    // Basic auth: a valid user followed by anything else.
    let users = BTreeMap::from([(
        "alice".to_owned(),
        PasswordHash::Sha1(Sha1::digest(b"wonderland").into()),
    )]);
    proxy
        .publish(policy_table(addr, backend.addr, Some(basic(users)), None))
        .await;
    let alice = credentials("alice", "wonderland");
    let r = get_with(
        &client,
        addr,
        &[("authorization", &alice), ("authorization", "Basic Zm9v")],
    )
    .await;
    assert_eq!(r.status, 400);
    // Over HTTP/2 as well (two `authorization` fields in one HEADERS block).
    let fields = [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "example.com"),
        (":path", "/"),
        ("authorization", alice.as_str()),
        ("authorization", "Basic Zm9v"),
    ];
    assert_eq!(h2_status(addr, &fields).await, Some(400));
    assert_eq!(h2_status(addr, &fields[..5]).await, Some(200));
    assert_eq!(backend.requests(), 2);
    assert!(proxy
        .metrics
        .encode()
        .contains("edgeplane_policy_denied_total{reason=\"duplicate_authorization\"} 4"));
    // A route without authentication passes the header on as it came: it checks nothing.
    proxy
        .publish(policy_table(
            addr,
            backend.addr,
            Some(RequestPolicy::default()),
            None,
        ))
        .await;
    let r = get_with(
        &client,
        addr,
        &[("authorization", &alice), ("authorization", "Basic Zm9v")],
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(backend.requests(), 3);
}
