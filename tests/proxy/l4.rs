//! TLS passthrough and terminate, TCP and UDP forwarding through the proxy, on real sockets:
//! SNI routing, end-to-end certificate verification, open streams and UDP sessions kept
//! across table swaps, weighted backends, and connections closed when nothing matches.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use edgeplane::table::{
    BackendSet, L4Route, L4Routes, ListenerTable, RouteRef, RouteTable, SniListener, SniRoutes,
    VirtualHost,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UdpSocket};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::support::net::{bind_loopback, free_addr, loopback_ip};
use crate::support::proxy::{start, start_with, test_options};
use crate::support::tables::{service, weighted};
use crate::support::tls::{client_config, connect, self_signed, tls_listeners, TestCert};

/// Bound on every wait for bytes.
pub(crate) const WAIT: Duration = Duration::from_secs(5);

/// A route named `name` to backends `(addr, weight)` (one Service each).
fn route(name: &str, backends: &[(SocketAddr, u32)]) -> L4Route {
    L4Route {
        route: Arc::new(RouteRef::new("TCPRoute", "default", name)),
        backends: Arc::new(BackendSet::new(
            backends
                .iter()
                .enumerate()
                .map(|(i, (a, w))| weighted(&service(&format!("{name}-{i}"), &[*a]), *w))
                .collect(),
        )),
    }
}

fn l4_listener(addr: SocketAddr, routes: L4Routes) -> ListenerTable {
    ListenerTable::new(
        addr,
        vec![edgeplane::table::SocketSource::gateway(
            "default", "gw", "l4",
        )],
        Vec::<VirtualHost>::new(),
    )
    .with_l4(routes)
}

fn tcp_table(addr: SocketAddr, r: L4Route) -> RouteTable {
    let mut t = RouteTable::default();
    let l = l4_listener(addr, L4Routes::Tcp { route: Some(r) });
    t.listeners.insert(addr, Arc::new(l));
    t
}

fn udp_table(addr: SocketAddr, r: L4Route) -> RouteTable {
    let mut t = RouteTable::default();
    let l = l4_listener(addr, L4Routes::Udp { route: Some(r) });
    t.udp.insert(addr, Arc::new(l));
    t
}

/// A TCP backend that greets every connection with `name\n`, then echoes.
pub(crate) async fn tcp_echo(name: &'static str) -> (SocketAddr, JoinHandle<()>) {
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = s.write_all(format!("{name}\n").as_bytes()).await;
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    (addr, task)
}

/// A TLS backend with its own certificate for `host`: greets with `name\n`, then echoes.
pub(crate) async fn tls_echo(name: &'static str, cert: &TestCert) -> (SocketAddr, JoinHandle<()>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(rustls_pemfile_free_key(
        &cert.key_pem,
    )));
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der.clone()], key)
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut s) = acceptor.accept(s).await else {
                    return;
                };
                let _ = s.write_all(format!("{name}\n").as_bytes()).await;
                let mut buf = [0u8; 1024];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, task)
}

/// The DER of a PKCS#8 PEM key (rcgen writes exactly one `PRIVATE KEY` block).
fn rustls_pemfile_free_key(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes())
        .expect("rcgen key is PKCS#8 PEM")
        .secret_pkcs8_der()
        .to_vec()
}

/// Reads the greeting line, then checks that `msg` comes back.
pub(crate) async fn greeting_and_echo<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    s: S,
    msg: &str,
) -> String {
    let mut s = BufReader::new(s);
    let mut line = String::new();
    tokio::time::timeout(WAIT, s.read_line(&mut line))
        .await
        .unwrap()
        .unwrap();
    s.get_mut().write_all(msg.as_bytes()).await.unwrap();
    let mut back = vec![0u8; msg.len()];
    tokio::time::timeout(WAIT, s.read_exact(&mut back))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back, msg.as_bytes());
    line.trim_end().to_owned()
}

