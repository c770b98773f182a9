//! The path policy over real sockets: a request is matched and forwarded with one canonical
//! path, so `/public/..`-style targets can never reach another rule's backend. Backends are
//! echo servers that report the exact path (and query) they received.

use edgeplane::proxy::ProxyOptions;
use edgeplane::request::{PathPolicy, SegmentPolicy, SlashPolicy};
use std::sync::Arc;

use edgeplane::table::{PathMatch, RouteRule};
use http::{header, Method};

use crate::support::client::{empty, H2c};
use crate::support::echo::{start_fleet, Echo};
use crate::support::net::free_addr;
use crate::support::proxy::{start_with, test_options, Running};
use crate::support::raw::{get_h1, h2_status};
use crate::support::tables::*;

/// Backends `public` and `private`, and the rules sending `/public` and `/private` to them.
async fn public_private_rules() -> (Vec<Arc<RouteRule>>, Vec<Echo>) {
    let fleet = start_fleet(&["public", "private"]).await;
    let public = service("public", &[fleet[0].addr]);
    let private = service("private", &[fleet[1].addr]);
    let rules = vec![
        rule("public")
            .path(PathMatch::prefix("/public"))
            .backend(to(&public))
            .build(),
        rule("private")
            .path(PathMatch::prefix("/private"))
            .backend(to(&private))
            .build(),
    ];
    (rules, fleet)
}

/// `/public` and `/private` to their own backends, nothing else routed.
async fn public_private(policy: PathPolicy) -> (std::net::SocketAddr, Running, Vec<Echo>) {
    let (rules, fleet) = public_private_rules().await;
    let addr = free_addr();
    let table = single(addr, rules);
    let options = ProxyOptions {
        path_policy: policy,
        ..test_options()
    };
    (addr, start_with(table, options).await, fleet)
}

const HOST: &str = "Host: site.example\r\n";

#[tokio::test]
async fn http1_paths_are_matched_and_forwarded_in_canonical_form() {
    let (addr, _p, _fleet) = public_private(PathPolicy::default()).await;
    // (target, backend, path the backend receives)
    let routed = [
        ("/public/x", "public", "/public/x"),
        ("/public/../private", "private", "/private"),
        ("/public/%2e%2e/private", "private", "/private"),
        ("/public/.%2E/private/a", "private", "/private/a"),
        ("/public/%2E./private", "private", "/private"),
        ("/public/./x/../y", "public", "/public/y"),
        ("/%70ublic/%7Euser", "public", "/public/~user"),
        ("/public/a%3fb%c3%a9", "public", "/public/a%3Fb%C3%A9"),
        (
            "/public/../private?next=/public/%2e%2e/x",
            "private",
            "/private?next=/public/%2e%2e/x",
        ),
        (
            "http://site.example/public/../private",
            "private",
            "/private",
        ),
    ];
    for (target, pod, path) in routed {
        let r = get_h1(addr, target, HOST).await;
        assert_eq!(r.status, 200, "{target}: {}", r.body);
        assert_eq!(r.pod().as_deref(), Some(pod), "{target}");
        assert_eq!(r.field("path").as_deref(), Some(path), "{target}");
    }
    let refused = [
        "/public/..%2Fprivate",
        "/public/a%2fb",
        "/public\\..\\private",
        "/public/..%5Cprivate",
        "/public;x/../private",
        "/public/..;/private",
        "/public//x",
        "//private",
        "/public/%zz",
        "/public/%2",
    ];
    for target in refused {
        let r = get_h1(addr, target, HOST).await;
        assert_eq!(r.status, 400, "{target}");
        assert_eq!(r.pod(), None, "{target} reached a backend");
    }
}

#[tokio::test]
async fn asterisk_form_only_for_options() {
    let (addr, _p, _fleet) = public_private(PathPolicy::default()).await;
    let r = crate::support::raw::send_h1(
        addr,
        b"OPTIONS * HTTP/1.1\r\nHost: site.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.pod(), None, "answered by the proxy");
    let r = get_h1(addr, "*", HOST).await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn flags_allow_or_merge_what_the_default_rejects() {
    let policy = PathPolicy {
        encoded_slash: SegmentPolicy::Allow,
        backslash: SegmentPolicy::Allow,
        path_parameters: SegmentPolicy::Allow,
        empty_segments: SlashPolicy::Merge,
    };
    let (addr, _p, _fleet) = public_private(policy).await;
    let routed = [
        ("/public//x///y", "public", "/public/x/y"),
        ("//private", "private", "/private"),
        ("/private/a%2fb", "private", "/private/a%2Fb"),
        ("/private/a;v=1/b", "private", "/private/a;v=1/b"),
        ("/private/a\\b", "private", "/private/a\\b"),
        ("/public//../private", "private", "/private"),
    ];
    for (target, pod, path) in routed {
        let r = get_h1(addr, target, HOST).await;
        assert_eq!(r.status, 200, "{target}: {}", r.body);
        assert_eq!(r.pod().as_deref(), Some(pod), "{target}");
        assert_eq!(r.field("path").as_deref(), Some(path), "{target}");
    }
    // A dot segment hidden behind an allowed separator is still refused.
    for target in [
        "/public/..;/private",
        "/public/..%2Fprivate",
        "/public\\..\\private",
    ] {
        assert_eq!(get_h1(addr, target, HOST).await.status, 400, "{target}");
    }
}

#[tokio::test]
async fn http2_paths_follow_the_same_policy() {
    let (addr, _p, _fleet) = public_private(PathPolicy::default()).await;
    let mut conn = H2c::connect(addr).await.expect("h2c connection");
    for (path, pod, seen) in [
        ("/public/../private", "private", "/private"),
        ("/public/%2e%2e/private?q=%2e", "private", "/private?q=%2e"),
        ("/public/.%2E/private", "private", "/private"),
    ] {
        let req = H2c::request(Method::GET, "site.example", path)
            .body(empty())
            .expect("request");
        let r = conn.send(req).await.expect("h2c reply");
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.pod().as_deref(), Some(pod), "{path}");
        assert_eq!(r.field("path").as_deref(), Some(seen), "{path}");
    }
    for path in ["/public/..%2Fprivate", "/public//x", "/public;x/../private"] {
        let req = H2c::request(Method::GET, "site.example", path)
            .body(empty())
            .expect("request");
        let r = conn.send(req).await.expect("h2c reply");
        assert_eq!(r.status, 400, "{path}");
    }
    // Host validation on HTTP/2: `:authority` and `Host` must agree; one of them is needed.
    let req = H2c::request(Method::GET, "site.example", "/public/x")
        .header(header::HOST, "other.example")
        .body(empty())
        .expect("request");
    assert_eq!(conn.send(req).await.expect("reply").status, 400);
    let base = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/public/x"),
    ];
    assert_eq!(
        h2_status(addr, &base).await,
        Some(400),
        "neither :authority nor Host"
    );
    let with_host = [base[0], base[1], base[2], ("host", "site.example")];
    assert_eq!(h2_status(addr, &with_host).await, Some(200), "Host alone");
    let with_authority = [base[0], base[1], (":authority", "site.example"), base[2]];
    assert_eq!(h2_status(addr, &with_authority).await, Some(200));
    let raw_dots = [
        base[0],
        base[1],
        (":authority", "site.example"),
        (":path", "/public/%2e%2e/private"),
    ];
    assert_eq!(h2_status(addr, &raw_dots).await, Some(200));
}

