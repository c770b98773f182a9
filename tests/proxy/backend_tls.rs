//! TLS to backends (BackendTLSPolicy) over real TLS: the proxy verifies the backend's
//! certificate against the policy's CA and names (hostname, or subjectAltNames of type
//! Hostname and URI), sends the hostname as SNI, presents the Gateway's client certificate
//! when it has one, speaks HTTP/1.1 or HTTP/2 (ALPN) over the session, and answers 502 when
//! the backend cannot be verified or the policy cannot be used: never cleartext instead. An
//! external authorizer under a policy is reached the same way.

use std::net::SocketAddr;
use std::sync::Arc;

use edgeplane::devtools::echo::EchoIdentity;
use edgeplane::devtools::echo_tls::{serve_echo_tls, server_config};
use edgeplane::table::{
    BackendIdentity, BackendTls, BackendTlsEntry, CaBundle, Certificate, ListenerTable, RouteTable,
    ServiceBackend, SubjectAltName, UpstreamProtocol,
};
use tokio::net::TcpListener;

use crate::support::client::get_h1;
use crate::support::net::free_addr;
use crate::support::proxy::start;
use crate::support::tables::*;
use crate::support::tls::TestCa;

/// A TLS echo backend with a certificate of `ca` for `abc.example.com` and a SPIFFE URI,
/// requiring a client certificate of `client_ca` when given.
async fn tls_backend(ca: &TestCa, client_ca: Option<&TestCa>) -> SocketAddr {
    let (cert, key) = ca.issue_pem(&["abc.example.com"], &["spiffe://abc.example.com/backend"]);
    let client_ca = client_ca.map(|c| c.cert_pem.clone());
    let config = server_config(
        cert.as_bytes(),
        key.as_bytes(),
        client_ca.as_deref().map(str::as_bytes),
    )
    .expect("backend TLS configuration");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let identity = EchoIdentity {
        pod: "tls-backend".into(),
        namespace: "default".into(),
    };
    tokio::spawn(serve_echo_tls(listener, identity, None, config));
    addr
}

/// A policy trusting `ca`, for `hostname` (and `sans`, when given).
fn policy(ca: &TestCa, hostname: &str, sans: Vec<SubjectAltName>) -> Arc<BackendTlsEntry> {
    let bundle = CaBundle::from_pem(ca.cert_pem.as_bytes()).expect("CA bundle");
    let tls = BackendTls::new(
        "default/policy".into(),
        hostname.into(),
        sans,
        vec!["ConfigMap default/ca".into()],
        &[bundle],
    )
    .expect("policy");
    Arc::new(BackendTlsEntry::Ready(tls))
}

/// One HTTP listener at `addr` routing everything to `backend` (with `protocol`), the Service
/// port under `entry`, and the listener presenting `identity` to TLS backends.
fn tls_table(
    addr: SocketAddr,
    backend: SocketAddr,
    protocol: UpstreamProtocol,
    entry: Arc<BackendTlsEntry>,
    identity: Option<Arc<BackendIdentity>>,
) -> RouteTable {
    let svc: Arc<ServiceBackend> = service_with("secure", &[backend], protocol);
    let mut listener = ListenerTable::new(
        addr,
        vec![edgeplane::table::SocketSource::gateway(
            "default", "gw", "http",
        )],
        vec![vhost("*", vec![rule("r").backend(to(&svc)).build()])],
    );
    listener.backend_identity = identity;
    let mut t = table(1, vec![Arc::new(listener)]);
    t.backend_tls.insert(svc.service.clone(), entry);
    t
}

#[tokio::test]
async fn verified_backends_are_reached_over_tls_with_the_policy_hostname_as_sni() {
    let ca = TestCa::new("backend CA");
    let backend = tls_backend(&ca, None).await;
    for protocol in [UpstreamProtocol::Http1, UpstreamProtocol::H2c] {
        let addr = free_addr();
        let _p = start(tls_table(
            addr,
            backend,
            protocol,
            policy(&ca, "abc.example.com", vec![]),
            None,
        ))
        .await;
        let r = get_h1(addr, "site.test", "/p").await;
        assert_eq!(r.status, 200, "{protocol:?}");
        let json = r.json();
        assert_eq!(json["tls"]["serverName"], "abc.example.com");
        let proto = if protocol == UpstreamProtocol::H2c {
            "HTTP/2.0"
        } else {
            "HTTP/1.1"
        };
        assert_eq!(json["proto"], proto);
        assert_eq!(json["host"], "site.test");
    }
}

