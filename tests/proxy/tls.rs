//! HTTPS listeners over real TLS: certificates chosen by SNI (exact, wildcard, default),
//! HTTP/1.1 and HTTP/2 through ALPN, `X-Forwarded-Proto: https`, redirects keeping the scheme,
//! 421 for a host of another listener, and certificate rotation by publishing a new table while
//! a connection stays open.

use std::net::SocketAddr;

use edgeplane::table::{ListenerTable, Redirect, RouteTable, RuleFilters};

use crate::support::echo::{start_echo, Echo};
use crate::support::net::free_addr;
use crate::support::proxy::start;
use crate::support::tables::*;
use crate::support::tls::*;

/// A table with one HTTPS socket at `addr`: every host routes to `echo`; TLS listeners as given.
fn https_table(
    generation: u64,
    addr: SocketAddr,
    echo: &Echo,
    tls: &[(Option<&str>, &TestCert)],
) -> RouteTable {
    let svc = service("web", &[echo.addr]);
    let listener = ListenerTable::new(
        addr,
        vec![edgeplane::table::SocketSource::gateway(
            "default", "gw", "https",
        )],
        vec![vhost("*", vec![rule("r").backend(to(&svc)).build()])],
    )
    .with_tls(tls_listeners(tls));
    table(generation, vec![std::sync::Arc::new(listener)])
}

#[tokio::test]
async fn sni_selects_exact_wildcard_and_default_certificates() {
    let echo = start_echo("web").await;
    let exact = self_signed(&["a.example.com"]);
    let wild = self_signed(&["*.wild.test"]);
    let fallback = self_signed(&["default.test", "other.test"]);
    let addr = free_addr();
    let _p = start(https_table(
        1,
        addr,
        &echo,
        &[
            (Some("a.example.com"), &exact),
            (Some("*.wild.test"), &wild),
            (None, &fallback),
        ],
    ))
    .await;
    let all = [&exact, &wild, &fallback];
    for (sni, want) in [
        ("a.example.com", &exact),
        ("x.wild.test", &wild),
        ("other.test", &fallback),
    ] {
        let stream = connect(addr, sni, client_config(&all, &[b"http/1.1"]))
            .await
            .unwrap_or_else(|e| panic!("handshake for {sni}: {e}"));
        assert_eq!(peer_leaf(&stream).as_ref(), Some(&want.der), "SNI {sni}");
    }
    // The client verifies the presented certificate against the SNI and its trust store.
    let r = get_tls(addr, "a.example.com", &[&exact], "a.example.com", "/p")
        .await
        .expect("verified request");
    assert_eq!(r.status, 200);
    assert_eq!(r.echoed_header("x-forwarded-proto"), vec!["https"]);
    assert_eq!(r.field("path").as_deref(), Some("/p"));
    // The default certificate is presented for any other name, and fails verification there.
    assert!(get_tls(addr, "nomatch.test", &all, "nomatch.test", "/")
        .await
        .is_err());
}

