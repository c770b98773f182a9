//! ProxyConfig settings of a listener socket (`ListenerTable::settings`) through the proxy:
//! the request head limit (431), the HTTP/2 stream limit announced in SETTINGS, trusted
//! proxies that replace the command line's for that socket, the idle timeout, and the body
//! limit with a TrafficPolicy's lower one winning. Settings are read when a connection is
//! accepted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgeplane::table::{
    IpAccess, ListenerSettings, ListenerTable, RequestPolicy, RouteTable, RuleFilters,
};
use http::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::client::{empty, full, h1_client, request, send};
use crate::support::echo::start_echo;
use crate::support::net::free_addr;
use crate::support::proxy::start;
use crate::support::raw::send_h1;
use crate::support::tables::*;

/// A socket at `addr` with `settings`, one rule to `backend` with `policy`.
fn socket(
    addr: SocketAddr,
    backend: SocketAddr,
    settings: Option<ListenerSettings>,
    policy: Option<RequestPolicy>,
) -> Arc<ListenerTable> {
    let svc = service("app", &[backend]);
    let filters = RuleFilters {
        policy: policy.map(Arc::new),
        ..RuleFilters::default()
    };
    let rules = vec![rule("r").filters(filters).backend(to(&svc)).build()];
    let mut l = ListenerTable::new(
        addr,
        vec![edgeplane::table::SocketSource::gateway(
            "default", "gw", "http",
        )],
        vec![vhost("*", rules)],
    );
    l.settings = settings.map(Arc::new);
    Arc::new(l)
}

fn one(l: Arc<ListenerTable>) -> RouteTable {
    table(1, vec![l])
}

fn settings() -> ListenerSettings {
    ListenerSettings {
        source: "default/config".into(),
        ..ListenerSettings::default()
    }
}

#[tokio::test]
async fn request_heads_over_the_limit_get_431() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let s = ListenerSettings {
        max_request_header_bytes: Some(1024),
        ..settings()
    };
    let _proxy = start(one(socket(addr, echo.addr, Some(s), None))).await;
    let small = send_h1(
        addr,
        b"GET / HTTP/1.1\r\nhost: h\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(small.status, 200);
    for size in [2000, 20_000] {
        let big = format!(
            "GET / HTTP/1.1\r\nhost: h\r\nx-big: {}\r\nconnection: close\r\n\r\n",
            "a".repeat(size)
        );
        assert_eq!(send_h1(addr, big.as_bytes()).await.status, 431, "{size}");
    }
}

/// The SETTINGS the server sends first on an h2c connection, as (identifier, value) pairs.
async fn server_settings(addr: SocketAddr) -> Vec<(u16, u32)> {
    let fut = async {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .await
            .expect("write preface");
        let mut head = [0u8; 9];
        s.read_exact(&mut head).await.expect("frame head");
        assert_eq!(head[3], 4, "first frame is SETTINGS");
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).await.expect("payload");
        payload
            .chunks(6)
            .map(|c| {
                (
                    u16::from_be_bytes([c[0], c[1]]),
                    u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                )
            })
            .collect::<Vec<_>>()
    };
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .expect("settings in time")
}

#[tokio::test]
async fn http2_clients_are_told_the_listeners_stream_limit() {
    let echo = start_echo("a").await;
    let limited = free_addr();
    let plain = free_addr();
    let s = ListenerSettings {
        http2_max_concurrent_streams: Some(3),
        ..settings()
    };
    let _proxy = start(table(
        1,
        vec![
            socket(limited, echo.addr, Some(s), None),
            socket(plain, echo.addr, None, None),
        ],
    ))
    .await;
    const MAX_CONCURRENT_STREAMS: u16 = 3;
    let value = |settings: Vec<(u16, u32)>| {
        settings
            .into_iter()
            .find(|(id, _)| *id == MAX_CONCURRENT_STREAMS)
            .map(|(_, v)| v)
    };
    assert_eq!(value(server_settings(limited).await), Some(3));
    assert_eq!(
        value(server_settings(plain).await),
        Some(256),
        "command line's"
    );
}

