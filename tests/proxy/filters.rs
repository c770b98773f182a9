//! Filters and header hygiene: header modifiers, redirects, URL rewrites, hop-by-hop and
//! forwarded headers.

use std::sync::Arc;

use edgeplane::proxy::ProxyOptions;
use edgeplane::table::{PathMatch, PathModifier, Redirect, RuleFilters, Scheme, UrlRewrite};
use http::{HeaderValue, Method};

use crate::support::client::{self, get_h1, h1_client, send};
use crate::support::echo::start_echo;
use crate::support::net::free_addr;
use crate::support::proxy::{start, start_with, test_options};
use crate::support::tables::*;

#[tokio::test]
async fn request_and_response_header_filters() {
    let echo = start_echo("e").await;
    let svc = service("e", &[echo.addr]);
    let mut backend = to(&svc);
    Arc::make_mut(&mut backend.filters).request_headers =
        Some(Box::new(header_mod(&[("x-backend", "b1")], &[], &[])));
    Arc::make_mut(&mut backend.filters).response_headers = Some(Box::new(header_mod(
        &[],
        &[("x-resp", "from-backend")],
        &[],
    )));
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r")
            .filters(RuleFilters {
                request_headers: Some(Box::new(header_mod(
                    &[("x-set", "new"), ("x-backend", "rule")],
                    &[("x-add", "added")],
                    &["x-remove"],
                ))),
                response_headers: Some(Box::new(header_mod(
                    &[("content-type", "text/x-set")],
                    &[("x-resp", "from-rule")],
                    &[],
                ))),
                ..Default::default()
            })
            .backend(backend)
            .build()],
    ))
    .await;
    let req = client::request(Method::GET, addr, "h", "/")
        .header("x-set", "old")
        .header("x-add", "orig")
        .header("x-remove", "gone")
        .body(client::empty())
        .unwrap();
    let r = send(&h1_client(), req).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.echoed_header("x-set"), vec!["new"]);
    assert_eq!(r.echoed_header("x-add"), vec!["orig", "added"]);
    assert!(r.echoed_header("x-remove").is_empty());
    // The backend's filter runs after the rule's.
    assert_eq!(r.echoed_header("x-backend"), vec!["b1"]);
    assert_eq!(r.header("content-type").as_deref(), Some("text/x-set"));
    let resp: Vec<_> = r.headers.get_all("x-resp").iter().collect();
    assert_eq!(resp, vec!["from-rule", "from-backend"]);
}

fn redirect_rule(
    name: &str,
    prefix: &str,
    redirect: Redirect,
) -> std::sync::Arc<edgeplane::table::RouteRule> {
    rule(name)
        .path(PathMatch::prefix(prefix))
        .filters(RuleFilters {
            redirect: Some(Box::new(redirect)),
            ..Default::default()
        })
        .build()
}

#[tokio::test]
async fn redirects_build_location_from_the_request() {
    let addr = free_addr();
    let base = || Redirect {
        scheme: None,
        hostname: None,
        port: None,
        path: None,
        status: 302,
    };
    let _p = start(single(
        addr,
        vec![
            redirect_rule("plain", "/plain", base()),
            redirect_rule(
                "https",
                "/https",
                Redirect {
                    scheme: Some(Scheme::Https),
                    status: 301,
                    ..base()
                },
            ),
            redirect_rule(
                "host",
                "/host",
                Redirect {
                    hostname: Some("other.example".into()),
                    port: Some(8443),
                    ..base()
                },
            ),
            redirect_rule(
                "prefix",
                "/old",
                Redirect {
                    path: Some(PathModifier::ReplacePrefixMatch("/new".into())),
                    status: 308,
                    ..base()
                },
            ),
            redirect_rule(
                "full",
                "/full",
                Redirect {
                    path: Some(PathModifier::ReplaceFullPath("/replaced".into())),
                    port: Some(80),
                    ..base()
                },
            ),
        ],
    ))
    .await;
    let port = addr.port();
    let cases = [
        (
            "/plain/a?q=1",
            302,
            format!("http://h.example:{port}/plain/a?q=1"),
        ),
        ("/https/a", 301, "https://h.example/https/a".to_owned()),
        ("/host", 302, "http://other.example:8443/host".to_owned()),
        (
            "/old/x/y?z",
            308,
            format!("http://h.example:{port}/new/x/y?z"),
        ),
        ("/full/deep", 302, "http://h.example/replaced".to_owned()),
    ];
    for (path, status, location) in cases {
        let r = get_h1(addr, "H.example:1234", path).await;
        assert_eq!(r.status, status, "{path}");
        assert_eq!(
            r.header("location").as_deref(),
            Some(location.as_str()),
            "{path}"
        );
    }
}

