//! Access controls fail closed, through the whole path (manifests -> translator -> table ->
//! proxy) on real sockets, clients bound to chosen loopback sources (127.0.0.1 allowed,
//! 127.0.0.2 denied): an invalid TrafficPolicy carrying `ipAccess` refuses every client of
//! its Gateway (both sources get 403) until it is fixed, and a Gateway's `ipAccess` lists
//! close denied TCP connections at once and drop denied UDP datagrams, counted in
//! `edgeplane_l4_dropped_total{reason="ip_denied"}`; a listener's lists on a TLS passthrough
//! port guard that listener's hostnames only.

use std::net::{IpAddr, SocketAddr};

use edgeplane::provider::manifest::{parse_manifests, parse_manifests_unvalidated};
use edgeplane::snapshot::Snapshot;
use edgeplane::status::ObjectKind;
use edgeplane::translate::{translate, TranslateOptions, Translation, DEFAULT_CONTROLLER_NAME};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream, UdpSocket};
use tokio_rustls::TlsConnector;

use crate::l4::{ask, free_udp_addr, greeting_and_echo, tcp_echo, tls_echo, udp_echo};
use crate::support::echo::start_echo;
use crate::support::net::free_addr;
use crate::support::proxy::start;
use crate::support::tls::{client_config, self_signed, TestCert};

const ALLOWED: &str = "127.0.0.1";
const DENIED: &str = "127.0.0.2";

fn source(ip: &str) -> IpAddr {
    ip.parse().expect("an address")
}

/// A Service `name` whose port 80 has the one endpoint `addr` (`protocol` TCP or UDP).
fn service(name: &str, protocol: &str, addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec:\n  ports: [{{name: p, port: 80, protocol: {protocol}}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: p, port: {port}, protocol: {protocol}}}]\nendpoints:\n- addresses: ['{ip}']\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

fn gateway(listeners: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: edge}}\nspec: {{controllerName: {DEFAULT_CONTROLLER_NAME}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw}}\nspec:\n  gatewayClassName: edge\n  listeners:\n{listeners}"
    )
}

/// A TrafficPolicy on the Gateway with `body` (YAML lines of its spec, two-space indented).
fn gateway_policy(body: &str) -> String {
    format!(
        "---\napiVersion: edgeplane.dev/v1beta1\nkind: TrafficPolicy\nmetadata: {{name: acl}}\nspec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}]\n{body}"
    )
}

fn run(manifests: &str, bind: IpAddr, validated: bool) -> Translation {
    let path = std::path::Path::new("acl.yaml");
    let objects = if validated {
        parse_manifests(path, manifests)
    } else {
        parse_manifests_unvalidated(path, manifests)
    };
    let options = TranslateOptions {
        ingress: Default::default(),
        controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: bind,
        now: jiff::Timestamp::now(),
        generation: 1,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    };
    translate(
        &Snapshot::from_objects(objects.expect("manifests")),
        &options,
    )
}

/// `(reason, message)` of the policy's Accepted condition at its first ancestor.
fn accepted(t: &Translation) -> (String, String) {
    let s = t
        .status
        .get(ObjectKind::TrafficPolicy, Some("default"), "acl")
        .expect("policy status");
    let json = s.status.to_json();
    let c = &json["ancestors"][0]["conditions"][0];
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    (text("reason"), text("message"))
}

/// A TCP connection to `to` from `from` (port chosen by the system).
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(source(from), 0))
        .expect("bind the client source");
    socket.connect(to).await.expect("connect")
}