#[tokio::test]
async fn a_listeners_trusted_proxies_decide_who_the_client_is_there() {
    let echo = start_echo("a").await;
    let trusting = free_addr();
    let plain = free_addr();
    let s = ListenerSettings {
        trusted_proxies: Some(vec!["127.0.0.0/8".parse().unwrap()]),
        ..settings()
    };
    let policy = RequestPolicy {
        ip_access: Some(Arc::new(IpAccess {
            allow: vec!["192.0.2.0/24".parse().unwrap()],
            deny: vec![],
            refuse_all: None,
        })),
        ..RequestPolicy::default()
    };
    let _proxy = start(table(
        1,
        vec![
            socket(trusting, echo.addr, Some(s), Some(policy.clone())),
            socket(plain, echo.addr, None, Some(policy)),
        ],
    ))
    .await;
    let client = h1_client();
    let call = |addr: SocketAddr| {
        request(Method::GET, addr, "h", "/")
            .header("x-forwarded-for", "192.0.2.7")
            .body(empty())
            .unwrap()
    };
    let trusted = send(&client, call(trusting)).await.unwrap();
    assert_eq!(trusted.status, 200);
    // The forwarded chain is kept and extended from a trusted peer.
    let chain = trusted.echoed_header("x-forwarded-for").join(",");
    assert!(chain.starts_with("192.0.2.7"), "{chain}");
    assert_eq!(send(&client, call(plain)).await.unwrap().status, 403);
}

#[tokio::test]
async fn idle_connections_close_after_the_listeners_idle_timeout() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let s = ListenerSettings {
        idle_timeout: Some(Duration::from_millis(300)),
        ..settings()
    };
    let _proxy = start(one(socket(addr, echo.addr, Some(s), None))).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET / HTTP/1.1\r\nhost: h\r\n\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut buf = vec![0u8; 65536];
    // Read the response, then the close: bounded by 5 s where the command line's is 60 s.
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        let mut got = Vec::new();
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return got,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the idle connection is closed");
    assert!(closed.starts_with(b"HTTP/1.1 200"));
    assert!(started.elapsed() >= Duration::from_millis(250));
}

#[tokio::test]
async fn the_lower_of_the_listeners_and_the_policys_body_limit_applies() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let s = ListenerSettings {
        max_request_body_bytes: Some(5),
        ..settings()
    };
    let proxy = start(one(socket(addr, echo.addr, Some(s.clone()), None))).await;
    let client = h1_client();
    let post = |body: &'static str| {
        request(Method::POST, addr, "h", "/")
            .header("content-length", body.len())
            .body(full(body))
            .unwrap()
    };
    assert_eq!(send(&client, post("12345")).await.unwrap().status, 200);
    assert_eq!(send(&client, post("123456")).await.unwrap().status, 413);
    let policy = RequestPolicy {
        max_request_body: Some(3),
        ..RequestPolicy::default()
    };
    proxy
        .publish(one(socket(addr, echo.addr, Some(s), Some(policy))))
        .await;
    // A new connection sees the new table.
    let client = h1_client();
    assert_eq!(send(&client, post("1234")).await.unwrap().status, 413);
    assert_eq!(send(&client, post("123")).await.unwrap().status, 200);
}

#[tokio::test]
async fn a_slow_request_head_is_cut_at_the_listeners_header_timeout() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let s = ListenerSettings {
        header_read_timeout: Some(Duration::from_millis(300)),
        ..settings()
    };
    let _proxy = start(one(socket(addr, echo.addr, Some(s), None))).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET / HTTP/1.1\r\nhost: h\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    // The command line's header timeout is 5 s in tests; this listener's is 300 ms.
    let ended = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the connection is closed");
}

#[tokio::test]
async fn a_removed_listener_drains_within_its_proxy_configs_window() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let s = ListenerSettings {
        drain: Some(Duration::from_millis(200)),
        ..settings()
    };
    let proxy = start(one(socket(addr, echo.addr, Some(s), None))).await;
    let held = tokio::spawn(async move {
        send(
            &h1_client(),
            crate::support::client::get(addr, "h", "/?delay=4s"),
        )
        .await
    });
    // Bounded wait until the held request is in flight, then remove the listener.
    for _ in 0..100 {
        if proxy
            .metrics
            .encode()
            .contains("edgeplane_connections_open{listener=")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let removed = Instant::now();
    proxy.publish(table(2, vec![])).await;
    // The command line's drain is 5 s and the request wants 4 s; the listener's 200 ms cut it.
    let outcome = tokio::time::timeout(Duration::from_secs(3), held)
        .await
        .expect("the held request ends with the drain window")
        .unwrap();
    assert!(outcome.is_err(), "cut, not answered: {outcome:?}");
    assert!(removed.elapsed() < Duration::from_secs(3));
}