#[tokio::test]
async fn backends_that_do_not_verify_are_answered_502() {
    let ca = TestCa::new("backend CA");
    let other = TestCa::new("another CA");
    let backend = tls_backend(&ca, None).await;
    let cases = [
        (
            "hostname not in the certificate",
            policy(&ca, "mismatch.example.com", vec![]),
        ),
        ("another CA", policy(&other, "abc.example.com", vec![])),
        (
            "subjectAltName hostname not in the certificate",
            policy(
                &ca,
                "abc.example.com",
                vec![SubjectAltName::Hostname("dce.example.com".into())],
            ),
        ),
        (
            "subjectAltName URI not in the certificate",
            policy(
                &ca,
                "abc.example.com",
                vec![SubjectAltName::Uri("spiffe://def.example.com/x".into())],
            ),
        ),
        (
            "unusable policy",
            Arc::new(BackendTlsEntry::Unusable {
                policy: "default/policy".into(),
                reason: "no usable CA certificate".into(),
            }),
        ),
    ];
    for (what, entry) in cases {
        let addr = free_addr();
        let _p = start(tls_table(
            addr,
            backend,
            UpstreamProtocol::Http1,
            entry,
            None,
        ))
        .await;
        assert_eq!(get_h1(addr, "site.test", "/").await.status, 502, "{what}");
    }
    // A URI subjectAltName the certificate carries verifies, whatever the hostname.
    let addr = free_addr();
    let uri = SubjectAltName::Uri("spiffe://abc.example.com/backend".into());
    let entry = policy(&ca, "other.example.com", vec![uri]);
    let _p = start(tls_table(
        addr,
        backend,
        UpstreamProtocol::Http1,
        entry,
        None,
    ))
    .await;
    let r = get_h1(addr, "site.test", "/").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["tls"]["serverName"], "other.example.com");
}

#[tokio::test]
async fn the_gateway_client_certificate_is_presented_to_backends_that_require_one() {
    let ca = TestCa::new("backend CA");
    let client_ca = TestCa::new("client CA");
    let backend = tls_backend(&ca, Some(&client_ca)).await;
    let (cert_pem, key_pem) = client_ca.issue_pem(&["gateway.example.com"], &[]);
    let certificate = Certificate::from_pem(
        "default/client".into(),
        cert_pem.as_bytes(),
        key_pem.as_bytes(),
    )
    .expect("client certificate");
    let identity = Arc::new(BackendIdentity::new(&certificate));
    let addr = free_addr();
    let entry = policy(&ca, "abc.example.com", vec![]);
    let _p = start(tls_table(
        addr,
        backend,
        UpstreamProtocol::Http1,
        entry.clone(),
        Some(identity),
    ))
    .await;
    let r = get_h1(addr, "site.test", "/").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["tls"]["peerCertificates"][0], cert_pem.as_str());
    // Without the certificate the backend refuses the session.
    let addr = free_addr();
    let _p = start(tls_table(
        addr,
        backend,
        UpstreamProtocol::Http1,
        entry,
        None,
    ))
    .await;
    assert_eq!(get_h1(addr, "site.test", "/").await.status, 502);
}

/// An external authorizer behind a BackendTLSPolicy is asked over TLS, verified like any
/// backend: the TLS echo allows (2xx) when its certificate verifies, and a policy trusting
/// another CA makes the check fail closed (403) rather than go in cleartext.
#[tokio::test]
async fn external_authorizers_are_reached_over_tls_by_backend_tls_policy() {
    use edgeplane::table::{
        AuthBackend, AuthPath, AuthProtocol, ExternalAuth, FailureMode, HeaderSelection,
        RuleFilters,
    };
    let ca = TestCa::new("authorizer CA");
    let other = TestCa::new("another CA");
    let authorizer = tls_backend(&ca, None).await;
    let web = crate::support::echo::start_echo("web").await;
    for (trusted, want) in [(&ca, 200), (&other, 403)] {
        let addr = free_addr();
        let authz = service_with("authz", &[authorizer], UpstreamProtocol::Http1);
        let app = service("web", &[web.addr]);
        let auth = ExternalAuth {
            protocol: AuthProtocol::Http,
            backend: AuthBackend::Service(authz.clone()),
            path: AuthPath::Prefix("/check".into()),
            request_headers: HeaderSelection::Only(Vec::new()),
            response_headers: HeaderSelection::Only(Vec::new()),
            method: None,
            signin: None,
            original_headers: false,
            timeout: std::time::Duration::from_secs(5),
            failure: FailureMode::default(),
            forward_body: 0,
            source: "test".into(),
        };
        let filters = RuleFilters {
            external_auth: Some(Box::new(vec![Arc::new(auth)])),
            ..Default::default()
        };
        let rule = rule("r").filters(filters).backend(to(&app)).build();
        let l = ListenerTable::new(
            addr,
            vec![edgeplane::table::SocketSource::gateway(
                "default", "gw", "http",
            )],
            vec![vhost("*", vec![rule])],
        );
        let mut t = table(1, vec![Arc::new(l)]);
        t.backend_tls.insert(
            authz.service.clone(),
            policy(trusted, "abc.example.com", vec![]),
        );
        let _p = start(t).await;
        let r = get_h1(addr, "site.test", "/p").await;
        assert_eq!(r.status, want);
        if want == 200 {
            assert_eq!(r.pod().as_deref(), Some("web"));
        }
    }
}
