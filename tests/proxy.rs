//! The data plane end to end: real loopback sockets, echo backends, HTTP/1.1 and h2c clients,
//! route tables built by hand through the `table` API.

mod support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::time::Duration;

use bytes::Bytes;
use edgeplane::table::{
    PathMatch, PathModifier, Redirect, Regex, RuleFilters, UpstreamProtocol, UrlRewrite, ValueMatch,
};
use http::{Method, StatusCode};
use support::client::{self, get, get_h1, h1_client, send, H2c};
use support::echo::{start_echo, start_fleet};
use support::net::free_addr;
use support::proxy::{accepts, start};
use support::tables::*;

fn exact(v: &str) -> ValueMatch {
    ValueMatch::Exact(v.into())
}

#[tokio::test]
async fn routes_by_path_kind_with_precedence() {
    let fleet = start_fleet(&["root", "prefix", "exact", "regex"]).await;
    let svc: Vec<_> = fleet.iter().map(|e| service(&e.pod, &[e.addr])).collect();
    let addr = free_addr();
    let p = start(single(
        addr,
        vec![
            rule("root").backend(to(&svc[0])).build(),
            rule("prefix")
                .path(PathMatch::prefix("/api/"))
                .backend(to(&svc[1]))
                .build(),
            rule("exact")
                .path(PathMatch::Exact("/api/v1".into()))
                .backend(to(&svc[2]))
                .build(),
            rule("regex")
                .path(PathMatch::RegularExpression(
                    Regex::new("/api/v[0-9]+/items").unwrap(),
                ))
                .backend(to(&svc[3]))
                .build(),
        ],
    ))
    .await;
    let cases = [
        ("/", "root"),
        ("/apix", "root"),
        ("/api", "prefix"),
        ("/api/v2", "prefix"),
        ("/api/v1", "exact"),
        ("/api/v1/", "prefix"),
        ("/api/v7/items", "regex"),
        ("/api/v7/items/x", "prefix"),
    ];
    for (path, pod) in cases {
        let r = get_h1(addr, "any.example", path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.pod().as_deref(), Some(pod), "{path}");
        assert_eq!(r.field("path").as_deref(), Some(path));
    }
    drop(p);
}

#[tokio::test]
async fn routes_by_header_query_and_method() {
    let fleet = start_fleet(&["default", "header", "query", "method", "both"]).await;
    let svc: Vec<_> = fleet.iter().map(|e| service(&e.pod, &[e.addr])).collect();
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![
            rule("default").backend(to(&svc[0])).build(),
            rule("header")
                .header("x-version", exact("2"))
                .backend(to(&svc[1]))
                .build(),
            rule("query")
                .query(
                    "env",
                    ValueMatch::RegularExpression(Regex::new("can.*").unwrap()),
                )
                .backend(to(&svc[2]))
                .build(),
            rule("method")
                .method(Method::POST)
                .backend(to(&svc[3]))
                .build(),
            // Two header matches outrank one.
            rule("both")
                .header("x-version", exact("2"))
                .header("x-tier", exact("gold"))
                .backend(to(&svc[4]))
                .build(),
        ],
    ))
    .await;
    let c = h1_client();
    let go = |method: Method, path: &str, headers: &[(&str, &str)]| {
        let mut b = client::request(method, addr, "h.example", path);
        for (n, v) in headers {
            b = b.header(*n, *v);
        }
        send(&c, b.body(client::empty()).unwrap())
    };
    let pod = |r: client::Reply| r.pod().unwrap_or_default();
    assert_eq!(pod(go(Method::GET, "/", &[]).await.unwrap()), "default");
    assert_eq!(
        pod(go(Method::GET, "/", &[("x-version", "2")]).await.unwrap()),
        "header"
    );
    assert_eq!(
        pod(go(Method::GET, "/", &[("x-version", "3")]).await.unwrap()),
        "default"
    );
    assert_eq!(
        pod(
            go(Method::GET, "/", &[("X-Version", "2"), ("x-tier", "gold")])
                .await
                .unwrap()
        ),
        "both"
    );
    assert_eq!(
        pod(go(Method::GET, "/?a=1&env=canary", &[]).await.unwrap()),
        "query"
    );
    assert_eq!(
        pod(go(Method::GET, "/?env=prod", &[]).await.unwrap()),
        "default"
    );
    // Method outranks header matches in precedence.
    assert_eq!(
        pod(go(Method::POST, "/", &[("x-version", "2")]).await.unwrap()),
        "method"
    );
    assert_eq!(pod(go(Method::PUT, "/", &[]).await.unwrap()), "default");
}