#[tokio::test]
async fn unknown_sni_without_default_certificate_fails_the_handshake() {
    let echo = start_echo("web").await;
    let cert = self_signed(&["a.example.com"]);
    let addr = free_addr();
    let _p = start(https_table(
        1,
        addr,
        &echo,
        &[(Some("a.example.com"), &cert)],
    ))
    .await;
    let err = connect(addr, "b.example.com", client_config(&[&cert], &[]))
        .await
        .expect_err("no certificate for this name");
    assert!(!err.to_string().is_empty());
    // The socket keeps serving names it has.
    let r = get_tls(addr, "a.example.com", &[&cert], "a.example.com", "/")
        .await
        .unwrap();
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn alpn_serves_http2_and_http1_over_tls() {
    let echo = start_echo("web").await;
    let cert = self_signed(&["h.example.com"]);
    let addr = free_addr();
    let _p = start(https_table(1, addr, &echo, &[(None, &cert)])).await;
    for (offer, want_alpn, want_version) in [
        (
            &[&b"h2"[..], &b"http/1.1"[..]][..],
            &b"h2"[..],
            http::Version::HTTP_2,
        ),
        (
            &[&b"http/1.1"[..]][..],
            &b"http/1.1"[..],
            http::Version::HTTP_11,
        ),
    ] {
        let stream = connect(addr, "h.example.com", client_config(&[&cert], offer))
            .await
            .unwrap();
        assert_eq!(alpn(&stream).as_deref(), Some(want_alpn));
        let mut session = Session::start(stream).await.unwrap();
        for i in 0..3 {
            let r = session
                .get("h.example.com", &format!("/{i}"))
                .await
                .unwrap();
            assert_eq!(r.status, 200);
            assert_eq!(r.version, want_version);
            assert_eq!(r.field("host").as_deref(), Some("h.example.com"));
            assert_eq!(r.echoed_header("x-forwarded-proto"), vec!["https"]);
        }
    }
}

#[tokio::test]
async fn rotation_applies_to_new_handshakes_and_keeps_open_connections() {
    let echo = start_echo("web").await;
    let old = self_signed(&["r.example.com"]);
    let new = self_signed(&["r.example.com"]);
    let addr = free_addr();
    let p = start(https_table(1, addr, &echo, &[(None, &old)])).await;
    let stream = connect(
        addr,
        "r.example.com",
        client_config(&[&old], &[b"http/1.1"]),
    )
    .await
    .unwrap();
    assert_eq!(peer_leaf(&stream).as_ref(), Some(&old.der));
    let mut session = Session::start(stream).await.unwrap();
    assert_eq!(session.get("r.example.com", "/").await.unwrap().status, 200);
    p.publish(https_table(2, addr, &echo, &[(None, &new)]))
        .await;
    // The open connection goes on with its session, on the new table.
    for _ in 0..3 {
        assert_eq!(session.get("r.example.com", "/").await.unwrap().status, 200);
    }
    // A new handshake gets the new certificate without the socket being rebound.
    let fresh = connect(addr, "r.example.com", client_config(&[&new], &[]))
        .await
        .unwrap();
    assert_eq!(peer_leaf(&fresh).as_ref(), Some(&new.der));
    assert!(connect(addr, "r.example.com", client_config(&[&old], &[]))
        .await
        .is_err());
}

#[tokio::test]
async fn host_of_another_listener_is_misdirected() {
    let echo = start_echo("web").await;
    let cert = self_signed(&["a.example.com", "b.example.com", "c.example.com"]);
    let addr = free_addr();
    let _p = start(https_table(
        1,
        addr,
        &echo,
        &[
            (Some("a.example.com"), &cert),
            (Some("b.example.com"), &cert),
            (None, &cert),
        ],
    ))
    .await;
    let stream = connect(
        addr,
        "a.example.com",
        client_config(&[&cert], &[b"http/1.1"]),
    )
    .await
    .unwrap();
    let mut session = Session::start(stream).await.unwrap();
    assert_eq!(session.get("a.example.com", "/").await.unwrap().status, 200);
    assert_eq!(session.get("b.example.com", "/").await.unwrap().status, 421);
    // c.example.com belongs to the listener without hostname, not to a.example.com's.
    assert_eq!(session.get("c.example.com", "/").await.unwrap().status, 421);
    let r = get_tls(addr, "c.example.com", &[&cert], "c.example.com", "/")
        .await
        .unwrap();
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn redirects_keep_the_https_scheme() {
    let cert = self_signed(&["r.example.com"]);
    let addr = free_addr();
    let redirect = rule("redirect")
        .filters(RuleFilters {
            redirect: Some(Box::new(Redirect {
                scheme: None,
                hostname: Some("other.example.com".into()),
                port: None,
                path: None,
                status: 302,
            })),
            ..Default::default()
        })
        .build();
    let listener = ListenerTable::new(addr, vec![], vec![vhost("*", vec![redirect])])
        .with_tls(tls_listeners(&[(None, &cert)]));
    let _p = start(table(1, vec![std::sync::Arc::new(listener)])).await;
    let r = get_tls(addr, "r.example.com", &[&cert], "r.example.com", "/x?y=1")
        .await
        .unwrap();
    assert_eq!(r.status, 302);
    assert_eq!(
        r.header("location"),
        Some(format!("https://other.example.com:{}/x?y=1", addr.port()))
    );
}
