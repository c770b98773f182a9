//! L4 slots are reclaimed and shared, on real sockets: one client IP address cannot take every
//! UDP session of a socket from many source ports (another address still gets one), backend
//! replies alone do not keep a UDP session alive, and a TCP stream silent both ways for its
//! listener's idle timeout (a ProxyConfig's `clientTimeouts.tcpIdle`, through the translator)
//! is closed on both sides and counted, as is a silent TLS passthrough stream, while a stream
//! with traffic stays open.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use edgeplane::provider::manifest::parse_manifests;
use edgeplane::snapshot::Snapshot;
use edgeplane::table::{
    BackendSet, L4Route, L4Routes, ListenerSettings, ListenerTable, RouteRef, RouteTable,
    SniListener, SniRoutes,
};
use edgeplane::translate::{translate, TranslateOptions, DEFAULT_CONTROLLER_NAME};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::l4::{ask, free_udp_addr, tcp_echo, tls_echo, udp_echo};
use crate::support::net::{bind_loopback, loopback_ip};
use crate::support::proxy::{start, start_with, test_options};
use crate::support::tables::{service, weighted};
use crate::support::tls::{client_config, connect, self_signed};

/// Bound on every wait for bytes or a close.
const WAIT: Duration = Duration::from_secs(10);

fn udp_table(addr: SocketAddr, backend: SocketAddr) -> RouteTable {
    let route = L4Route {
        route: Arc::new(RouteRef::new("UDPRoute", "default", "r")),
        backends: Arc::new(BackendSet::new(vec![weighted(
            &service("udp", &[backend]),
            1,
        )])),
    };
    let l = ListenerTable::new(
        addr,
        vec![edgeplane::table::SocketSource::gateway(
            "default", "gw", "udp",
        )],
        Vec::<edgeplane::table::VirtualHost>::new(),
    )
    .with_l4(L4Routes::Udp { route: Some(route) });
    let mut t = RouteTable::default();
    t.udp.insert(addr, Arc::new(l));
    t
}

/// The reply to `msg` from `client`, trying a few times (the first datagram may race the
/// socket's first receive).
async fn ask_retrying(client: &UdpSocket, to: SocketAddr, msg: &str) -> Option<String> {
    for _ in 0..3 {
        if let Some(reply) = ask(client, to, msg).await {
            return Some(reply);
        }
    }
    None
}

/// A loopback address other than `ip`.
fn other_loopback(ip: IpAddr) -> IpAddr {
    (0..100)
        .map(|_| loopback_ip())
        .find(|o| *o != ip)
        .expect("another loopback address")
}

#[tokio::test]
async fn one_source_address_cannot_take_every_udp_session() {
    let (backend, _b) = udp_echo("a").await;
    let addr = free_udp_addr();
    // No per-source limit set: a quarter of the socket's 8 sessions, 2.
    let options = edgeplane::proxy::ProxyOptions {
        max_connections: 8,
        ..test_options()
    };
    let proxy = start_with(udp_table(addr, backend), options).await;
    let dropped = |reason: &str| {
        proxy
            .metrics
            .l4_dropped
            .with_label_values(&["udp", reason])
            .get()
    };
    // One address, five source ports: the socket has room for all five, the address for two.
    let greedy = loopback_ip();
    let mut ports = Vec::new();
    for _ in 0..5 {
        ports.push(UdpSocket::bind((greedy, 0)).await.unwrap());
    }
    for (i, client) in ports.iter().take(2).enumerate() {
        let reply = ask_retrying(client, addr, &format!("p{i}")).await;
        assert_eq!(reply, Some(format!("a:p{i}")), "port {i}");
    }
    for (i, client) in ports.iter().enumerate().skip(2) {
        assert_eq!(ask(client, addr, "more").await, None, "port {i}");
    }
    assert_eq!(dropped("source_limit"), 3);
    // Another address still gets a session, and the first two sessions are still served.
    let other = UdpSocket::bind((other_loopback(greedy), 0)).await.unwrap();
    assert_eq!(
        ask_retrying(&other, addr, "other").await.as_deref(),
        Some("a:other")
    );
    assert_eq!(
        ask(&ports[0], addr, "again").await.as_deref(),
        Some("a:again")
    );
    assert_eq!(dropped("session_limit"), 0);
}

