//! Client-certificate validation on HTTPS listeners over real TLS: a certificate
//! from the trusted CA is served, one from another CA or none is refused (`AllowValidOnly`) or
//! served anyway (`AllowInsecureFallback`), and a connection made to a listener without
//! validation cannot reach the hosts of a listener that validates (421).

use std::net::SocketAddr;
use std::sync::Arc;

use edgeplane::table::{
    CaBundle, ClientValidation, ListenerTable, RouteTable, TlsListener, TlsListeners,
    ValidationMode,
};

use crate::support::client::BoxError;
use crate::support::echo::{start_echo, Echo};
use crate::support::net::free_addr;
use crate::support::proxy::start;
use crate::support::tables::*;
use crate::support::tls::*;

/// One HTTPS socket: `secure.test` validates client certificates against `ca` in `mode`;
/// `open.test` (when `open` is set) asks for none. Every host routes to `echo`.
fn mtls_table(
    addr: SocketAddr,
    echo: &Echo,
    server: &TestCert,
    ca: &TestCa,
    mode: ValidationMode,
    open: bool,
) -> RouteTable {
    let bundle = CaBundle::from_pem(ca.cert_pem.as_bytes()).expect("CA bundle");
    let validation =
        ClientValidation::new(vec!["ConfigMap default/ca".into()], &[bundle], mode).unwrap();
    let mut tls = vec![TlsListener::new(
        Some("secure.test".into()),
        "default/gw/secure".into(),
        server.certificate("default/cert"),
        Some(Arc::new(validation)),
        true,
    )
    .unwrap()];
    if open {
        tls.push(
            TlsListener::new(
                Some("open.test".into()),
                "default/gw/open".into(),
                server.certificate("default/cert"),
                None,
                true,
            )
            .unwrap(),
        );
    }
    let svc = service("web", &[echo.addr]);
    let listener = ListenerTable::new(
        addr,
        vec![edgeplane::table::SocketSource::gateway(
            "default", "gw", "secure",
        )],
        vec![
            vhost("secure.test", vec![rule("s").backend(to(&svc)).build()]),
            vhost("open.test", vec![rule("o").backend(to(&svc)).build()]),
        ],
    )
    .with_tls(TlsListeners::new(tls));
    table(1, vec![Arc::new(listener)])
}

/// `GET /` to `host` over TLS with SNI `host`, presenting `identity` if given; the status, or
/// the error of the handshake or the request.
async fn get(
    addr: SocketAddr,
    server: &TestCert,
    host: &str,
    identity: Option<&ClientIdentity>,
    alpn: &[u8],
) -> Result<u16, BoxError> {
    let config = match identity {
        Some(id) => client_config_with_identity(&[server], &[alpn], id),
        None => client_config(&[server], &[alpn]),
    };
    let stream = connect(addr, host, config).await?;
    let reply = Session::start(stream).await?.get(host, "/").await?;
    Ok(reply.status.as_u16())
}

#[tokio::test]
async fn valid_only_serves_certificates_of_the_trusted_ca_and_refuses_the_rest() {
    let echo = start_echo("web").await;
    let server = self_signed(&["secure.test", "open.test"]);
    let ca = TestCa::new("trusted");
    let other = TestCa::new("other");
    let addr = free_addr();
    let _p = start(mtls_table(
        addr,
        &echo,
        &server,
        &ca,
        ValidationMode::AllowValidOnly,
        false,
    ))
    .await;
    let good = ca.issue("client.test");
    let foreign = other.issue("client.test");
    for alpn in [&b"http/1.1"[..], b"h2"] {
        assert_eq!(
            get(addr, &server, "secure.test", Some(&good), alpn)
                .await
                .unwrap(),
            200
        );
        assert!(
            get(addr, &server, "secure.test", Some(&foreign), alpn)
                .await
                .is_err(),
            "a certificate of another CA is refused"
        );
        assert!(
            get(addr, &server, "secure.test", None, alpn).await.is_err(),
            "no certificate is refused"
        );
    }
}

#[tokio::test]
async fn insecure_fallback_serves_every_client() {
    let echo = start_echo("web").await;
    let server = self_signed(&["secure.test"]);
    let ca = TestCa::new("trusted");
    let other = TestCa::new("other");
    let addr = free_addr();
    let _p = start(mtls_table(
        addr,
        &echo,
        &server,
        &ca,
        ValidationMode::AllowInsecureFallback,
        false,
    ))
    .await;
    let good = ca.issue("client.test");
    let foreign = other.issue("client.test");
    for identity in [Some(&good), Some(&foreign), None] {
        let status = get(addr, &server, "secure.test", identity, b"http/1.1")
            .await
            .unwrap();
        assert_eq!(status, 200);
    }
}

#[tokio::test]
async fn a_session_without_a_certificate_cannot_reach_a_validating_listener() {
    let echo = start_echo("web").await;
    let server = self_signed(&["secure.test", "open.test"]);
    let ca = TestCa::new("trusted");
    let addr = free_addr();
    let _p = start(mtls_table(
        addr,
        &echo,
        &server,
        &ca,
        ValidationMode::AllowValidOnly,
        true,
    ))
    .await;
    assert_eq!(
        get(addr, &server, "open.test", None, b"http/1.1")
            .await
            .unwrap(),
        200
    );
    // Same connection (SNI open.test, no certificate), Host of the validating listener.
    let stream = connect(addr, "open.test", client_config(&[&server], &[b"h2"]))
        .await
        .unwrap();
    let mut session = Session::start(stream).await.unwrap();
    let reply = session.get("secure.test", "/").await.unwrap();
    assert_eq!(reply.status, 421);
}