#[tokio::test]
async fn url_rewrite_host_and_path() {
    let echo = start_echo("e").await;
    let svc = service("e", &[echo.addr]);
    let rewrite = |host: Option<&'static str>, path: Option<PathModifier>| RuleFilters {
        rewrite: Some(Box::new(UrlRewrite {
            hostname: host.map(HeaderValue::from_static),
            path,
        })),
        ..Default::default()
    };
    let mut backend_rewrite = to(&svc);
    Arc::make_mut(&mut backend_rewrite.filters).rewrite = Some(Box::new(UrlRewrite {
        hostname: Some(HeaderValue::from_static("backend.example")),
        path: None,
    }));
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![
            rule("host")
                .path(PathMatch::prefix("/host"))
                .filters(rewrite(Some("rewritten.example"), None))
                .backend(to(&svc))
                .build(),
            rule("prefix")
                .path(PathMatch::prefix("/prefix/one"))
                .filters(rewrite(
                    None,
                    Some(PathModifier::ReplacePrefixMatch("/xxx".into())),
                ))
                .backend(to(&svc))
                .build(),
            rule("strip")
                .path(PathMatch::prefix("/strip"))
                .filters(rewrite(
                    None,
                    Some(PathModifier::ReplacePrefixMatch("/".into())),
                ))
                .backend(to(&svc))
                .build(),
            rule("full")
                .path(PathMatch::prefix("/full"))
                .filters(rewrite(
                    Some("full.example"),
                    Some(PathModifier::ReplaceFullPath("/one".into())),
                ))
                .backend(to(&svc))
                .build(),
            rule("per-backend")
                .path(PathMatch::prefix("/pb"))
                .backend(backend_rewrite)
                .build(),
        ],
    ))
    .await;
    let cases = [
        ("/host/a?x=1", "rewritten.example", "/host/a?x=1"),
        ("/prefix/one/three?q", "orig.example", "/xxx/three?q"),
        ("/prefix/one", "orig.example", "/xxx"),
        ("/strip/a/b", "orig.example", "/a/b"),
        ("/full/deep/path?k=v", "full.example", "/one?k=v"),
        ("/pb", "backend.example", "/pb"),
    ];
    for (path, host, upstream_path) in cases {
        let r = get_h1(addr, "orig.example", path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.field("host").as_deref(), Some(host), "{path}");
        assert_eq!(r.field("path").as_deref(), Some(upstream_path), "{path}");
        assert_eq!(
            r.echoed_header("x-forwarded-host"),
            vec!["orig.example"],
            "{path}"
        );
    }
}

#[tokio::test]
async fn hop_by_hop_removed_forwarded_set_host_kept() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r").backend(to(&service("e", &[echo.addr]))).build()],
    ))
    .await;
    let req = client::request(Method::GET, addr, "app.example:8080", "/p?q=1")
        .header("connection", "keep-alive, x-private")
        .header("x-private", "secret")
        .header("keep-alive", "timeout=5")
        .header("proxy-connection", "keep-alive")
        .header("te", "trailers")
        .header("x-custom", "kept")
        .body(client::empty())
        .unwrap();
    let r = send(&h1_client(), req).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.field("host").as_deref(), Some("app.example:8080"));
    assert_eq!(r.field("path").as_deref(), Some("/p?q=1"));
    for gone in ["x-private", "keep-alive", "proxy-connection"] {
        assert!(r.echoed_header(gone).is_empty(), "{gone} was forwarded");
    }
    assert_eq!(r.echoed_header("te"), vec!["trailers"]);
    assert_eq!(r.echoed_header("x-custom"), vec!["kept"]);
    assert_eq!(r.echoed_header("x-forwarded-proto"), vec!["http"]);
    assert_eq!(
        r.echoed_header("x-forwarded-host"),
        vec!["app.example:8080"]
    );
    // The test client connects from the loopback address the kernel picks for the proxy's IP.
    let xff = r.echoed_header("x-forwarded-for");
    assert_eq!(xff.len(), 1);
    assert!(xff[0].starts_with("127."), "{xff:?}");
}

