//! Tracing through the proxy: the backend sees the client's trace continued with the proxy's
//! own span id (and `tracestate` untouched), a request without a trace gets one, and the spans
//! of sampled requests reach an OTLP/HTTP receiver of the test's own with the right parent and
//! attributes; a request neither sampled by its parent nor by the ratio sends no span. With the
//! access log on, every line reaches the receiver as a log record of the request's trace.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use edgeplane::proxy::{AccessSink, LogSpec, ProxyOptions, TraceExport};
use edgeplane::table::AccessLogFormat;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

use crate::support::client::{h1_client, request, send};
use crate::support::echo::start_echo;
use crate::support::net::{bind_loopback, free_addr};
use crate::support::proxy::{start_with, test_options};
use crate::support::tables::*;

type Logs = Arc<Mutex<Vec<LogRecord>>>;

/// An OTLP/HTTP receiver on loopback: every span of every `POST /v1/traces` and every log
/// record of every `POST /v1/logs` it was sent.
async fn otlp_receiver() -> (SocketAddr, Arc<Mutex<Vec<Span>>>, Logs) {
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    let spans = Arc::new(Mutex::new(Vec::new()));
    let logs: Logs = Arc::default();
    let got = (spans.clone(), logs.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let got = got.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (spans, logs) = got.clone();
                    async move {
                        let path = req.uri().path().to_owned();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        if path == "/v1/logs" {
                            let export = ExportLogsServiceRequest::decode(body).expect("protobuf");
                            for resource in export.resource_logs {
                                for scope in resource.scope_logs {
                                    logs.lock().unwrap().extend(scope.log_records);
                                }
                            }
                        } else {
                            assert_eq!(path, "/v1/traces");
                            let export = ExportTraceServiceRequest::decode(body).expect("protobuf");
                            for resource in export.resource_spans {
                                for scope in resource.scope_spans {
                                    spans.lock().unwrap().extend(scope.spans);
                                }
                            }
                        }
                        Ok::<_, Infallible>(
                            hyper::Response::builder()
                                .header("content-type", "application/x-protobuf")
                                .body(Full::new(Bytes::new()))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, spans, logs)
}

/// The span of trace `trace_id` (hex), waiting (bounded) until it arrives.
async fn wait_span(spans: &Arc<Mutex<Vec<Span>>>, trace_id: &str) -> Span {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let found = spans
            .lock()
            .unwrap()
            .iter()
            .find(|s| hex(&s.trace_id) == trace_id)
            .cloned();
        if let Some(span) = found {
            return span;
        }
        assert!(Instant::now() < deadline, "no span of trace {trace_id}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(span: &Span) -> HashMap<String, String> {
    span.attributes
        .iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => s.clone(),
                Some(AnyValue::IntValue(i)) => i.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

/// `00-trace-span-flags` split.
fn parts(traceparent: &str) -> (String, String, String) {
    let p: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(p.len(), 4, "{traceparent}");
    (p[1].to_owned(), p[2].to_owned(), p[3].to_owned())
}

#[tokio::test]
async fn traces_are_continued_upstream_and_sampled_spans_exported() {
    let (collector, spans, logs) = otlp_receiver().await;
    let echo = start_echo("a").await;
    let svc = service("app", &[echo.addr]);
    let addr = free_addr();
    let options = ProxyOptions {
        access_log: LogSpec::new(AccessLogFormat::Json),
        access_sink: AccessSink::Capture(Arc::default()),
        trace_export: Some(TraceExport {
            endpoint: format!("http://{collector}"),
            sample_ratio: 0.0,
        }),
        ..test_options()
    };
    let t = table(
        1,
        vec![listener(
            addr,
            vec![vhost("*", vec![rule("r").backend(to(&svc)).build()])],
        )],
    );
    let _proxy = start_with(t, options).await;
    let client = h1_client();

    // A sampled parent: continued with the proxy's span, exported whatever the ratio.
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let req = request(http::Method::GET, addr, "example.com", "/shop?x=1")
        .header("traceparent", format!("00-{trace}-{parent}-01"))
        .header("tracestate", "vendor=opaque")
        .body(crate::support::client::empty())
        .unwrap();
    let reply = send(&client, req).await.unwrap();
    assert_eq!(reply.status, 200);
    let upstream = reply.echoed_header("traceparent");
    assert_eq!(upstream.len(), 1, "{upstream:?}");
    let (up_trace, up_span, up_flags) = parts(&upstream[0]);
    assert_eq!(up_trace, trace);
    assert_ne!(up_span, parent);
    assert_eq!(up_flags, "01");
    assert_eq!(reply.echoed_header("tracestate"), vec!["vendor=opaque"]);

    let span = wait_span(&spans, trace).await;
    assert_eq!(hex(&span.parent_span_id), parent);
    assert_eq!(
        hex(&span.span_id),
        up_span,
        "the span the backend was told of"
    );
    assert_eq!(span.name, "GET");
    assert_eq!(span.kind, 2, "SPAN_KIND_SERVER");
    let attrs = attributes(&span);
    assert_eq!(attrs["http.request.method"], "GET");
    assert_eq!(attrs["url.path"], "/shop");
    assert_eq!(attrs["url.scheme"], "http");
    assert_eq!(attrs["server.address"], "example.com");
    assert_eq!(attrs["http.response.status_code"], "200");
    assert_eq!(attrs["edgeplane.route"], "HTTPRoute/default/r");
    assert_eq!(attrs["edgeplane.upstream.address"], echo.addr.to_string());
    assert_eq!(attrs["edgeplane.request_id"].len(), 32);
    assert!(span.end_time_unix_nano >= span.start_time_unix_nano);

    // No trace and a ratio of 0: the backend gets a new, unsampled trace; no span is sent.
    let unsampled = send(
        &client,
        crate::support::client::get(addr, "example.com", "/"),
    )
    .await
    .unwrap();
    let (new_trace, _, flags) = parts(&unsampled.echoed_header("traceparent")[0]);
    assert_ne!(new_trace, trace);
    assert_eq!(flags, "00");
    // A later sampled request's span arrives; the unsampled one's never came before it.
    let later = "0af7651916cd43dd8448eb211c80319c";
    let req = request(http::Method::GET, addr, "example.com", "/later")
        .header("traceparent", format!("00-{later}-b7ad6b7169203331-01"))
        .body(crate::support::client::empty())
        .unwrap();
    assert_eq!(send(&client, req).await.unwrap().status, 200);
    wait_span(&spans, later).await;
    let all = spans.lock().unwrap().clone();
    assert!(
        all.iter().all(|s| hex(&s.trace_id) != new_trace),
        "an unsampled request was exported"
    );

    // Each access log line reached the collector as a record of its request's trace, with
    // the proxy's span.
    let deadline = Instant::now() + Duration::from_secs(15);
    let record = loop {
        let found = logs
            .lock()
            .unwrap()
            .iter()
            .find(|r| hex(&r.trace_id) == trace)
            .cloned();
        if let Some(record) = found {
            break record;
        }
        assert!(Instant::now() < deadline, "no log record of trace {trace}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(hex(&record.span_id), up_span);
    let body = match record.body.and_then(|b| b.value) {
        Some(AnyValue::StringValue(s)) => s,
        other => panic!("body {other:?}"),
    };
    let line: serde_json::Value = serde_json::from_str(&body).expect("the JSON line");
    assert_eq!(line["path"], "/shop?x=1");
    assert_eq!(line["traceId"], trace);
}