/// A UDP backend that answers each client's first datagram with a stream of datagrams (one
/// every 20 ms, up to `max`), counting what it sent in `sent`.
async fn chatty_udp(max: usize, sent: Arc<AtomicUsize>) -> (SocketAddr, JoinHandle<()>) {
    let socket = Arc::new(UdpSocket::bind((loopback_ip(), 0)).await.unwrap());
    let addr = socket.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        let Ok((_, peer)) = socket.recv_from(&mut buf).await else {
            return;
        };
        for i in 0..max {
            let _ = socket.send_to(format!("tick {i}").as_bytes(), peer).await;
            sent.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    (addr, task)
}

#[tokio::test]
async fn backend_replies_alone_do_not_keep_a_udp_session_alive() {
    // 25 seconds of replies at most: far beyond the idle timeout.
    let max = 1250;
    let sent = Arc::new(AtomicUsize::new(0));
    let (backend, task) = chatty_udp(max, sent.clone()).await;
    let addr = free_udp_addr();
    let options = edgeplane::proxy::ProxyOptions {
        udp_idle_timeout: Duration::from_millis(300),
        ..test_options()
    };
    let proxy = start_with(udp_table(addr, backend), options).await;
    let client = UdpSocket::bind((loopback_ip(), 0)).await.unwrap();
    client.send_to(b"start", addr).await.unwrap();
    // Replies come through until the session ends; then nothing arrives while the backend
    // goes on sending.
    let mut received = 0;
    let mut buf = [0u8; 2048];
    let mut went_quiet = false;
    for _ in 0..max {
        match tokio::time::timeout(Duration::from_secs(1), client.recv_from(&mut buf)).await {
            Ok(Ok(_)) => received += 1,
            Ok(Err(e)) => panic!("receive failed: {e}"),
            Err(_) => {
                went_quiet = true;
                break;
            }
        }
    }
    assert!(received > 0, "no reply came through");
    assert!(went_quiet, "the backend's replies kept the session alive");
    assert!(
        !task.is_finished() && sent.load(Ordering::Relaxed) > received,
        "the backend must still be sending after the session ended"
    );
    let ended = proxy
        .metrics
        .l4_idle_closed
        .with_label_values(&["udp"])
        .get();
    assert_eq!(ended, 1);
    task.abort();
}

/// A Service `name` whose port 80 has the one TCP endpoint `addr`.
fn tcp_service(name: &str, addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec:\n  ports: [{{name: p, port: 80, protocol: TCP}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: p, port: {port}, protocol: TCP}}]\nendpoints:\n- addresses: ['{ip}']\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

/// The table of a Gateway with one TCP listener at `at` routed to `backend`, whose
/// ProxyConfig sets `clientTimeouts.tcpIdle` to `idle`.
fn translated_tcp(at: SocketAddr, backend: SocketAddr, idle: &str) -> RouteTable {
    let manifests = format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: edge}}
spec: {{controllerName: {DEFAULT_CONTROLLER_NAME}}}
---
apiVersion: edgeplane.dev/v1beta1
kind: ProxyConfig
metadata: {{name: streams}}
spec: {{clientTimeouts: {{tcpIdle: {idle}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw}}
spec:
  gatewayClassName: edge
  infrastructure:
    parametersRef: {{group: edgeplane.dev, kind: ProxyConfig, name: streams}}
  addresses: [{{type: IPAddress, value: '{ip}'}}]
  listeners:
  - {{name: tcp, port: {port}, protocol: TCP}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {{name: stream}}
spec:
  parentRefs: [{{name: gw, sectionName: tcp}}]
  rules: [{{backendRefs: [{{name: backend, port: 80}}]}}]
{}"#,
        tcp_service("backend", backend),
        ip = at.ip(),
        port = at.port(),
    );
    let objects = parse_manifests(std::path::Path::new("l4.yaml"), &manifests).unwrap();
    let options = TranslateOptions {
        ingress: Default::default(),
        controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: at.ip(),
        now: jiff::Timestamp::now(),
        generation: 1,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    };
    let translation = translate(&Snapshot::from_objects(objects), &options);
    let settings = translation
        .table
        .listeners
        .get(&at)
        .and_then(|l| l.settings.clone())
        .expect("the ProxyConfig reaches the TCP listener");
    assert!(settings.tcp_idle_timeout.is_some());
    translation.table
}

/// A TCP backend that sends nothing and reports on `closed` when a connection reaches end of
/// stream (the proxy closed its side).
async fn silent_tcp() -> (SocketAddr, mpsc::UnboundedReceiver<()>, JoinHandle<()>) {
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
                let _ = tx.send(());
            });
        }
    });
    (addr, rx, task)
}