#[tokio::test]
async fn routes_by_host_and_answers_404_when_nothing_matches() {
    let fleet = start_fleet(&["exact", "wild", "any"]).await;
    let svc: Vec<_> = fleet.iter().map(|e| service(&e.pod, &[e.addr])).collect();
    let addr = free_addr();
    let strict = free_addr();
    let p = start(table(
        1,
        vec![
            listener(
                addr,
                vec![
                    vhost(
                        "a.example.com",
                        vec![rule("exact").backend(to(&svc[0])).build()],
                    ),
                    vhost(
                        "*.example.com",
                        vec![rule("wild").backend(to(&svc[1])).build()],
                    ),
                    vhost(
                        "*",
                        vec![rule("any")
                            .path(PathMatch::prefix("/only"))
                            .backend(to(&svc[2]))
                            .build()],
                    ),
                ],
            ),
            listener(
                strict,
                vec![vhost(
                    "a.example.com",
                    vec![rule("exact").backend(to(&svc[0])).build()],
                )],
            ),
        ],
    ))
    .await;
    assert_eq!(
        get_h1(addr, "a.example.com", "/").await.pod().as_deref(),
        Some("exact")
    );
    assert_eq!(
        get_h1(addr, "A.Example.COM:8080", "/")
            .await
            .pod()
            .as_deref(),
        Some("exact")
    );
    assert_eq!(
        get_h1(addr, "b.example.com", "/").await.pod().as_deref(),
        Some("wild")
    );
    assert_eq!(
        get_h1(addr, "x.y.example.com", "/").await.pod().as_deref(),
        Some("wild")
    );
    assert_eq!(
        get_h1(addr, "other.org", "/only/x").await.pod().as_deref(),
        Some("any")
    );
    // The catch-all host has no rule for this path: 404, with a text body.
    let r = get_h1(addr, "other.org", "/elsewhere").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.body.starts_with(b"404"));
    // A listener without a catch-all never serves other hosts.
    assert_eq!(get_h1(strict, "b.example.com", "/").await.status, 404);
    assert_eq!(get_h1(strict, "a.example.com", "/").await.status, 200);
    let metrics = p.metrics.encode();
    assert!(
        metrics.contains(r#"edgeplane_requests_total{code="404",route="none"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"edgeplane_requests_total{code="200",route="default/wild"} 2"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn request_and_response_header_filters() {
    let echo = start_echo("e").await;
    let svc = service("e", &[echo.addr]);
    let mut backend = to(&svc);
    backend.filters.request_headers = Some(header_mod(&[("x-backend", "b1")], &[], &[]));
    backend.filters.response_headers = Some(header_mod(&[], &[("x-resp", "from-backend")], &[]));
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r")
            .filters(RuleFilters {
                request_headers: Some(header_mod(
                    &[("x-set", "new"), ("x-backend", "rule")],
                    &[("x-add", "added")],
                    &["x-remove"],
                )),
                response_headers: Some(header_mod(
                    &[("content-type", "text/x-set")],
                    &[("x-resp", "from-rule")],
                    &[],
                )),
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
            redirect: Some(redirect),
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
                    scheme: Some("https".into()),
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
    let rewrite = |host: Option<&str>, path: Option<PathModifier>| RuleFilters {
        rewrite: Some(UrlRewrite {
            hostname: host.map(str::to_owned),
            path,
        }),
        ..Default::default()
    };
    let mut backend_rewrite = to(&svc);
    backend_rewrite.filters.rewrite = Some(UrlRewrite {
        hostname: Some("backend.example".into()),
        path: None,
    });
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
async fn weights_split_traffic_and_zero_gets_none() {
    let fleet = start_fleet(&["three", "one", "zero"]).await;
    let svc: Vec<_> = fleet.iter().map(|e| service(&e.pod, &[e.addr])).collect();
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("split")
            .backend(weighted(&svc[0], 3))
            .backend(weighted(&svc[1], 1))
            .backend(weighted(&svc[2], 0))
            .build()],
    ))
    .await;
    let c = h1_client();
    let mut counts: HashMap<String, u32> = HashMap::new();
    const N: u32 = 400;
    for _ in 0..N {
        let r = send(&c, get(addr, "h", "/")).await.unwrap();
        assert_eq!(r.status, 200);
        *counts.entry(r.pod().unwrap_or_default()).or_default() += 1;
    }
    let three = counts.get("three").copied().unwrap_or(0);
    let one = counts.get("one").copied().unwrap_or(0);
    assert_eq!(counts.get("zero"), None, "{counts:?}");
    assert_eq!(three + one, N);
    // Expected 300 of 400; a binomial standard deviation is about 8.7, allow more than 5 of them.
    assert!((255..=345).contains(&three), "{counts:?}");
}

#[tokio::test]
async fn backend_errors_map_to_500_503_502() {
    let closed = free_addr();
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![
            rule("invalid")
                .path(PathMatch::prefix("/invalid"))
                .backend(invalid("service not found"))
                .build(),
            rule("empty").path(PathMatch::prefix("/empty")).build(),
            rule("zero")
                .path(PathMatch::prefix("/zero"))
                .backend(weighted(&service("z", &[closed]), 0))
                .build(),
            rule("noendpoints")
                .path(PathMatch::prefix("/noendpoints"))
                .backend(to(&service("none", &[])))
                .build(),
            rule("refused")
                .path(PathMatch::prefix("/refused"))
                .backend(to(&service("closed", &[closed])))
                .build(),
        ],
    ))
    .await;
    for (path, status) in [
        ("/invalid", 500),
        ("/empty", 500),
        ("/zero", 500),
        ("/noendpoints", 503),
        ("/refused", 502),
    ] {
        let r = get_h1(addr, "h", path).await;
        assert_eq!(r.status, status, "{path}");
        assert!(r.body.starts_with(status.to_string().as_bytes()), "{path}");
        assert_eq!(
            r.header("content-type").as_deref(),
            Some("text/plain; charset=utf-8")
        );
    }
}

