//! The access log through the proxy: the command line's format for listeners without a
//! ProxyConfig (one JSON line per request with every field), and a listener's ProxyConfig
//! choosing text and its own fields. Lines are captured instead of written to stdout.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgeplane::proxy::{AccessSink, LogSpec, ProxyOptions};
use edgeplane::table::{AccessLog, AccessLogFormat, ListenerSettings, ListenerTable};
use serde_json::Value;

use crate::support::client::{get, h1_client, request, send};
use crate::support::echo::start_echo;
use crate::support::net::free_addr;
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
    assert_eq!(line["route"], "default/r");
    assert_eq!(line["upstream"], echo.addr.to_string());
    assert_eq!(line["userAgent"], "tester/1");
    assert_eq!(line["requestId"], "req-42");
    assert_eq!(line["responseBytes"], reply.body.len() as u64);
    assert_eq!(line["requestBytes"], 0);
    assert!(line["clientAddress"].as_str().unwrap().starts_with("127."));
    assert!(line["duration"].as_f64().unwrap() >= 0.0);
    assert!(line["time"].as_str().unwrap().ends_with('Z'));
    let second = send(&client, get(json_addr, "example.com", "/")).await;
    assert_eq!(second.unwrap().status, 200);
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