#[tokio::test]
async fn redirects_and_rewrites_use_the_canonical_path_and_never_inject_headers() {
    use edgeplane::table::{PathModifier, Redirect, RuleFilters, UrlRewrite};
    let fleet = start_fleet(&["app"]).await;
    let app = service("app", &[fleet[0].addr]);
    let addr = free_addr();
    let table = single(
        addr,
        vec![
            rule("redirect")
                .path(PathMatch::prefix("/old"))
                .filters(RuleFilters {
                    redirect: Some(Box::new(Redirect {
                        scheme: None,
                        hostname: None,
                        port: None,
                        path: Some(PathModifier::ReplacePrefixMatch("/new".into())),
                        status: 301,
                    })),
                    ..RuleFilters::default()
                })
                .build(),
            rule("rewrite")
                .path(PathMatch::prefix("/api"))
                .filters(RuleFilters {
                    rewrite: Some(Box::new(UrlRewrite {
                        hostname: None,
                        path: Some(PathModifier::ReplacePrefixMatch("/v2".into())),
                    })),
                    ..RuleFilters::default()
                })
                .backend(to(&app))
                .build(),
        ],
    );
    let _p = start_with(table, test_options()).await;
    let port = addr.port();
    let send = |target: &str| {
        let req =
            format!("GET {target} HTTP/1.1\r\nHost: site.example\r\nConnection: close\r\n\r\n");
        async move { crate::support::raw::send_h1(addr, req.as_bytes()).await }
    };
    // The prefix is replaced in the canonical path; escapes stay escapes; raw non-ASCII in
    // the query is percent-encoded in `Location`.
    let r = send("/x/../old/a%0d%0aSet-Cookie:%20x=1?q=\u{e9}").await;
    assert_eq!(r.status, 301, "{}", r.head);
    let location = r
        .head
        .lines()
        .find_map(|l| l.strip_prefix("location: "))
        .expect("Location header");
    assert_eq!(
        location,
        format!("http://site.example:{port}/new/a%0D%0ASet-Cookie:%20x=1?q=%C3%A9")
    );
    assert!(
        !r.head.to_ascii_lowercase().contains("\r\nset-cookie"),
        "{}",
        r.head
    );
    // A rewrite applies to the canonical path: `/old/../api/x` is `/api/x`, rewritten.
    let r = send("/old/../api/%2e/x").await;
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.field("path").as_deref(), Some("/v2/x"));
}

#[tokio::test]
async fn tls_paths_follow_the_same_policy_on_http1_and_http2() {
    use crate::support::tls::{client_config, connect, self_signed, tls_listeners, Session};
    use edgeplane::table::ListenerTable;
    let (rules, _fleet) = public_private_rules().await;
    let cert = self_signed(&["site.example"]);
    let addr = free_addr();
    let listener = ListenerTable::new(
        addr,
        vec![edgeplane::table::SocketSource::gateway(
            "default", "gw", "https",
        )],
        vec![vhost("*", rules)],
    )
    .with_tls(tls_listeners(&[(None, &cert)]));
    let _p = start_with(
        table(1, vec![std::sync::Arc::new(listener)]),
        test_options(),
    )
    .await;
    for alpn in [&b"http/1.1"[..], &b"h2"[..]] {
        let stream = connect(addr, "site.example", client_config(&[&cert], &[alpn]))
            .await
            .expect("TLS handshake");
        let mut session = Session::start(stream).await.expect("HTTP session");
        let r = session
            .get("site.example", "/public/%2e%2e/private")
            .await
            .expect("reply");
        assert_eq!(r.status, 200);
        assert_eq!(r.pod().as_deref(), Some("private"));
        assert_eq!(r.field("path").as_deref(), Some("/private"));
        let r = session
            .get("site.example", "/public/..%2Fprivate")
            .await
            .expect("reply");
        assert_eq!(r.status, 400);
    }
}