#[tokio::test]
async fn connect_timeout_answers_504() {
    // A listener that never accepts, with its accept queue filled: further SYNs are dropped by
    // the kernel, so connecting hangs until the proxy's connect timeout.
    let ip = support::net::loopback_ip();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind((ip, 0).into()).unwrap();
    let stuck = socket.listen(1).unwrap();
    let stuck_addr = stuck.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        if let Ok(Ok(s)) = tokio::time::timeout(
            Duration::from_millis(200),
            tokio::net::TcpStream::connect(stuck_addr),
        )
        .await
        {
            fillers.push(s);
        }
    }
    let addr = free_addr();
    let mut options = support::proxy::test_options();
    options.connect_timeout = Duration::from_millis(300);
    let _p = support::proxy::start_with(
        single(
            addr,
            vec![rule("stuck")
                .backend(to(&service("s", &[stuck_addr])))
                .build()],
        ),
        options,
    )
    .await;
    let r = get_h1(addr, "h", "/").await;
    assert_eq!(r.status, StatusCode::GATEWAY_TIMEOUT, "{:?}", r.body);
    drop(stuck);
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
        .header("x-forwarded-for", "198.51.100.7")
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
    assert!(xff[0].starts_with("198.51.100.7, 127."), "{xff:?}");
}