/// True when the proxy closes the connection without sending anything.
async fn closed_at_once(mut s: TcpStream) -> bool {
    let mut buf = [0u8; 16];
    matches!(
        tokio::time::timeout(WAIT, s.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn tls_passthrough_routes_by_sni_and_the_client_verifies_the_backend() {
    let (cert_a, cert_b) = (
        self_signed(&["a.example.com"]),
        self_signed(&["b.example.com"]),
    );
    let (a, _ta) = tls_echo("a", &cert_a).await;
    let (b, _tb) = tls_echo("b", &cert_b).await;
    let addr = free_addr();
    let mut listener = SniListener::new(Some("*.example.com".into()), false);
    listener.add("a.example.com", route("a", &[(a, 1)]));
    listener.add("b.example.com", route("b", &[(b, 1)]));
    let mut t = RouteTable::default();
    let l = l4_listener(addr, L4Routes::Tls(SniRoutes::new(vec![listener])));
    t.listeners.insert(addr, Arc::new(l));
    let proxy = start(t).await;

    // Each client trusts only its backend's certificate: the proxy holds no key for either.
    let s = connect(addr, "a.example.com", client_config(&[&cert_a], &[]))
        .await
        .unwrap();
    assert_eq!(greeting_and_echo(s, "through a").await, "a");
    let s = connect(addr, "b.example.com", client_config(&[&cert_b], &[]))
        .await
        .unwrap();
    assert_eq!(greeting_and_echo(s, "through b").await, "b");
    // An SNI no route has: the connection is closed before any handshake.
    let unknown = connect(addr, "c.example.com", client_config(&[&cert_a], &[])).await;
    assert!(unknown.is_err());
    let other = connect(addr, "a.other.org", client_config(&[&cert_a], &[])).await;
    assert!(other.is_err());
    // Not TLS at all.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n")
        .await
        .unwrap();
    assert!(closed_at_once(plain).await);
    let dropped = |reason: &str| {
        proxy
            .metrics
            .l4_dropped
            .with_label_values(&["tls", reason])
            .get()
    };
    assert_eq!((dropped("unknown_sni"), dropped("not_tls")), (2, 1));
}

#[tokio::test]
async fn tls_terminate_serves_the_listener_certificate_and_forwards_plaintext() {
    let cert = self_signed(&["t.example.com"]);
    let (backend, _t) = tcp_echo("plain").await;
    let addr = free_addr();
    let mut listener = SniListener::new(Some("t.example.com".into()), true);
    listener.add("t.example.com", route("t", &[(backend, 1)]));
    let mut t = RouteTable::default();
    let l = l4_listener(addr, L4Routes::Tls(SniRoutes::new(vec![listener])))
        .with_tls(tls_listeners(&[(Some("t.example.com"), &cert)]));
    t.listeners.insert(addr, Arc::new(l));
    let _proxy = start(t).await;
    let s = connect(addr, "t.example.com", client_config(&[&cert], &[]))
        .await
        .unwrap();
    // The backend speaks plaintext: its greeting arrives through the proxy's TLS session.
    assert_eq!(greeting_and_echo(s, "decrypted").await, "plain");
}

#[tokio::test]
async fn open_tcp_streams_keep_their_backend_across_a_table_swap() {
    let (a, _ta) = tcp_echo("a").await;
    let (b, _tb) = tcp_echo("b").await;
    let addr = free_addr();
    let proxy = start(tcp_table(addr, route("r", &[(a, 1)]))).await;
    let mut open = BufReader::new(TcpStream::connect(addr).await.unwrap());
    let mut line = String::new();
    tokio::time::timeout(WAIT, open.read_line(&mut line))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(line, "a\n");

    proxy.publish(tcp_table(addr, route("r", &[(b, 1)]))).await;
    // The open stream still reaches the backend it started with.
    open.get_mut().write_all(b"still here").await.unwrap();
    let mut back = [0u8; 10];
    tokio::time::timeout(WAIT, open.read_exact(&mut back))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&back, b"still here");
    // A new connection takes the new route.
    let s = TcpStream::connect(addr).await.unwrap();
    assert_eq!(greeting_and_echo(s, "new").await, "b");

    // Removing the listener stops accepting; the open stream runs on until it ends.
    proxy.publish(RouteTable::default()).await;
    assert!(TcpStream::connect(addr).await.is_err());
    open.get_mut().write_all(b"after removal").await.unwrap();
    let mut back = [0u8; 13];
    tokio::time::timeout(WAIT, open.read_exact(&mut back))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&back, b"after removal");
}

#[tokio::test]
async fn weighted_tcp_backends_both_get_connections() {
    let (a, _ta) = tcp_echo("a").await;
    let (b, _tb) = tcp_echo("b").await;
    let addr = free_addr();
    let _proxy = start(tcp_table(addr, route("r", &[(a, 1), (b, 1), (a, 0)]))).await;
    let (mut seen_a, mut seen_b) = (false, false);
    for _ in 0..200 {
        match greeting(addr).await.as_str() {
            "a\n" => seen_a = true,
            "b\n" => seen_b = true,
            other => panic!("unexpected greeting {other:?}"),
        }
        if seen_a && seen_b {
            break;
        }
    }
    assert!(seen_a && seen_b, "a: {seen_a}, b: {seen_b}");
}

#[tokio::test]
async fn tcp_without_ready_endpoints_is_closed_and_counted() {
    let addr = free_addr();
    let empty = route("empty", &[]);
    let no_endpoints = edgeplane::table::L4Route {
        route: empty.route.clone(),
        backends: Arc::new(BackendSet::new(vec![weighted(&service("none", &[]), 1)])),
    };
    let proxy = start(tcp_table(addr, no_endpoints)).await;
    assert!(closed_at_once(TcpStream::connect(addr).await.unwrap()).await);
    let counted = proxy
        .metrics
        .l4_dropped
        .with_label_values(&["tcp", "no_endpoints"])
        .get();
    assert_eq!(counted, 1);
}

/// A route to one Service with ready endpoints `ready` and terminating ones `draining`.
fn route_to_service(ready: &[SocketAddr], draining: &[SocketAddr]) -> L4Route {
    let svc = Arc::new(edgeplane::table::ServiceBackend {
        service: service("svc", &[]).service.clone(),
        endpoints: ready.to_vec(),
        terminating: draining.to_vec(),
        protocol: Default::default(),
        balance: Default::default(),
        limits: None,
    });
    L4Route {
        route: route("r", &[]).route,
        backends: Arc::new(BackendSet::new(vec![weighted(&svc, 1)])),
    }
}

/// The greeting line of a new connection through the proxy at `addr`.
async fn greeting(addr: SocketAddr) -> String {
    let mut s = BufReader::new(TcpStream::connect(addr).await.unwrap());
    let mut line = String::new();
    tokio::time::timeout(WAIT, s.read_line(&mut line))
        .await
        .unwrap()
        .unwrap();
    line
}

#[tokio::test]
async fn a_refused_tcp_connect_goes_to_another_endpoint() {
    let (good, _t) = tcp_echo("good").await;
    let refused = free_addr();
    let addr = free_addr();
    let _proxy = start(tcp_table(addr, route_to_service(&[refused, good], &[]))).await;
    for n in 0..20 {
        assert_eq!(greeting(addr).await, "good\n", "connection {n}");
    }
}

#[tokio::test]
async fn terminating_tcp_endpoints_serve_only_while_none_is_ready() {
    let (ready, _r) = tcp_echo("ready").await;
    let (old, _o) = tcp_echo("old").await;
    let addr = free_addr();
    let proxy = start(tcp_table(addr, route_to_service(&[ready], &[old]))).await;
    for _ in 0..10 {
        assert_eq!(greeting(addr).await, "ready\n");
    }
    proxy
        .publish(tcp_table(addr, route_to_service(&[], &[old])))
        .await;
    assert_eq!(greeting(addr).await, "old\n");
}

/// A UDP backend answering every datagram with `name:` and the datagram.
pub(crate) async fn udp_echo(name: &'static str) -> (SocketAddr, JoinHandle<()>) {
    let socket = UdpSocket::bind((loopback_ip(), 0)).await.unwrap();
    let addr = socket.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
            let mut reply = format!("{name}:").into_bytes();
            reply.extend_from_slice(&buf[..n]);
            let _ = socket.send_to(&reply, peer).await;
        }
    });
    (addr, task)
}

