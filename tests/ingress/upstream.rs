//! `backend-protocol` and `proxy-ssl-*` through `serve --config-dir`: an HTTPS backend with a
//! certificate no one trusts is reached (ingress-nginx does not verify by default), a GRPCS
//! backend is reached over HTTP/2 on TLS with its certificate checked against the CA of
//! `proxy-ssl-secret` for `proxy-ssl-name` (sent as SNI), a backend whose certificate does not
//! verify is answered 502, and an H2C backend is spoken to in HTTP/2 without TLS. A backend
//! requiring a client certificate gets the `tls.crt` of `proxy-ssl-secret`, verified or not;
//! a `proxy-ssl-secret` naming no Secret is reported in the Ingress's status.

use std::net::SocketAddr;

use edgeplane::devtools::echo::EchoIdentity;
use edgeplane::devtools::echo_tls::{serve_echo_tls, server_config};
use tokio::net::TcpListener;

use crate::standalone::{ingress_status, serve};
use crate::support::client::{get, h1_client, send, Reply, TestClient};
use crate::support::echo::start_echo;
use crate::support::tls::TestCa;

const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
    metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}\n";

/// A TLS echo backend with a certificate of `ca` for `abc.example.com`.
async fn tls_backend(ca: &TestCa) -> SocketAddr {
    let (cert, key) = ca.issue_pem(&["abc.example.com"], &[]);
    let config = server_config(cert.as_bytes(), key.as_bytes(), None).expect("TLS config");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let identity = EchoIdentity {
        pod: "tls-backend".into(),
        namespace: "default".into(),
    };
    tokio::spawn(serve_echo_tls(listener, identity, None, config));
    addr
}

/// Service `name` port 443 to `addr`.
fn service(name: &str, addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n\
         spec: {{ports: [{{name: https, port: 443, targetPort: {port}}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: {name}-1, labels: {{kubernetes.io/service-name: {name}}}}}\n\
         addressType: IPv4\nports: [{{name: https, port: {port}}}]\n\
         endpoints: [{{addresses: [\"{ip}\"], conditions: {{ready: true}}}}]\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

/// Ingress `name` for host `<name>.test`, `/` to Service `name` port 443.
fn ingress(name: &str, annotations: &[(&str, &str)]) -> String {
    let notes: String = annotations
        .iter()
        .map(|(k, v)| format!("    nginx.ingress.kubernetes.io/{k}: {v:?}\n"))
        .collect();
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
         annotations:\n{notes}spec:\n  ingressClassName: edge\n  rules:\n  - host: {name}.test\n    \
         http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: {name}, \
         port: {{number: 443}}}}}}}}\n"
    )
}

/// Secret `name` holding the CA certificate of `ca` as `ca.crt`.
fn ca_secret(name: &str, ca: &TestCa) -> String {
    let indent = |pem: &str| {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}}}\n\
         stringData:\n  ca.crt: |\n{}",
        indent(&ca.cert_pem)
    )
}

async fn call(client: &TestClient, addr: SocketAddr, host: &str) -> Reply {
    send(client, get(addr, host, "/p"))
        .await
        .expect("request through edgeplane")
}

#[tokio::test]
async fn backend_protocols_and_backend_tls_reach_the_backends_as_asked() {
    let ca = TestCa::new("backend CA");
    let other = TestCa::new("someone else");
    let tls = tls_backend(&ca).await;
    let plain = start_echo("h2c-pod").await;
    let mut text = CLASS.to_owned();
    text.push_str(&service("self-signed", tls));
    text.push_str(&ingress("self-signed", &[("backend-protocol", "HTTPS")]));
    text.push_str(&service("checked", tls));
    text.push_str(&ca_secret("checked-ca", &ca));
    let checked = [
        ("backend-protocol", "GRPCS"),
        ("proxy-ssl-secret", "default/checked-ca"),
        ("proxy-ssl-verify", "on"),
        ("proxy-ssl-name", "abc.example.com"),
    ];
    text.push_str(&ingress("checked", &checked));
    text.push_str(&service("untrusted", tls));
    text.push_str(&ca_secret("other-ca", &other));
    let untrusted = [
        ("backend-protocol", "HTTPS"),
        ("proxy-ssl-secret", "other-ca"),
        ("proxy-ssl-verify", "on"),
        ("proxy-ssl-name", "abc.example.com"),
    ];
    text.push_str(&ingress("untrusted", &untrusted));
    text.push_str(&service("cleartext", plain.addr));
    text.push_str(&ingress("cleartext", &[("backend-protocol", "H2C")]));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;

    // Not verified, as ingress-nginx: the Service's cluster name is sent as SNI.
    let r = call(&client, server.http(), "self-signed.test").await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    let json = r.json();
    assert_eq!(json["tls"]["serverName"], "self-signed.default.svc");
    assert_eq!(json["proto"], "HTTP/1.1");

    let r = call(&client, server.http(), "checked.test").await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    let json = r.json();
    assert_eq!(json["tls"]["serverName"], "abc.example.com");
    assert_eq!(json["proto"], "HTTP/2.0");

    // Verified against a CA that did not sign it: never reached.
    let r = call(&client, server.http(), "untrusted.test").await;
    assert_eq!(r.status, 502);

    let r = call(&client, server.http(), "cleartext.test").await;
    assert_eq!(r.status, 200);
    let json = r.json();
    assert_eq!(json["proto"], "HTTP/2.0");
    assert!(json["tls"].is_null(), "{json}");
}