#[tokio::test]
async fn large_request_body_streams_through() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r").backend(to(&service("e", &[echo.addr]))).build()],
    ))
    .await;
    // Streamed in chunks without a length (chunked), 4 MiB in total.
    let (tx, body) = client::channel_body();
    let req = client::request(Method::POST, addr, "h", "/upload")
        .body(body)
        .unwrap();
    let c = h1_client();
    let sending = tokio::spawn(async move {
        let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
        for _ in 0..64 {
            tx.send(chunk.clone()).await.unwrap();
        }
    });
    let r = send(&c, req).await.unwrap();
    sending.await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["bodyLength"], 4 * 1024 * 1024);
    // And with a Content-Length, over HTTP/2.
    let mut h2 = H2c::connect(addr).await.unwrap();
    let req = H2c::request(Method::PUT, "h", "/upload")
        .body(client::full(vec![b'y'; 3 * 1024 * 1024 + 7]))
        .unwrap();
    let r = h2.send(req).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["bodyLength"], 3 * 1024 * 1024 + 7);
}

#[tokio::test]
async fn h2c_client_reaches_http1_backend_and_h2c_backend() {
    let h1 = start_echo("h1").await;
    let h2 = start_echo("h2").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![
            rule("h1").backend(to(&service("h1", &[h1.addr]))).build(),
            rule("h2")
                .path(PathMatch::prefix("/h2"))
                .backend(to(&service_with("h2", &[h2.addr], UpstreamProtocol::H2c)))
                .build(),
        ],
    ))
    .await;
    let mut conn = H2c::connect(addr).await.unwrap();
    let r = conn
        .send(
            H2c::request(Method::GET, "site.example", "/x?y=1")
                .body(client::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.version, http::Version::HTTP_2);
    assert_eq!(r.pod().as_deref(), Some("h1"));
    assert_eq!(r.field("proto").as_deref(), Some("HTTP/1.1"));
    assert_eq!(r.field("host").as_deref(), Some("site.example"));
    assert_eq!(r.field("path").as_deref(), Some("/x?y=1"));
    let r = conn
        .send(
            H2c::request(Method::GET, "site.example", "/h2/z")
                .body(client::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.pod().as_deref(), Some("h2"));
    assert_eq!(r.field("proto").as_deref(), Some("HTTP/2.0"));
    assert_eq!(r.field("host").as_deref(), Some("site.example"));
    // HTTP/1.1 client to the h2c backend too.
    let r = get_h1(addr, "site.example", "/h2").await;
    assert_eq!(r.pod().as_deref(), Some("h2"));
    assert_eq!(r.field("proto").as_deref(), Some("HTTP/2.0"));
}

#[tokio::test]
async fn absolute_form_targets_become_origin_form() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    let svc = service("e", &[echo.addr]);
    let _p = start(table(
        1,
        vec![listener(
            addr,
            vec![vhost(
                "abs.example",
                vec![rule("abs").backend(to(&svc)).build()],
            )],
        )],
    ))
    .await;
    // The absolute-form authority wins over the Host header (RFC 9112 3.2.2).
    let reply = tokio::task::spawn_blocking(move || {
        raw_exchange(
            addr,
            b"GET http://abs.example/a/b?c=d HTTP/1.1\r\nHost: ignored.example\r\nConnection: close\r\n\r\n",
        )
    })
    .await
    .unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains(r#""path":"/a/b?c=d""#), "{reply}");
    assert!(reply.contains(r#""host":"abs.example""#), "{reply}");
}

/// Writes `request` on a fresh blocking connection and reads until the server closes.
fn raw_exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn malformed_requests_get_400_and_the_proxy_keeps_serving() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    let _p = start(single(
        addr,
        vec![rule("r").backend(to(&service("e", &[echo.addr]))).build()],
    ))
    .await;
    let addr2 = addr;
    let replies = tokio::task::spawn_blocking(move || {
        [
            raw_exchange(addr2, b"GARBAGE\r\n\r\n"),
            raw_exchange(addr2, b"GET / HTTP/1.1\r\nHost: h\r\nBad Header\r\n\r\n"),
            raw_exchange(
                addr2,
                b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: x\r\n\r\n",
            ),
        ]
    })
    .await
    .unwrap();
    for reply in replies {
        assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    }
    assert_eq!(get_h1(addr, "h", "/").await.status, 200);
}

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
