//! The CORS filter: preflights are answered by the proxy without a backend, allowed origins get
//! the response headers on actual requests, other origins get none.

use edgeplane::table::{Cors, CorsList, OriginPattern, RuleFilters};
use http::Method;

use crate::support::client::{self, h1_client, send, Reply};
use crate::support::echo::start_echo;
use crate::support::net::free_addr;
use crate::support::proxy::start;
use crate::support::tables::*;

fn list(items: &[&str]) -> Option<CorsList> {
    CorsList::new(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
}

fn cors() -> Cors {
    Cors {
        allow_origins: ["https://www.foo.com", "https://*.bar.com"]
            .iter()
            .map(|o| OriginPattern::parse(o).unwrap())
            .collect(),
        allow_methods: list(&["GET", "OPTIONS"]),
        allow_headers: list(&["x-header-1", "x-header-2"]),
        expose_headers: list(&["x-header-3", "x-header-4"]),
        max_age: 3600,
        allow_credentials: true,
    }
}

async fn call(
    addr: std::net::SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let mut req = client::request(method, addr, "cors.example", path);
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    send(&h1_client(), req.body(client::empty()).unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn preflight_is_answered_without_the_backend() {
    let echo = start_echo("e").await;
    let addr = free_addr();
    let filters = || RuleFilters {
        cors: Some(Box::new(cors())),
        ..Default::default()
    };
    let _p = start(single(
        addr,
        vec![
            rule("live")
                .path(edgeplane::table::PathMatch::prefix("/cors"))
                .filters(filters())
                .backend(to(&service("e", &[echo.addr])))
                .build(),
            // No endpoints: anything forwarded would get 503.
            rule("down")
                .path(edgeplane::table::PathMatch::prefix("/down"))
                .filters(filters())
                .backend(to(&service("down", &[])))
                .build(),
        ],
    ))
    .await;
    let preflight = [
        ("origin", "https://api.bar.com"),
        ("access-control-request-method", "GET"),
        ("access-control-request-headers", "x-header-1, x-header-2"),
    ];
    let r = call(addr, Method::OPTIONS, "/down", &preflight).await;
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
    assert_eq!(
        r.header("access-control-allow-origin").as_deref(),
        Some("https://api.bar.com")
    );
    assert_eq!(
        r.header("access-control-allow-methods").as_deref(),
        Some("GET, OPTIONS")
    );
    assert_eq!(
        r.header("access-control-allow-headers").as_deref(),
        Some("x-header-1, x-header-2")
    );
    assert_eq!(
        r.header("access-control-expose-headers").as_deref(),
        Some("x-header-3, x-header-4")
    );
    assert_eq!(r.header("access-control-max-age").as_deref(), Some("3600"));
    assert_eq!(
        r.header("access-control-allow-credentials").as_deref(),
        Some("true")
    );
    // A foreign origin's preflight is answered too, without any CORS header.
    let r = call(
        addr,
        Method::OPTIONS,
        "/down",
        &[
            ("origin", "https://evil.example"),
            ("access-control-request-method", "GET"),
        ],
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r
        .headers
        .keys()
        .all(|k| !k.as_str().starts_with("access-control-")));
    // An OPTIONS without Access-Control-Request-Method is an ordinary request: forwarded.
    let r = call(
        addr,
        Method::OPTIONS,
        "/down",
        &[("origin", "https://www.foo.com")],
    )
    .await;
    assert_eq!(r.status, 503);

    // Actual requests reach the backend and get the origin headers.
    let r = call(
        addr,
        Method::GET,
        "/cors",
        &[("origin", "https://www.foo.com")],
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.pod().as_deref(), Some("e"));
    assert_eq!(
        r.header("access-control-allow-origin").as_deref(),
        Some("https://www.foo.com")
    );
    assert_eq!(
        r.header("access-control-allow-credentials").as_deref(),
        Some("true")
    );
    assert_eq!(
        r.header("access-control-expose-headers").as_deref(),
        Some("x-header-3, x-header-4")
    );
    assert!(r.header("access-control-max-age").is_none());
    let r = call(
        addr,
        Method::GET,
        "/cors",
        &[("origin", "http://www.foo.com")],
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.header("access-control-allow-origin").is_none());
    let r = call(addr, Method::GET, "/cors", &[]).await;
    assert!(r.header("access-control-allow-origin").is_none());
}