/// The status code of `GET /` sent from `from` to `to`.
async fn status_from(from: &str, to: SocketAddr) -> u16 {
    let mut s = connect_from(from, to).await;
    s.write_all(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        .await
        .expect("request sent");
    let mut head = Vec::new();
    let read = tokio::time::timeout(crate::l4::WAIT, s.read_to_end(&mut head)).await;
    assert!(read.is_ok(), "the response ends");
    let text = String::from_utf8_lossy(&head);
    text.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"))
}

#[tokio::test]
async fn an_invalid_policy_with_ip_lists_refuses_every_client_until_fixed() {
    let web = start_echo("web").await;
    let bind = free_addr();
    let base = format!(
        "{}---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: app}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]\n{}",
        gateway(&format!("  - {{name: http, port: {}, protocol: HTTP}}\n", bind.port())),
        service("web", "TCP", web.addr),
    );
    let broken = format!(
        "{base}{}",
        gateway_policy(&format!(
            "  ipAccess: {{allow: [{ALLOWED}/32]}}\n  rateLimit: {{requests: 0}}\n"
        ))
    );
    // The CRD refuses the policy; a cluster whose CRD is older stores it anyway.
    let Err(refused) = parse_manifests(std::path::Path::new("acl.yaml"), &broken) else {
        panic!("requests: 0 was admitted");
    };
    assert!(
        refused.to_string().contains("spec.rateLimit.requests"),
        "{refused}"
    );
    let t = run(&broken, bind.ip(), false);
    let (reason, message) = accepted(&t);
    assert_eq!(reason, "Invalid");
    assert!(message.contains("access controls fail closed"), "{message}");
    let proxy = start(t.table).await;
    assert_eq!(status_from(ALLOWED, bind).await, 403, "fail closed: all");
    assert_eq!(status_from(DENIED, bind).await, 403);
    let refusals = proxy
        .metrics
        .policy_denied
        .with_label_values(&["invalid_policy"])
        .get();
    assert_eq!(refusals, 2);

    // Fixed: the lists apply as written.
    let fixed = format!(
        "{base}{}",
        gateway_policy(&format!(
            "  ipAccess: {{allow: [{ALLOWED}/32]}}\n  rateLimit: {{requests: 100}}\n"
        ))
    );
    let t = run(&fixed, bind.ip(), true);
    assert_eq!(accepted(&t).0, "Accepted");
    proxy.publish(t.table).await;
    assert_eq!(status_from(ALLOWED, bind).await, 200);
    assert_eq!(status_from(DENIED, bind).await, 403);
}

#[tokio::test]
async fn gateway_ip_lists_close_denied_tcp_connections_and_drop_denied_datagrams() {
    let (plain, _t1) = tcp_echo("plain").await;
    let (datagrams, _t2) = udp_echo("dgram").await;
    let shared = free_udp_addr();
    let manifests = format!(
        "{}---\napiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\nmetadata: {{name: stream}}\nspec:\n  parentRefs: [{{name: gw, sectionName: tcp}}]\n  rules: [{{backendRefs: [{{name: plain, port: 80}}]}}]\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: UDPRoute\nmetadata: {{name: datagrams}}\nspec:\n  parentRefs: [{{name: gw, sectionName: udp}}]\n  rules: [{{backendRefs: [{{name: dgram, port: 80}}]}}]\n{}{}{}",
        gateway(&format!(
            "  - {{name: tcp, port: {p}, protocol: TCP}}\n  - {{name: udp, port: {p}, protocol: UDP}}\n",
            p = shared.port()
        )),
        service("plain", "TCP", plain),
        service("dgram", "UDP", datagrams),
        gateway_policy(&format!(
            "  ipAccess: {{deny: [{DENIED}/32]}}\n  rateLimit: {{requests: 5}}\n"
        )),
    );
    let t = run(&manifests, shared.ip(), true);
    let (reason, message) = accepted(&t);
    assert_eq!(reason, "Accepted");
    assert!(
        message.contains("rateLimit not applied on listener(s) \"tcp\" (TCP), \"udp\" (UDP)"),
        "{message}"
    );
    let proxy = start(t.table).await;
    let dropped = |protocol: &str| {
        proxy
            .metrics
            .l4_dropped
            .with_label_values(&[protocol, "ip_denied"])
            .get()
    };

    // TCP: the denied client's connection is closed before the backend greets anyone.
    let mut denied = connect_from(DENIED, shared).await;
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(crate::l4::WAIT, denied.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "closed at once: {read:?}"
    );
    let allowed = connect_from(ALLOWED, shared).await;
    assert_eq!(greeting_and_echo(allowed, "through").await, "plain");
    assert_eq!(dropped("tcp"), 1);

    // UDP: the denied client's datagram is dropped; the allowed one's is answered.
    let denied = UdpSocket::bind((source(DENIED), 0)).await.unwrap();
    denied.send_to(b"hello", shared).await.unwrap();
    let allowed = UdpSocket::bind((source(ALLOWED), 0)).await.unwrap();
    let mut reply = None;
    for _ in 0..5 {
        reply = ask(&allowed, shared, "hello").await;
        if reply.is_some() {
            break;
        }
    }
    assert_eq!(reply.as_deref(), Some("dgram:hello"));
    // The socket's loop reads datagrams in order: the denied one came first.
    assert_eq!(dropped("udp"), 1);
    let mut buf = [0u8; 64];
    assert!(
        denied.try_recv_from(&mut buf).is_err(),
        "no reply for the denied client"
    );
}

/// A TLS connection to `to` from `from`, with `sni`, trusting `cert`.
async fn tls_from(
    from: &str,
    to: SocketAddr,
    sni: &str,
    cert: &TestCert,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, std::io::Error> {
    let tcp = connect_from(from, to).await;
    let name = ServerName::try_from(sni.to_owned()).expect("a server name");
    let connector = TlsConnector::from(client_config(&[cert], &[]));
    tokio::time::timeout(crate::l4::WAIT, connector.connect(name, tcp))
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

#[tokio::test]
async fn a_listener_ip_list_guards_its_tls_passthrough_hostname_only() {
    let (cert_a, cert_b) = (
        self_signed(&["a.example.com"]),
        self_signed(&["b.example.com"]),
    );
    let (a, _ta) = tls_echo("a", &cert_a).await;
    let (b, _tb) = tls_echo("b", &cert_b).await;
    let bind = free_addr();
    let route = |name: &str, listener: &str, host: &str| {
        format!("---\napiVersion: gateway.networking.k8s.io/v1\nkind: TLSRoute\nmetadata: {{name: {name}}}\nspec:\n  parentRefs: [{{name: gw, sectionName: {listener}}}]\n  hostnames: [{host}]\n  rules: [{{backendRefs: [{{name: {name}, port: 80}}]}}]\n")
    };
    let manifests = format!(
        "{}{}{}{}{}---\napiVersion: edgeplane.dev/v1beta1\nkind: TrafficPolicy\nmetadata: {{name: acl}}\nspec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: locked}}]\n  ipAccess: {{deny: [{DENIED}/32]}}\n",
        gateway(&format!(
            "  - {{name: locked, port: {p}, protocol: TLS, hostname: a.example.com, tls: {{mode: Passthrough}}}}\n  - {{name: open, port: {p}, protocol: TLS, hostname: b.example.com, tls: {{mode: Passthrough}}}}\n",
            p = bind.port()
        )),
        route("a", "locked", "a.example.com"),
        route("b", "open", "b.example.com"),
        service("a", "TCP", a),
        service("b", "TCP", b),
    );
    let t = run(&manifests, bind.ip(), true);
    assert_eq!(accepted(&t), ("Accepted".into(), "accepted".into()));
    let proxy = start(t.table).await;

    // The denied client reaches the open listener's hostname, not the locked one's.
    let s = tls_from(DENIED, bind, "b.example.com", &cert_b)
        .await
        .unwrap();
    assert_eq!(greeting_and_echo(s, "open").await, "b");
    assert!(tls_from(DENIED, bind, "a.example.com", &cert_a)
        .await
        .is_err());
    let s = tls_from(ALLOWED, bind, "a.example.com", &cert_a)
        .await
        .unwrap();
    assert_eq!(greeting_and_echo(s, "locked").await, "a");
    let dropped = proxy
        .metrics
        .l4_dropped
        .with_label_values(&["tls", "ip_denied"])
        .get();
    assert_eq!(dropped, 1);
}
