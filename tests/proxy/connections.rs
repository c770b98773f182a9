//! Connection phases and limits against raw sockets: a slow or partial HTTP/2 preface, a
//! stalled request head or body, idle keep-alive and HTTP/2 connections, the per-listener
//! connection limit, the per-endpoint upstream pool cap, and the drain closing idle
//! connections at once. Timeouts are short and every wait is bounded.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgeplane::proxy::ProxyOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::client::{get, h1_client, send};
use crate::support::echo::{start_echo, Echo};
use crate::support::net::{bind_loopback, free_addr};
use crate::support::proxy::{start_with, test_options, Running};
use crate::support::tables::*;

/// The HTTP/2 client preface.
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame.
pub(crate) const SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];
/// Upper bound of every wait for the server to close a connection.
const CLOSE_WITHIN: Duration = Duration::from_secs(3);

/// A proxy on a fresh address routing everything to `backend`, with `tune` applied to the
/// test options.
pub(crate) async fn proxy_to(
    backend: SocketAddr,
    tune: impl FnOnce(&mut ProxyOptions),
) -> (SocketAddr, Running) {
    let addr = free_addr();
    let mut options = test_options();
    tune(&mut options);
    let table = single(
        addr,
        vec![rule("r").backend(to(&service("b", &[backend]))).build()],
    );
    (addr, start_with(table, options).await)
}

/// Reads until the server closes the connection (EOF or reset), at most [`CLOSE_WITHIN`].
/// `Some(bytes)` when it closed in time.
async fn server_closes(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(CLOSE_WITHIN, read).await.ok()?;
    Some(out)
}

pub(crate) async fn connect(addr: SocketAddr) -> TcpStream {
    tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
        .await
        .expect("connect in time")
        .expect("connect")
}

#[tokio::test]
async fn partial_or_slow_http2_prefaces_are_closed() {
    let echo = start_echo("e").await;
    let (addr, _p) = proxy_to(echo.addr, |o| {
        o.handshake_timeout = Duration::from_millis(300);
        o.idle_timeout = Duration::from_millis(400);
    })
    .await;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("one byte of the preface", PREFACE[..1].to_vec()),
        ("half the preface", PREFACE[..12].to_vec()),
        ("the preface without SETTINGS", PREFACE.to_vec()),
        (
            "the preface and half a SETTINGS header",
            [PREFACE, &SETTINGS[..4]].concat(),
        ),
    ];
    for (what, bytes) in cases {
        let mut s = connect(addr).await;
        s.write_all(&bytes).await.unwrap();
        assert!(server_closes(&mut s).await.is_some(), "{what}: still open");
    }
    // A slow preface: one byte every 100 ms never completes within the handshake timeout.
    let mut s = connect(addr).await;
    let mut closed = false;
    for b in PREFACE {
        if s.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        closed || server_closes(&mut s).await.is_some(),
        "slow preface: still open"
    );
    // Preface and SETTINGS, then nothing: a valid HTTP/2 connection without streams, closed by
    // the idle timeout; the server's own SETTINGS and GOAWAY come first.
    let mut s = connect(addr).await;
    s.write_all(&[PREFACE, SETTINGS].concat()).await.unwrap();
    let out = server_closes(&mut s)
        .await
        .expect("idle HTTP/2 connection still open");
    assert!(
        out.len() >= 9 && out[3] == 4,
        "server SETTINGS first: {out:?}"
    );
    assert!(has_frame(&out, 7), "no GOAWAY before closing: {out:?}");
    // Nothing of the above broke the listener.
    assert_eq!(
        send(&h1_client(), get(addr, "h", "/"))
            .await
            .unwrap()
            .status,
        200
    );
}

/// True when the HTTP/2 frames in `bytes` include one of `kind`.
fn has_frame(bytes: &[u8], kind: u8) -> bool {
    let mut rest = bytes;
    while rest.len() >= 9 {
        let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        if rest[3] == kind {
            return true;
        }
        rest = rest.get(9 + len..).unwrap_or_default();
    }
    false
}