/// Starts a proxy trusting `trusted` (comma-separated ranges) in front of an echo backend,
/// sends it a request carrying forwarded headers a client made up, once over HTTP/1.1 and once
/// over h2c, and returns both replies.
async fn send_spoofed(trusted: &str) -> Vec<client::Reply> {
    fn spoof(b: http::request::Builder) -> http::Request<client::TestBody> {
        b.header("x-forwarded-for", "198.51.100.7")
            .header("x-forwarded-for", "203.0.113.9")
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-host", "bank.example")
            .header("forwarded", "for=198.51.100.7;proto=https")
            .body(client::empty())
            .unwrap()
    }
    let echo = start_echo("e").await;
    let addr = free_addr();
    let options = ProxyOptions {
        trusted_proxies: trusted.parse().unwrap(),
        ..test_options()
    };
    let _p = start_with(
        single(
            addr,
            vec![rule("r").backend(to(&service("e", &[echo.addr]))).build()],
        ),
        options,
    )
    .await;
    let h1 = spoof(client::request(Method::GET, addr, "app.example", "/p"));
    let h1 = send(&h1_client(), h1).await.unwrap();
    let mut h2c = client::H2c::connect(addr).await.unwrap();
    let h2 = spoof(client::H2c::request(Method::GET, "app.example", "/p"));
    let h2 = h2c.send(h2).await.unwrap();
    assert_eq!(h2.version, http::Version::HTTP_2);
    vec![h1, h2]
}

#[tokio::test]
async fn untrusted_client_forwarded_headers_are_replaced() {
    // Trusted proxies exist, but the client (on 127.x) is not one of them.
    for r in send_spoofed("10.0.0.0/8,fd00::/8").await {
        assert_eq!(r.status, 200);
        let xff = r.echoed_header("x-forwarded-for");
        assert_eq!(xff.len(), 1, "{xff:?}");
        assert!(!xff[0].contains("198.51.100.7"), "{xff:?}");
        assert!(!xff[0].contains(','), "{xff:?}");
        assert!(
            xff[0]
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback()),
            "{xff:?}"
        );
        assert_eq!(r.echoed_header("x-forwarded-proto"), vec!["http"]);
        assert_eq!(r.echoed_header("x-forwarded-host"), vec!["app.example"]);
        assert!(r.echoed_header("forwarded").is_empty());
    }
}

#[tokio::test]
async fn trusted_proxy_keeps_the_chain_and_appends_its_peer() {
    for r in send_spoofed("127.0.0.1/8").await {
        assert_eq!(r.status, 200);
        let xff = r.echoed_header("x-forwarded-for");
        assert_eq!(xff.len(), 1, "{xff:?}");
        let chain: Vec<&str> = xff[0].split(", ").collect();
        assert_eq!(chain.len(), 3, "{xff:?}");
        assert_eq!(chain[..2], ["198.51.100.7", "203.0.113.9"]);
        assert!(chain[2].starts_with("127."), "{xff:?}");
        assert_eq!(r.echoed_header("x-forwarded-proto"), vec!["https"]);
        assert_eq!(r.echoed_header("x-forwarded-host"), vec!["bank.example"]);
        assert_eq!(
            r.echoed_header("forwarded"),
            vec!["for=198.51.100.7;proto=https"]
        );
    }
}