#[tokio::test]
async fn a_silent_tcp_stream_is_closed_on_both_sides_after_the_listener_idle_timeout() {
    let (backend, mut backend_closed, _b) = silent_tcp().await;
    let at = crate::support::net::free_addr();
    let proxy = start(translated_tcp(at, backend, "300ms")).await;
    let mut client = TcpStream::connect(at).await.unwrap();
    // Nothing is sent either way: the proxy closes the client's side...
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(WAIT, client.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "the silent stream was not closed: {read:?}"
    );
    // ...and the backend's.
    let upstream = tokio::time::timeout(WAIT, backend_closed.recv()).await;
    assert_eq!(
        upstream,
        Ok(Some(())),
        "the backend connection was not closed"
    );
    let idle_closed = proxy
        .metrics
        .l4_idle_closed
        .with_label_values(&["tcp"])
        .get();
    assert_eq!(idle_closed, 1);
}

#[tokio::test]
async fn a_tcp_stream_with_traffic_outlives_the_idle_timeout() {
    let (backend, _b) = tcp_echo("echo").await;
    let at = crate::support::net::free_addr();
    let proxy = start(translated_tcp(at, backend, "1s")).await;
    let mut client = TcpStream::connect(at).await.unwrap();
    let mut greeting = [0u8; 5];
    tokio::time::timeout(WAIT, client.read_exact(&mut greeting))
        .await
        .unwrap()
        .unwrap();
    // A byte every 100 ms for three seconds: three times the idle timeout, never idle for it.
    for i in 0..30u8 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        client.write_all(&[b'a' + i % 26]).await.unwrap();
        let mut back = [0u8; 1];
        tokio::time::timeout(WAIT, client.read_exact(&mut back))
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("closed after {i} round trips: {e}"));
        assert_eq!(back[0], b'a' + i % 26);
    }
    let idle_closed = proxy
        .metrics
        .l4_idle_closed
        .with_label_values(&["tcp"])
        .get();
    assert_eq!(idle_closed, 0);
}

#[tokio::test]
async fn a_silent_tls_passthrough_stream_is_closed_after_the_listener_idle_timeout() {
    let cert = self_signed(&["p.example.com"]);
    let (backend, _b) = tls_echo("secure", &cert).await;
    let at = crate::support::net::free_addr();
    let mut sni = SniListener::new(Some("p.example.com".into()), false);
    sni.add(
        "p.example.com",
        L4Route {
            route: Arc::new(RouteRef::new("TLSRoute", "default", "p")),
            backends: Arc::new(BackendSet::new(vec![weighted(
                &service("secure", &[backend]),
                1,
            )])),
        },
    );
    let mut l = ListenerTable::new(
        at,
        vec![edgeplane::table::SocketSource::gateway(
            "default", "gw", "tls",
        )],
        Vec::<edgeplane::table::VirtualHost>::new(),
    )
    .with_l4(L4Routes::Tls(SniRoutes::new(vec![sni])));
    l.settings = Some(Arc::new(ListenerSettings {
        source: "default/streams".into(),
        tcp_idle_timeout: Some(Duration::from_millis(300)),
        ..ListenerSettings::default()
    }));
    let mut t = RouteTable::default();
    t.listeners.insert(at, Arc::new(l));
    let proxy = start(t).await;
    // The client verifies the backend's certificate (passthrough), reads its greeting, then
    // both sides stay silent.
    let mut s = connect(at, "p.example.com", client_config(&[&cert], &[]))
        .await
        .unwrap();
    let mut greeting = [0u8; 7];
    tokio::time::timeout(WAIT, s.read_exact(&mut greeting))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&greeting, b"secure\n");
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(WAIT, s.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "the silent stream was not closed: {read:?}"
    );
    let idle_closed = |protocol: &str| {
        proxy
            .metrics
            .l4_idle_closed
            .with_label_values(&[protocol])
            .get()
    };
    assert_eq!((idle_closed("tls"), idle_closed("tcp")), (1, 0));
}