#[tokio::test]
async fn a_stalled_request_head_is_closed() {
    let echo = start_echo("e").await;
    let (addr, _p) = proxy_to(echo.addr, |o| {
        o.header_read_timeout = Duration::from_millis(300);
    })
    .await;
    let mut s = connect(addr).await;
    s.write_all(b"GET / HTTP/1.1\r\nHost: h\r\nX-Slow: ")
        .await
        .unwrap();
    assert!(
        server_closes(&mut s).await.is_some(),
        "stalled head still open"
    );
}

/// A backend that reads requests and never answers; `aborted` turns true when a connection
/// that carried request bytes is closed by the proxy.
async fn silent_backend() -> (SocketAddr, Arc<AtomicBool>, Echo) {
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    let aborted = Arc::new(AtomicBool::new(false));
    let flag = aborted.clone();
    let task = tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await?;
            let flag = flag.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let mut seen = 0;
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => seen += n,
                    }
                }
                if seen > 0 {
                    flag.store(true, Ordering::Release);
                }
            });
        }
    });
    (addr, aborted, Echo::from_task(addr, "silent", task))
}

#[tokio::test]
async fn a_stalled_request_body_gets_408_and_aborts_the_upstream_request() {
    let (backend, aborted, _b) = silent_backend().await;
    let (addr, _p) = proxy_to(backend, |o| {
        o.body_idle_timeout = Duration::from_millis(300);
    })
    .await;
    let mut s = connect(addr).await;
    s.write_all(b"POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\nten bytes.")
        .await
        .unwrap();
    let out = server_closes(&mut s)
        .await
        .expect("stalled body still open");
    let head = String::from_utf8_lossy(&out);
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    // The backend saw the request's first bytes, then its connection closed.
    let deadline = Instant::now() + CLOSE_WITHIN;
    while !aborted.load(Ordering::Acquire) {
        assert!(Instant::now() < deadline, "upstream request left hanging");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let echo = start_echo("e").await;
    let (addr, p) = proxy_to(echo.addr, |o| {
        o.idle_timeout = Duration::from_millis(300);
        // Longer than the wait below: the idle timer closes the connection, not the head timer.
        o.header_read_timeout = Duration::from_secs(10);
    })
    .await;
    let mut s = connect(addr).await;
    s.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        .await
        .unwrap();
    let out = server_closes(&mut s)
        .await
        .expect("idle keep-alive connection still open");
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 200"));
    let metrics = p.metrics.encode();
    assert!(
        metrics.contains("edgeplane_connections_closed_total{reason=\"idle\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn connections_over_the_limit_are_closed_at_once() {
    let echo = start_echo("e").await;
    let (addr, p) = proxy_to(echo.addr, |o| o.max_connections = 2).await;
    // Two keep-alive connections that have each been served stay open.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = connect(addr).await;
        s.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 12];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"HTTP/1.1 200");
        held.push(s);
    }
    let mut third = connect(addr).await;
    let _ = third.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").await;
    let out = server_closes(&mut third)
        .await
        .expect("third connection still open");
    assert!(
        out.is_empty(),
        "over the limit but served: {}",
        String::from_utf8_lossy(&out)
    );
    let metrics = p.metrics.encode();
    assert!(
        metrics.contains(&format!(
            "edgeplane_connections_refused_total{{listener=\"{addr}\"}} 1"
        )),
        "{metrics}"
    );
    // Once one closes, a new connection is served (the count drops when the task ends).
    drop(held.pop());
    let deadline = Instant::now() + CLOSE_WITHIN;
    loop {
        if let Ok(r) = send(&h1_client(), get(addr, "h", "/")).await {
            assert_eq!(r.status, 200);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no connection served after one closed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A backend answering 200 after `delay`, counting its open connections and the most it had.
async fn counting_backend(
    delay: Duration,
) -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>, Echo) {
    use hyper_util::rt::TokioIo;
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    let open = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (o, pk) = (open.clone(), peak.clone());
    let task = tokio::spawn(async move {
        loop {
            let (s, _) = listener.accept().await?;
            let now = o.fetch_add(1, Ordering::AcqRel) + 1;
            pk.fetch_max(now, Ordering::AcqRel);
            let o = o.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req| async move {
                    tokio::time::sleep(delay).await;
                    Ok::<_, std::convert::Infallible>(http::Response::new(
                        http_body_util::Full::new(bytes::Bytes::from_static(b"ok")),
                    ))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), service)
                    .await;
                o.fetch_sub(1, Ordering::AcqRel);
            });
        }
    });
    (addr, open, peak, Echo::from_task(addr, "counting", task))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_pool_keeps_at_most_the_cap_idle_per_endpoint() {
    let (backend, open, peak, _b) = counting_backend(Duration::from_millis(200)).await;
    let (addr, _p) = proxy_to(backend, |o| o.upstream_max_idle_per_endpoint = 2).await;
    let client = h1_client();
    let burst: Vec<_> = (0..12)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { send(&c, get(addr, "h", "/")).await })
        })
        .collect();
    for r in burst {
        assert_eq!(r.await.unwrap().unwrap().status, 200);
    }
    assert!(
        peak.load(Ordering::Acquire) > 2,
        "the burst did not open parallel connections"
    );
    let deadline = Instant::now() + CLOSE_WITHIN;
    while open.load(Ordering::Acquire) > 2 {
        assert!(
            Instant::now() < deadline,
            "{} upstream connections still open after the burst",
            open.load(Ordering::Acquire)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_closes_idle_connections_at_once_and_ends_with_the_last_request() {
    let echo = start_echo("e").await;
    let (addr, p) = proxy_to(echo.addr, |o| o.drain_timeout = Duration::from_secs(20)).await;
    // An idle keep-alive connection.
    let mut idle = connect(addr).await;
    idle.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 12];
    idle.read_exact(&mut buf).await.unwrap();
    // An idle HTTP/2 connection (prior knowledge): its SETTINGS exchange done, no stream.
    let mut h2 = connect(addr).await;
    h2.write_all(&[PREFACE, SETTINGS].concat()).await.unwrap();
    let mut settings = [0u8; 9];
    h2.read_exact(&mut settings).await.unwrap();
    assert_eq!(settings[3], 4, "server SETTINGS first: {settings:?}");
    let len = u32::from_be_bytes([0, settings[0], settings[1], settings[2]]) as usize;
    h2.read_exact(&mut vec![0u8; len]).await.unwrap();
    // A request in flight for a second.
    let mut busy = connect(addr).await;
    busy.write_all(b"GET /?delay=1s HTTP/1.1\r\nHost: h\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let proxy = p.proxy.clone();
    let shutdown = tokio::spawn(async move { proxy.shutdown().await });
    let idle_closed = tokio::time::timeout(Duration::from_millis(700), async {
        let mut rest = Vec::new();
        let _ = idle.read_to_end(&mut rest).await;
    })
    .await;
    assert!(
        idle_closed.is_ok(),
        "idle connection kept open while a request was in flight"
    );
    let h2_out = server_closes(&mut h2)
        .await
        .expect("idle HTTP/2 connection kept open at shutdown");
    assert!(has_frame(&h2_out, 7), "no GOAWAY at shutdown: {h2_out:?}");
    assert!(
        !shutdown.is_finished(),
        "shutdown did not wait for the in-flight request"
    );
    let out = server_closes(&mut busy)
        .await
        .expect("in-flight connection not closed after its response");
    let head = String::from_utf8_lossy(&out).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    // The drain ends with the last request, long before the 20 s drain timeout.
    tokio::time::timeout(CLOSE_WITHIN, shutdown)
        .await
        .expect("shutdown ended with the last request")
        .unwrap();
}