/// Service `name` port 80 to each echo server, one EndpointSlice each.
fn spread_service(name: &str, echoes: &[crate::support::echo::Echo]) -> String {
    let mut out = format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n\
         spec: {{ports: [{{name: http, port: 80}}]}}\n"
    );
    for (i, e) in echoes.iter().enumerate() {
        out.push_str(&format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: {name}-{i}, labels: {{kubernetes.io/service-name: {name}}}}}\n\
             addressType: IPv4\nports: [{{name: http, port: {port}}}]\n\
             endpoints: [{{addresses: [\"{ip}\"], conditions: {{ready: true}}}}]\n",
            port = e.addr.port(),
            ip = e.addr.ip(),
        ));
    }
    out
}

#[tokio::test]
async fn upstream_hash_by_keeps_each_header_value_on_one_endpoint() {
    let fleet = crate::support::echo::start_fleet(&["pod-a", "pod-b", "pod-c"]).await;
    let mut text = CLASS.to_owned();
    text.push_str(&spread_service("users", &fleet));
    text.push_str(
        &ingress("users", &[("upstream-hash-by", "$http_x_user_id")])
            .replace("number: 443", "number: 80"),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let mut pods = std::collections::BTreeSet::new();
    for user in 0..12 {
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..4 {
            let mut req = get(server.http(), "users.test", "/p");
            req.headers_mut()
                .insert("x-user-id", user.to_string().parse().expect("value"));
            let r = send(&client, req).await.expect("request through edgeplane");
            assert_eq!(r.status, 200);
            seen.insert(r.pod().expect("an echo answered"));
        }
        assert_eq!(seen.len(), 1, "user {user} moved: {seen:?}");
        pods.extend(seen);
    }
    // Twelve users on one of three pods each: not all on one (a hash, not a fixed choice).
    assert!(pods.len() > 1, "{pods:?}");
}

#[tokio::test]
async fn upstream_hash_by_request_uri_keeps_each_uri_on_one_endpoint() {
    let fleet = crate::support::echo::start_fleet(&["pod-a", "pod-b", "pod-c"]).await;
    let mut text = CLASS.to_owned();
    text.push_str(&spread_service("pages", &fleet));
    text.push_str(
        &ingress("pages", &[("upstream-hash-by", "$request_uri")])
            .replace("number: 443", "number: 80"),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let mut pods = std::collections::BTreeSet::new();
    for page in 0..12 {
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..4 {
            let uri = format!("/page/{page}?v=1");
            let r = send(&client, get(server.http(), "pages.test", &uri))
                .await
                .expect("request through edgeplane");
            assert_eq!(r.status, 200);
            seen.insert(r.pod().expect("an echo answered"));
        }
        assert_eq!(seen.len(), 1, "page {page} moved: {seen:?}");
        pods.extend(seen);
    }
    // Twelve URIs on one of three pods each: not all on one (a hash, not a fixed choice).
    assert!(pods.len() > 1, "{pods:?}");
    // The query is part of `$request_uri`: one path with twelve queries spreads too.
    let mut by_query = std::collections::BTreeSet::new();
    for q in 0..12 {
        let uri = format!("/page/0?v={q}");
        let r = send(&client, get(server.http(), "pages.test", &uri))
            .await
            .expect("request through edgeplane");
        by_query.insert(r.pod().expect("an echo answered"));
    }
    assert!(by_query.len() > 1, "{by_query:?}");
}

/// A TLS echo backend for `abc.example.com` that requires a client certificate of `clients`.
async fn mtls_backend(ca: &TestCa, clients: &TestCa) -> SocketAddr {
    let (cert, key) = ca.issue_pem(&["abc.example.com"], &[]);
    let config = server_config(
        cert.as_bytes(),
        key.as_bytes(),
        Some(clients.cert_pem.as_bytes()),
    )
    .expect("TLS config");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let identity = EchoIdentity {
        pod: "mtls-backend".into(),
        namespace: "default".into(),
    };
    tokio::spawn(serve_echo_tls(listener, identity, None, config));
    addr
}

/// Secret `name` with a client certificate (`tls.crt`, `tls.key`) and, when given, `ca.crt`.
fn client_secret(name: &str, cert: &str, key: &str, ca: Option<&TestCa>) -> String {
    let indent = |pem: &str| {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    let mut text = format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}}}\n\
         stringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        indent(cert),
        indent(key)
    );
    if let Some(ca) = ca {
        text.push_str(&format!("  ca.crt: |\n{}", indent(&ca.cert_pem)));
    }
    text
}