/// Sends `msg` from `client` to `to` and returns the reply, if one comes within a second.
pub(crate) async fn ask(client: &UdpSocket, to: SocketAddr, msg: &str) -> Option<String> {
    client.send_to(msg.as_bytes(), to).await.ok()?;
    let mut buf = [0u8; 2048];
    let (n, _) = tokio::time::timeout(Duration::from_secs(1), client.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// A free UDP address on a random loopback IP.
pub(crate) fn free_udp_addr() -> SocketAddr {
    for _ in 0..50 {
        if let Ok(s) = std::net::UdpSocket::bind((loopback_ip(), 0)) {
            return s.local_addr().unwrap();
        }
    }
    panic!("no free UDP address");
}

#[tokio::test]
async fn udp_sessions_keep_their_backend_across_a_swap_and_end_when_idle() {
    let (a, _ta) = udp_echo("a").await;
    let (b, _tb) = udp_echo("b").await;
    let addr = free_udp_addr();
    let options = edgeplane::proxy::ProxyOptions {
        udp_idle_timeout: Duration::from_millis(300),
        ..test_options()
    };
    let proxy = start_with(udp_table(addr, route("r", &[(a, 1)])), options).await;
    assert_eq!(proxy.proxy.bound_udp(), vec![addr]);
    let client = UdpSocket::bind((loopback_ip(), 0)).await.unwrap();
    // The first datagram may race the socket's first receive; retry a few times.
    let mut first = None;
    for _ in 0..5 {
        first = ask(&client, addr, "one").await;
        if first.is_some() {
            break;
        }
    }
    assert_eq!(first.as_deref(), Some("a:one"));

    proxy.publish(udp_table(addr, route("r", &[(b, 1)]))).await;
    // The session (keyed by client address) outlives the table and keeps its backend...
    assert_eq!(ask(&client, addr, "two").await.as_deref(), Some("a:two"));
    // ...while a new client starts a session on the new route.
    let other = UdpSocket::bind((loopback_ip(), 0)).await.unwrap();
    assert_eq!(ask(&other, addr, "three").await.as_deref(), Some("b:three"));

    // Once idle for the timeout, the session ends; the next datagram opens a new one on the
    // current route. (Every datagram restarts the idle clock, so each try waits longer than
    // the timeout first.)
    let mut moved = false;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        if ask(&client, addr, "later").await.as_deref() == Some("b:later") {
            moved = true;
            break;
        }
    }
    assert!(moved, "the idle session never ended");

    proxy.publish(RouteTable::default()).await;
    assert!(proxy.proxy.bound_udp().is_empty());
}

#[tokio::test]
async fn udp_sessions_beyond_the_limit_are_dropped_and_counted() {
    let (a, _ta) = udp_echo("a").await;
    let addr = free_udp_addr();
    let options = edgeplane::proxy::ProxyOptions {
        max_connections: 1,
        ..test_options()
    };
    let proxy = start_with(udp_table(addr, route("r", &[(a, 1)])), options).await;
    let first = UdpSocket::bind((loopback_ip(), 0)).await.unwrap();
    let mut reply = None;
    for _ in 0..5 {
        reply = ask(&first, addr, "one").await;
        if reply.is_some() {
            break;
        }
    }
    assert_eq!(reply.as_deref(), Some("a:one"));
    let second = UdpSocket::bind((loopback_ip(), 0)).await.unwrap();
    assert_eq!(ask(&second, addr, "two").await, None);
    let dropped = proxy
        .metrics
        .l4_dropped
        .with_label_values(&["udp", "session_limit"])
        .get();
    assert_eq!(dropped, 1);
    // The session that holds the slot is still served.
    assert_eq!(ask(&first, addr, "three").await.as_deref(), Some("a:three"));
}
