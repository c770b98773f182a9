//! TrafficPolicy access controls through the proxy: IP allow and deny lists (also behind a
//! trusted proxy), local rate limits per client IP and per header value, basic auth with
//! bcrypt and `{SHA}` users, and a rule's policy taking precedence over its host's.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use edgeplane::proxy::ProxyOptions;
use edgeplane::table::{
    BasicAuth, IpAccess, PasswordHash, RateLimit, RateLimitKey, RequestPolicy, RouteTable,
    RuleFilters,
};
use http::Method;
use sha1::{Digest, Sha1};

use crate::support::client::{empty, get, h1_client, request, send, Reply, TestClient};
use crate::support::echo::start_echo;
use crate::support::net::free_addr;
use crate::support::proxy::{start, start_with, test_options};
use crate::support::tables::*;

/// A table whose one rule (to `backend`) carries `rule_policy`, under a catch-all host with
/// `host_policy`.
pub fn policy_table(
    addr: SocketAddr,
    backend: SocketAddr,
    rule_policy: Option<RequestPolicy>,
    host_policy: Option<RequestPolicy>,
) -> RouteTable {
    let svc = service("app", &[backend]);
    let filters = RuleFilters {
        policy: rule_policy.map(Arc::new),
        ..RuleFilters::default()
    };
    let mut host = vhost(
        "*",
        vec![rule("r").filters(filters).backend(to(&svc)).build()],
    );
    host.policy = host_policy.map(Arc::new);
    table(1, vec![listener(addr, vec![host])])
}

fn ip_policy(allow: &[&str], deny: &[&str]) -> RequestPolicy {
    let nets = |l: &[&str]| l.iter().map(|n| n.parse().unwrap()).collect();
    RequestPolicy {
        ip_access: Some(Arc::new(IpAccess {
            allow: nets(allow),
            deny: nets(deny),
            refuse_all: None,
        })),
        ..RequestPolicy::default()
    }
}

fn limit(id: &str, requests: u32, key: RateLimitKey) -> RequestPolicy {
    RequestPolicy {
        rate_limit: Some(Arc::new(RateLimit {
            id: id.into(),
            requests,
            per: Duration::from_secs(60),
            capacity: requests,
            key,
        })),
        ..RequestPolicy::default()
    }
}

pub async fn get_with(client: &TestClient, addr: SocketAddr, headers: &[(&str, &str)]) -> Reply {
    let mut req = request(Method::GET, addr, "example.com", "/");
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    send(client, req.body(empty()).unwrap())
        .await
        .expect("request completes")
}

#[tokio::test]
async fn ip_lists_allow_and_deny_the_peer() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let proxy = start(policy_table(
        addr,
        echo.addr,
        Some(ip_policy(&["127.0.0.0/8"], &[])),
        None,
    ))
    .await;
    let client = h1_client();
    assert_eq!(get_with(&client, addr, &[]).await.status, 200);
    proxy
        .publish(policy_table(
            addr,
            echo.addr,
            Some(ip_policy(&["10.0.0.0/8"], &[])),
            None,
        ))
        .await;
    assert_eq!(get_with(&client, addr, &[]).await.status, 403);
    proxy
        .publish(policy_table(
            addr,
            echo.addr,
            Some(ip_policy(&["127.0.0.0/8"], &["127.0.0.0/8"])),
            None,
        ))
        .await;
    assert_eq!(get_with(&client, addr, &[]).await.status, 403, "deny wins");
    // An untrusted peer cannot claim another address.
    let spoofed = get_with(&client, addr, &[("x-forwarded-for", "10.1.1.1")]).await;
    assert_eq!(spoofed.status, 403);
    let metrics = proxy.metrics.encode();
    assert!(
        metrics.contains("edgeplane_policy_denied_total{reason=\"ip\"} 3"),
        "{metrics}"
    );
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_forwarded_client_is_judged() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let options = ProxyOptions {
        trusted_proxies: "127.0.0.0/8".parse().unwrap(),
        ..test_options()
    };
    let policy = ip_policy(&["192.0.2.0/24"], &["192.0.2.66/32"]);
    let _proxy = start_with(policy_table(addr, echo.addr, Some(policy), None), options).await;
    let client = h1_client();
    let ok = get_with(&client, addr, &[("x-forwarded-for", "192.0.2.7")]).await;
    assert_eq!(ok.status, 200);
    let denied = get_with(&client, addr, &[("x-forwarded-for", "192.0.2.66")]).await;
    assert_eq!(denied.status, 403);
    // The nearest untrusted hop decides, not the leftmost claim.
    let chained = get_with(
        &client,
        addr,
        &[("x-forwarded-for", "192.0.2.7, 198.51.100.1, 127.0.0.9")],
    )
    .await;
    assert_eq!(chained.status, 403);
    // Without the header the trusted peer itself is the client.
    assert_eq!(get_with(&client, addr, &[]).await.status, 403);
}