#[tokio::test]
async fn the_proxy_ssl_secret_client_certificate_is_presented_to_the_backend() {
    let ca = TestCa::new("backend CA");
    let clients = TestCa::new("client CA");
    let backend = mtls_backend(&ca, &clients).await;
    let (cert, key) = clients.issue_pem(&["edge.client.test"], &[]);
    let mut text = CLASS.to_owned();
    // Not verified, only tls.crt/tls.key: presented all the same.
    text.push_str(&service("presents", backend));
    text.push_str(&client_secret("client-only", &cert, &key, None));
    let presents = [
        ("backend-protocol", "HTTPS"),
        ("proxy-ssl-secret", "client-only"),
        ("proxy-ssl-verify", "off"),
    ];
    text.push_str(&ingress("presents", &presents));
    // Verified against ca.crt, and presenting the certificate.
    text.push_str(&service("verified", backend));
    text.push_str(&client_secret("client-and-ca", &cert, &key, Some(&ca)));
    let verified = [
        ("backend-protocol", "GRPCS"),
        ("proxy-ssl-secret", "default/client-and-ca"),
        ("proxy-ssl-verify", "on"),
        ("proxy-ssl-name", "abc.example.com"),
    ];
    text.push_str(&ingress("verified", &verified));
    // No Secret: no certificate, and the backend refuses the handshake.
    text.push_str(&service("anonymous", backend));
    text.push_str(&ingress("anonymous", &[("backend-protocol", "HTTPS")]));
    // A Secret whose key is not the certificate's: never reached without it.
    let (_, other_key) = clients.issue_pem(&["someone.else.test"], &[]);
    text.push_str(&service("mismatched", backend));
    text.push_str(&client_secret("wrong-key", &cert, &other_key, None));
    let mismatched = [
        ("backend-protocol", "HTTPS"),
        ("proxy-ssl-secret", "wrong-key"),
    ];
    text.push_str(&ingress("mismatched", &mismatched));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;

    let bare = |pem: &str| -> String { pem.split_whitespace().collect() };
    let leaf = |r: &Reply| -> String {
        let json = r.json();
        bare(
            json["tls"]["peerCertificates"][0]
                .as_str()
                .unwrap_or_default(),
        )
    };
    let r = call(&client, server.http(), "presents.test").await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    assert_eq!(leaf(&r), bare(&cert));

    let r = call(&client, server.http(), "verified.test").await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["proto"], "HTTP/2.0");
    assert_eq!(leaf(&r), bare(&cert));

    let r = call(&client, server.http(), "anonymous.test").await;
    assert_eq!(r.status, 502);

    let r = call(&client, server.http(), "mismatched.test").await;
    assert_eq!(r.status, 502);
}

#[tokio::test]
async fn a_missing_proxy_ssl_secret_is_reported_verified_or_not() {
    let ca = TestCa::new("backend CA");
    let backend = tls_backend(&ca).await;
    let mut text = CLASS.to_owned();
    // Not verified: reached all the same, presenting no certificate, and reported.
    text.push_str(&service("unverified", backend));
    let unverified = [
        ("backend-protocol", "HTTPS"),
        ("proxy-ssl-secret", "absent"),
        ("proxy-ssl-verify", "off"),
    ];
    text.push_str(&ingress("unverified", &unverified));
    // Verified: no CA to check against, answered 502, and reported.
    text.push_str(&service("verified", backend));
    let verified = [
        ("backend-protocol", "HTTPS"),
        ("proxy-ssl-secret", "default/absent"),
        ("proxy-ssl-verify", "on"),
        ("proxy-ssl-name", "abc.example.com"),
    ];
    text.push_str(&ingress("verified", &verified));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;

    let r = call(&client, server.http(), "unverified.test").await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    let json = r.json();
    let presented = json["tls"]["peerCertificates"].as_array().cloned();
    assert!(presented.unwrap_or_default().is_empty(), "{json}");
    let status = ingress_status(&client, &server, "unverified").await;
    assert!(
        status.contains("proxy-ssl-secret: Secret default/absent not found: no client certificate"),
        "{status}"
    );
    assert!(status.contains("Unsupported"), "{status}");

    let r = call(&client, server.http(), "verified.test").await;
    assert_eq!(r.status, 502);
    let status = ingress_status(&client, &server, "verified").await;
    assert!(
        status.contains("Secret default/absent not found: the backend is answered 502"),
        "{status}"
    );
}
