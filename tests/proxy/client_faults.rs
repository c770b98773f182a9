//! Client faults are answered 4xx (or 501) and counted as client faults, never blamed on the
//! backend: invalid or missing Host, malformed chunked bodies, unsupported transfer codings.
//! Raw TCP sockets write the exact bytes.

use crate::support::echo::start_echo;
use crate::support::net::free_addr;
use crate::support::proxy::{start, Running};
use crate::support::raw::{get_h1, send_h1};
use crate::support::tables::*;

async fn one_backend() -> (std::net::SocketAddr, Running, crate::support::echo::Echo) {
    let echo = start_echo("app").await;
    let addr = free_addr();
    let p = start(single(
        addr,
        vec![rule("app")
            .backend(to(&service("app", &[echo.addr])))
            .build()],
    ))
    .await;
    (addr, p, echo)
}

/// `edgeplane_request_errors_total{fault}` as exposed.
fn errors(p: &Running, fault: &str) -> u64 {
    p.metrics
        .request_errors
        .get_metric_with_label_values(&[fault])
        .map(|c| c.get())
        .unwrap_or(0)
}

#[tokio::test]
async fn host_must_be_one_valid_host() {
    let (addr, p, _echo) = one_backend().await;
    let refused = [
        "Host: evil.com/x.example.com\r\n",
        "Host: a@b\r\n",
        "Host: a b\r\n",
        "Host: a\x01b\r\n",
        "Host: \r\n",
        "Host: a.example\r\nHost: b.example\r\n",
        "",
    ];
    for headers in refused {
        let r = get_h1(addr, "/", headers).await;
        assert_eq!(r.status, 400, "{headers:?}");
        assert_eq!(r.pod(), None, "{headers:?} reached the backend");
    }
    // The control character never reaches the proxy: the HTTP/1 parser refuses it (400) first.
    assert_eq!(errors(&p, "client"), refused.len() as u64 - 1);
    let r = get_h1(addr, "/", "Host: [::1]:8080\r\n").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.field("host").as_deref(), Some("[::1]:8080"));
    let r = get_h1(addr, "/", "Host: App.Example:8080\r\n").await;
    assert_eq!(r.field("host").as_deref(), Some("App.Example:8080"));
    assert_eq!(errors(&p, "upstream"), 0);
}

#[tokio::test]
async fn http10_without_host_never_gets_the_endpoint_as_host() {
    let (addr, _p, _echo) = one_backend().await;
    let r = send_h1(addr, b"GET / HTTP/1.0\r\n\r\n").await;
    assert_eq!(r.status, 400);
    assert_eq!(r.pod(), None);
}

#[tokio::test]
async fn malformed_chunked_body_is_a_client_fault() {
    let (addr, p, _echo) = one_backend().await;
    let r = send_h1(
        addr,
        b"POST /upload HTTP/1.1\r\nHost: app.example\r\nTransfer-Encoding: chunked\r\n\r\n\
          zz\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.head);
    assert_eq!(errors(&p, "client"), 1);
    assert_eq!(errors(&p, "upstream"), 0, "the backend is not blamed");
    // A well-formed chunked body still goes through.
    let r = send_h1(
        addr,
        b"POST /upload HTTP/1.1\r\nHost: app.example\r\nTransfer-Encoding: chunked\r\n\
          Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn transfer_codings_other_than_chunked_are_not_implemented() {
    let (addr, p, _echo) = one_backend().await;
    let r = send_h1(
        addr,
        b"POST / HTTP/1.1\r\nHost: app.example\r\nTransfer-Encoding: gzip, chunked\r\n\
          Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    assert_eq!(r.status, 501);
    assert_eq!(r.pod(), None);
    assert_eq!(errors(&p, "client"), 1);
    let r = send_h1(
        addr,
        b"POST / HTTP/1.1\r\nHost: app.example\r\nTransfer-Encoding: chunked\r\n\
          Content-Length: 5\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    // The HTTP/1 parser drops Content-Length when Transfer-Encoding is present (RFC 9112 6.3:
    // the body is framed by Transfer-Encoding alone); the backend gets the chunked body only.
    assert_eq!(r.status, 200, "Transfer-Encoding with Content-Length");
    let echoed: serde_json::Value = serde_json::from_str(&r.body).expect("echo JSON");
    assert_eq!(echoed["bodyLength"], 5);
    assert_eq!(errors(&p, "upstream"), 0);
}