#[tokio::test]
async fn the_rate_limit_answers_429_past_the_rate_with_retry_after() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let policy = RequestPolicy {
        rate_limit: Some(Arc::new(RateLimit {
            id: "default/limit-5".into(),
            requests: 5,
            per: Duration::from_secs(1),
            capacity: 5,
            key: RateLimitKey::ClientIp,
        })),
        ..RequestPolicy::default()
    };
    let proxy = start(policy_table(addr, echo.addr, Some(policy), None)).await;
    let client = h1_client();
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(get_with(&client, addr, &[]).await);
    }
    let codes: Vec<u16> = statuses.iter().map(|r| r.status.as_u16()).collect();
    // Six requests within well under a second; a slow machine may refill one token.
    assert_eq!(&codes[..5], &[200; 5], "{codes:?}");
    let last = statuses.last().unwrap();
    if last.status == 429 {
        let after: u64 = last.header("retry-after").unwrap().parse().unwrap();
        assert!(after >= 1, "{after}");
    }
    let mut limited = None;
    for _ in 0..20 {
        let r = get_with(&client, addr, &[]).await;
        if r.status == 429 {
            limited = Some(r);
            break;
        }
    }
    let limited = limited.expect("the bucket runs dry");
    assert_eq!(limited.header("retry-after").as_deref(), Some("1"));
    // A table swap keeps the bucket (same id): still limited.
    proxy
        .publish(policy_table(
            addr,
            echo.addr,
            Some(limit("default/limit-5", 5, RateLimitKey::ClientIp)),
            None,
        ))
        .await;
    assert!(proxy
        .metrics
        .encode()
        .contains("edgeplane_policy_denied_total{reason=\"rate_limit\"}"));
}

#[tokio::test]
async fn buckets_are_kept_per_header_value_and_survive_table_swaps() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let policy = limit("default/per-user", 2, RateLimitKey::Header("x-user".into()));
    let proxy = start(policy_table(addr, echo.addr, Some(policy.clone()), None)).await;
    let client = h1_client();
    for _ in 0..2 {
        assert_eq!(
            get_with(&client, addr, &[("x-user", "a")]).await.status,
            200
        );
    }
    assert_eq!(
        get_with(&client, addr, &[("x-user", "a")]).await.status,
        429
    );
    assert_eq!(
        get_with(&client, addr, &[("x-user", "b")]).await.status,
        200
    );
    // Same limit id in a new table: the bucket of `a` is still empty.
    proxy
        .publish(policy_table(addr, echo.addr, Some(policy), None))
        .await;
    assert_eq!(
        get_with(&client, addr, &[("x-user", "a")]).await.status,
        429
    );
    assert_eq!(
        get_with(&client, addr, &[("x-user", "b")]).await.status,
        200
    );
    // A changed limit is a new id with fresh buckets.
    let changed = limit(
        "default/per-user-3",
        3,
        RateLimitKey::Header("x-user".into()),
    );
    proxy
        .publish(policy_table(addr, echo.addr, Some(changed), None))
        .await;
    assert_eq!(
        get_with(&client, addr, &[("x-user", "a")]).await.status,
        200
    );
}

pub fn basic(users: BTreeMap<String, PasswordHash>) -> RequestPolicy {
    RequestPolicy {
        basic_auth: Some(Arc::new(BasicAuth::new("staff".into(), users))),
        ..RequestPolicy::default()
    }
}

pub fn credentials(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

#[tokio::test]
async fn basic_auth_accepts_bcrypt_and_sha_users_and_challenges_the_rest() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let users = BTreeMap::from([
        (
            "alice".to_owned(),
            PasswordHash::Bcrypt(bcrypt::hash("wonderland", 4).unwrap()),
        ),
        (
            "bob".to_owned(),
            PasswordHash::Sha1(Sha1::digest(b"builder").into()),
        ),
    ]);
    let _proxy = start(policy_table(addr, echo.addr, Some(basic(users)), None)).await;
    let client = h1_client();
    let alice = credentials("alice", "wonderland");
    let ok = get_with(&client, addr, &[("authorization", &alice)]).await;
    assert_eq!(ok.status, 200);
    // The credentials reach the backend unchanged.
    assert_eq!(ok.echoed_header("authorization"), vec![alice.clone()]);
    let bob = credentials("bob", "builder");
    assert_eq!(
        get_with(&client, addr, &[("authorization", &bob)])
            .await
            .status,
        200
    );
    for bad in [
        credentials("alice", "wrong"),
        credentials("bob", "wrong"),
        credentials("mallory", "builder"),
        "Basic !!!".to_owned(),
    ] {
        let r = get_with(&client, addr, &[("authorization", &bad)]).await;
        assert_eq!(r.status, 401, "{bad}");
        assert_eq!(
            r.header("www-authenticate").as_deref(),
            Some("Basic realm=\"staff\"")
        );
    }
    let missing = get_with(&client, addr, &[]).await;
    assert_eq!(missing.status, 401);
    assert_eq!(
        missing.header("www-authenticate").as_deref(),
        Some("Basic realm=\"staff\"")
    );
}

#[tokio::test]
async fn a_rules_policy_overrides_its_hosts_setting_by_setting() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    // The host denies everyone and caps bodies; the rule allows loopback and sets nothing else.
    let mut host = ip_policy(&[], &["0.0.0.0/0"]);
    host.max_request_body = Some(4);
    let rule_policy = ip_policy(&["127.0.0.0/8"], &[]);
    let _proxy = start(policy_table(addr, echo.addr, Some(rule_policy), Some(host))).await;
    let client = h1_client();
    assert_eq!(get_with(&client, addr, &[]).await.status, 200);
    let big = request(Method::POST, addr, "example.com", "/")
        .header("content-length", "5")
        .body(crate::support::client::full("12345"))
        .unwrap();
    assert_eq!(
        send(&client, big).await.unwrap().status,
        413,
        "host's body limit"
    );
    // The host's policy alone applies to a host without rule policy.
    let host_only = policy_table(addr, echo.addr, None, Some(ip_policy(&[], &["0.0.0.0/0"])));
    _proxy.publish(host_only).await;
    assert_eq!(
        send(&client, get(addr, "example.com", "/"))
            .await
            .unwrap()
            .status,
        403
    );
}
