//! Routing: each matcher kind, precedence, hosts, weights, and the error statuses.

use std::collections::HashMap;
use std::time::Duration;

use edgeplane::table::{PathMatch, Regex, ValueMatch};
use http::{Method, StatusCode};

use crate::support;
use crate::support::client::{self, get, get_h1, h1_client, send};
use crate::support::echo::start_fleet;
use crate::support::net::free_addr;
use crate::support::proxy::{metric_sum, start};
use crate::support::tables::*;

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
    let unmatched = [
        r#"code="404""#,
        r#"route="""#,
        r#"rule="""#,
        r#"backend="""#,
    ];
    assert_eq!(
        metric_sum(&metrics, "edgeplane_requests_total", &unmatched),
        2.0,
        "{metrics}"
    );
    let wild = [
        r#"gateway="default/gw""#,
        r#"route="HTTPRoute/default/wild""#,
        r#"rule="0""#,
        r#"backend="default/wild:80""#,
        r#"method="GET""#,
    ];
    let ok = [&wild[..], &[r#"code="200""#]].concat();
    assert_eq!(
        metric_sum(&metrics, "edgeplane_requests_total", &ok),
        2.0,
        "{metrics}"
    );
    assert_eq!(
        metric_sum(&metrics, "edgeplane_request_duration_seconds_count", &ok),
        2.0,
        "{metrics}"
    );
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
