//! The access log through the proxy: the command line's format for listeners without a
//! ProxyConfig (one JSON line per request with every field), and a listener's ProxyConfig
//! choosing text and its own fields; the request id made when a request has none, sent
//! upstream and back; one line per TCP stream and per UDP session; a `client_closed` line for a
//! request its client abandoned. Lines are captured instead of written to stdout.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgeplane::proxy::{AccessSink, LogSpec, ProxyOptions};
use edgeplane::table::{
    AccessLog, AccessLogFormat, BackendSet, L4Route, L4Routes, ListenerSettings, ListenerTable,
    RouteRef, RouteTable,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::mpsc;

use crate::support::client::{empty, get, h1_client, request, send, H2c};
use crate::support::echo::start_echo;
use crate::support::net::{bind_loopback, free_addr, loopback_ip};
use crate::support::proxy::{start_with, test_options};
use crate::support::tables::*;

/// Waits (bounded) until `lines` holds `n` lines: a line is written once its response body
/// has been sent, just after the client has read it.
async fn wait_lines(lines: &Arc<Mutex<Vec<String>>>, n: usize) -> Vec<String> {
    for _ in 0..100 {
        let got = lines.lock().unwrap().clone();
        if got.len() >= n {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("expected {n} lines, got {:?}", lines.lock().unwrap());
}

#[tokio::test]
async fn json_lines_by_default_and_text_where_a_proxy_config_says_so() {
    let echo = start_echo("a").await;
    let svc = service("app", &[echo.addr]);
    let json_addr = free_addr();
    let text_addr = free_addr();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let options = ProxyOptions {
        access_log: LogSpec::new(AccessLogFormat::Json),
        access_sink: AccessSink::Capture(lines.clone()),
        ..test_options()
    };
    let rules = || vec![rule("r").backend(to(&svc)).build()];
    let mut text = ListenerTable::new(
        text_addr,
        vec![edgeplane::table::SocketSource::gateway(
            "default", "gw", "text",
        )],
        vec![vhost("*", rules())],
    );
    text.settings = Some(Arc::new(ListenerSettings {
        source: "default/config".into(),
        access_log: Some(AccessLog {
            format: AccessLogFormat::Text,
            fields: vec!["method".into(), "path".into(), "status".into()],
        }),
        ..ListenerSettings::default()
    }));
    let t = table(
        1,
        vec![
            listener(json_addr, vec![vhost("*", rules())]),
            Arc::new(text),
        ],
    );
    let _proxy = start_with(t, options).await;
    let client = h1_client();
    let req = request(http::Method::GET, json_addr, "example.com", "/hello?x=1")
        .header("user-agent", "tester/1")
        .header("x-request-id", "req-42")
        .body(crate::support::client::empty())
        .unwrap();
    let reply = send(&client, req).await.unwrap();
    assert_eq!(reply.status, 200);
    let got = wait_lines(&lines, 1).await;
    let line: Value = serde_json::from_str(&got[0]).expect("a JSON line");
    assert_eq!(line["method"], "GET");
    assert_eq!(line["host"], "example.com");
    assert_eq!(line["path"], "/hello?x=1");
    assert_eq!(line["protocol"], "HTTP/1.1");
    assert_eq!(line["status"], 200);
    assert_eq!(line["route"], "HTTPRoute/default/r");
    assert_eq!(line["rule"], "0");
    assert_eq!(line["upstream"], echo.addr.to_string());
    assert_eq!(line["gateway"], "default/gw");
    assert_eq!(line["listener"], json_addr.port().to_string());
    assert_eq!(line["decision"], "proxied");
    assert_eq!(line["retries"], 0);
    let upstream_time = line["upstreamTime"].as_f64().unwrap();
    assert!(upstream_time > 0.0 && upstream_time <= line["duration"].as_f64().unwrap());
    assert_eq!(line["userAgent"], "tester/1");
    assert_eq!(line["requestId"], "req-42");
    assert_eq!(line["responseBytes"], reply.body.len() as u64);
    assert_eq!(line["requestBytes"], 0);
    assert!(line["clientAddress"].as_str().unwrap().starts_with("127."));
    assert!(line["duration"].as_f64().unwrap() >= 0.0);
    assert!(line["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(reply.headers["x-request-id"], "req-42");
    // Without an id, one is made: the backend sees it, the client gets it, the line has it.
    let second = send(&client, get(json_addr, "example.com", "/"))
        .await
        .unwrap();
    assert_eq!(second.status, 200);
    let made = second.headers["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(made.len(), 32, "{made}");
    assert_eq!(second.echoed_header("x-request-id"), vec![made.clone()]);
    let got = wait_lines(&lines, 2).await;
    let line: Value = serde_json::from_str(&got[1]).expect("a JSON line");
    assert_eq!(line["requestId"], made.as_str());
    // The trace the backend was told of.
    let traceparent = second.echoed_header("traceparent");
    assert_eq!(line["traceId"], traceparent[0].split('-').nth(1).unwrap());
    let reply = send(&client, get(text_addr, "example.com", "/t"))
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    let got = wait_lines(&lines, 3).await;
    assert!(
        got.iter().any(|l| l == "method=GET path=/t status=200"),
        "{got:?}"
    );
}

/// One JSON line per TCP stream and per UDP session, with the route, the endpoint and the
/// bytes each way, written when the stream closes and when the session ends (idle).
#[tokio::test]
async fn tcp_streams_and_udp_sessions_get_a_line_each() {
    let (tcp_backend, _t) = crate::l4::tcp_echo("t").await;
    let (udp_backend, _u) = crate::l4::udp_echo("u").await;
    let tcp_addr = free_addr();
    let udp_addr = crate::l4::free_udp_addr();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let options = ProxyOptions {
        access_log: LogSpec::new(AccessLogFormat::Json),
        access_sink: AccessSink::Capture(lines.clone()),
        udp_idle_timeout: Duration::from_millis(300),
        ..test_options()
    };
    let l4 = |addr, kind: &str, backend, routes: fn(L4Route) -> L4Routes| {
        let route = L4Route {
            route: Arc::new(RouteRef::new(
                if kind == "tcp" {
                    "TCPRoute"
                } else {
                    "UDPRoute"
                },
                "default",
                kind,
            )),
            backends: Arc::new(BackendSet::new(vec![weighted(
                &service(kind, &[backend]),
                1,
            )])),
        };
        ListenerTable::new(
            addr,
            vec![edgeplane::table::SocketSource::gateway(
                "default", "gw", kind,
            )],
            Vec::<edgeplane::table::VirtualHost>::new(),
        )
        .with_l4(routes(route))
    };
    let mut t = RouteTable::default();
    t.listeners.insert(
        tcp_addr,
        Arc::new(l4(tcp_addr, "tcp", tcp_backend, |r| L4Routes::Tcp {
            route: Some(r),
        })),
    );
    t.udp.insert(
        udp_addr,
        Arc::new(l4(udp_addr, "udp", udp_backend, |r| L4Routes::Udp {
            route: Some(r),
        })),
    );
    let _proxy = start_with(t, options).await;

    let mut stream = TcpStream::connect(tcp_addr).await.unwrap();
    let mut greeting = [0u8; 2];
    stream.read_exact(&mut greeting).await.unwrap();
    stream.write_all(b"hello").await.unwrap();
    let mut echoed = [0u8; 5];
    stream.read_exact(&mut echoed).await.unwrap();
    drop(stream);
    let client = UdpSocket::bind((loopback_ip(), 0)).await.unwrap();
    let mut reply = None;
    for _ in 0..5 {
        reply = crate::l4::ask(&client, udp_addr, "ping").await;
        if reply.is_some() {
            break;
        }
    }
    assert_eq!(reply.as_deref(), Some("u:ping"));

    let got = wait_lines(&lines, 2).await;
    let parsed: Vec<Value> = got
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tcp = parsed
        .iter()
        .find(|l| l["protocol"] == "tcp")
        .expect("a tcp line");
    assert_eq!(tcp["route"], "TCPRoute/default/tcp");
    assert_eq!(tcp["decision"], "proxied");
    assert_eq!(tcp["gateway"], "default/gw");
    assert_eq!(tcp["upstreamTime"], Value::Null);
    assert_eq!(tcp["upstream"], tcp_backend.to_string());
    assert_eq!(tcp["requestBytes"], 5);
    assert_eq!(tcp["responseBytes"], 7, "greeting t\\n and the echo");
    assert_eq!(tcp["status"], Value::Null);
    assert_eq!(tcp["method"], Value::Null);
    assert!(tcp["clientAddress"].as_str().unwrap().starts_with("127."));
    let udp = parsed
        .iter()
        .find(|l| l["protocol"] == "udp")
        .expect("a udp line");
    assert_eq!(udp["route"], "UDPRoute/default/udp");
    assert_eq!(udp["decision"], "proxied");
    assert_eq!(udp["gateway"], "default/gw");
    assert_eq!(udp["upstream"], udp_backend.to_string());
    assert!(udp["requestBytes"].as_u64().unwrap() >= 4);
    assert_eq!(
        udp["requestBytes"].as_u64().unwrap() % 4,
        0,
        "whole datagrams of ping"
    );
    assert!(udp["responseBytes"].as_u64().unwrap() >= 6);
    // Ended by the 300 ms idle timeout, which counts from the datagram in whole
    // milliseconds, a little before the session (and its line) started.
    assert!(
        udp["duration"].as_f64().unwrap() >= 0.28,
        "ended by the idle timeout: {udp}"
    );
}

/// A backend that reads requests and never answers. Each connection reports `request` when
/// bytes arrive and `closed` when the proxy closes it.
async fn silent_backend() -> (std::net::SocketAddr, mpsc::Receiver<&'static str>) {
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let mut told = false;
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => {
                            let _ = tx.send("closed").await;
                            return;
                        }
                        Ok(_) if !told => {
                            told = true;
                            let _ = tx.send("request").await;
                        }
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    (addr, rx)
}

/// The backend's next event, waited for at most 10 s.
async fn next(events: &mut mpsc::Receiver<&'static str>) -> &'static str {
    tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .expect("a backend event in time")
        .expect("the backend runs")
}

/// A request whose client goes away while the backend holds it (an HTTP/1.1 connection
/// closed, an HTTP/2 stream reset) is cancelled, its upstream connection closed, and it still
/// gets a line: status 499, decision `client_closed`, with the route it had matched.
#[tokio::test]
async fn requests_their_clients_abandon_get_a_client_closed_line() {
    let (backend, mut events) = silent_backend().await;
    let svc = service("slow", &[backend]);
    let addr = free_addr();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let options = ProxyOptions {
        access_log: LogSpec::new(AccessLogFormat::Json),
        access_sink: AccessSink::Capture(lines.clone()),
        ..test_options()
    };
    let rules = vec![rule("r").backend(to(&svc)).build()];
    let t = table(1, vec![listener(addr, vec![vhost("*", rules)])]);
    let _proxy = start_with(t, options).await;

    // HTTP/1.1: the client closes its connection.
    let mut client = TcpStream::connect(addr).await.unwrap();
    client
        .write_all(b"GET /h1 HTTP/1.1\r\nhost: example.com\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(next(&mut events).await, "request");
    drop(client);
    let line = abandoned(&mut events, &lines, 1).await;
    assert_eq!(line["path"], "/h1");
    assert_eq!(line["protocol"], "HTTP/1.1");
    assert_eq!(line["gateway"], "default/gw");
    assert_eq!(line["responseBytes"], 0);

    // HTTP/2: the client resets the stream (its request's future dropped).
    let mut h2 = H2c::connect(addr).await.unwrap();
    let req = H2c::request(http::Method::GET, "example.com", "/h2")
        .body(empty())
        .unwrap();
    {
        let sent = h2.send(req);
        tokio::pin!(sent);
        tokio::select! {
            answered = &mut sent => {
                panic!("answered: {:?}", answered.map(|r| r.status).map_err(|e| e.to_string()))
            }
            event = next(&mut events) => assert_eq!(event, "request"),
        }
    }
    let line = abandoned(&mut events, &lines, 2).await;
    assert_eq!(line["path"], "/h2");
    assert_eq!(line["protocol"], "HTTP/2");
}

/// After a client went away: the backend's connection closes (the upstream exchange ends) and
/// the `n`th line says the request was abandoned, with the route it had matched.
async fn abandoned(
    events: &mut mpsc::Receiver<&'static str>,
    lines: &Arc<Mutex<Vec<String>>>,
    n: usize,
) -> Value {
    assert_eq!(next(events).await, "closed", "the upstream exchange ends");
    let got = wait_lines(lines, n).await;
    let line: Value = serde_json::from_str(&got[n - 1]).expect("a JSON line");
    assert_eq!(line["status"], 499);
    assert_eq!(line["decision"], "client_closed");
    assert_eq!(line["route"], "HTTPRoute/default/r");
    line
}
