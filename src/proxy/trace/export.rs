//! Span export: the spans of sampled requests leave the request through a bounded queue to a
//! task that encodes them in batches as OTLP protobuf ([`super::encode`]) and posts them to
//! the collector over HTTP. Off unless `--otlp-endpoint` names a collector. A request is
//! sampled when its parent was (the client's `traceparent` says so), else by
//! `--otlp-sample-ratio`; a span the queue has no room for is dropped and counted, never
//! waited for. The task sends a batch when [`BATCH`] spans wait or every [`FLUSH_EVERY`],
//! whichever comes first, so a busy proxy does not outrun its queue between two sends.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Uri, Version};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use prometheus::IntCounter;
use tokio::sync::{mpsc, Notify};

use super::context::SpanIds;
use super::encode::Batch;
use crate::table::RouteRule;

/// Spans the queue holds before new ones are dropped.
const QUEUE: usize = 4096;

/// Spans sent in one export at most; a batch this full is sent at once.
const BATCH: usize = 512;

/// How often queued spans are sent when fewer than [`BATCH`] wait.
const FLUSH_EVERY: Duration = Duration::from_millis(500);

/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where spans go and which requests make one.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceExport {
    /// The collector's OTLP/HTTP address, e.g. `http://otel-collector:4318` (spans are posted
    /// to its `/v1/traces`, unless the URL names another path).
    pub endpoint: String,
    /// Share of requests without a sampled parent that are exported (0.0 to 1.0).
    pub sample_ratio: f64,
}

/// Why span export cannot start.
#[derive(Debug, thiserror::Error)]
pub enum TraceExportError {
    #[error("--otlp-endpoint {endpoint:?}: {reason}")]
    Endpoint { endpoint: String, reason: String },
}

/// The sending side: what requests hand their spans to.
#[derive(Debug, Clone)]
pub(crate) struct SpanSink {
    queue: mpsc::Sender<Box<Span>>,
    /// Wakes the export task when a full batch waits.
    full: Arc<Notify>,
    ratio: f64,
    dropped: IntCounter,
}

impl SpanSink {
    /// Checks `export`'s endpoint and starts the task that sends its batches (on the current
    /// tokio runtime).
    pub(crate) fn start(
        export: &TraceExport,
        dropped: IntCounter,
    ) -> Result<Self, TraceExportError> {
        Self::start_every(export, dropped, FLUSH_EVERY)
    }

    /// [`Self::start`], sending what waits every `flush_every`.
    fn start_every(
        export: &TraceExport,
        dropped: IntCounter,
        flush_every: Duration,
    ) -> Result<Self, TraceExportError> {
        let url = traces_url(&export.endpoint);
        let invalid = |reason: &str| TraceExportError::Endpoint {
            endpoint: export.endpoint.clone(),
            reason: reason.to_owned(),
        };
        let uri: Uri = url.parse().map_err(|_| invalid("not a URL"))?;
        match (uri.scheme_str(), uri.host()) {
            (Some("http"), Some(_)) => {}
            (Some("https"), _) => return Err(invalid("https is not supported (use http://)")),
            _ => return Err(invalid("not an http:// URL with a host")),
        }
        let (queue, spans) = mpsc::channel(QUEUE);
        let full = Arc::new(Notify::new());
        tokio::spawn(send_batches(uri, spans, full.clone(), flush_every));
        Ok(Self {
            queue,
            full,
            ratio: export.sample_ratio.clamp(0.0, 1.0),
            dropped,
        })
    }

    /// Whether the request of `ids` is exported: always when its parent was sampled, else by
    /// the ratio.
    pub(crate) fn samples(&self, ids: &SpanIds) -> bool {
        ids.parent_sampled || (self.ratio > 0.0 && fastrand::f64() < self.ratio)
    }

    /// Queues a finished span, or counts it as dropped when the queue is full.
    pub(crate) fn send(&self, span: Box<Span>) {
        if self.queue.try_send(span).is_err() {
            self.dropped.inc();
            return;
        }
        // When a whole number of batches waits: a wake-up per batch, none per span (a count
        // skipped by two requests at once is caught at the next multiple or by the timer).
        let waiting = QUEUE - self.queue.capacity();
        if waiting >= BATCH && waiting % BATCH == 0 {
            self.full.notify_one();
        }
    }
}

/// `endpoint` with `/v1/traces` when it names no path of its own.
fn traces_url(endpoint: &str) -> String {
    signal_url(endpoint, "/v1/traces")
}

/// `endpoint` with `path` (a signal's, e.g. `/v1/logs`) when it names no path of its own.
pub(crate) fn signal_url(endpoint: &str, path: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    let has_path = trimmed
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains('/'));
    if has_path {
        trimmed.to_owned()
    } else {
        format!("{trimmed}{path}")
    }
}

/// Sends the queued spans in batches of up to [`BATCH`]: at once when a batch is full, else
/// every `flush_every`; ends when every sender is gone.
async fn send_batches(
    url: Uri,
    mut spans: mpsc::Receiver<Box<Span>>,
    full: Arc<Notify>,
    flush_every: Duration,
) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut batch = Batch::new("edgeplane", env!("CARGO_PKG_VERSION"));
    loop {
        // Waiting on a timer and a batch-full signal rather than on the queue spares every
        // request a wake-up of this task.
        tokio::select! {
            () = tokio::time::sleep(flush_every) => {}
            () = full.notified() => {}
        }
        let mut ended = false;
        loop {
            while batch.len < BATCH {
                match spans.try_recv() {
                    Ok(span) => batch.push(&span),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        ended = true;
                        break;
                    }
                }
            }
            if batch.len == 0 {
                break;
            }
            let (count, was_full) = (batch.len, batch.len == BATCH);
            if let Err(error) = post(&client, &url, batch.take()).await {
                tracing::warn!(%error, spans = count, "spans not exported");
            }
            if !was_full {
                break;
            }
        }
        if ended {
            return;
        }
    }
}

/// Posts one encoded `ExportTraceServiceRequest`.
async fn post(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    url: &Uri,
    body: Vec<u8>,
) -> Result<(), String> {
    let request = Request::post(url.clone())
        .header(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        )
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let sent = tokio::time::timeout(EXPORT_TIMEOUT, async {
        let response = client.request(request).await.map_err(|e| e.to_string())?;
        let status = response.status();
        // Read the answer whole so the connection is kept for the next batch.
        let _ = response.into_body().collect().await;
        match status.is_success() {
            true => Ok(()),
            false => Err(format!("the collector answered {status}")),
        }
    })
    .await;
    sent.unwrap_or_else(|_| Err(format!("no answer in {}s", EXPORT_TIMEOUT.as_secs())))
}

/// The proxy's span of one request: what the request kept of its head and of how it was
/// served, encoded only by the export task.
#[derive(Debug)]
pub(crate) struct Span {
    pub ids: SpanIds,
    pub start: SystemTime,
    pub end: SystemTime,
    /// The span's name too (`{method}`, the OpenTelemetry HTTP server span name without a
    /// route template).
    pub method: Method,
    pub path: String,
    pub tls: bool,
    pub host: Option<HeaderValue>,
    pub version: Version,
    pub client: IpAddr,
    pub user_agent: Option<HeaderValue>,
    pub request_id: HeaderValue,
    /// The response status code, once there is one.
    pub status: Option<u16>,
    /// The rule that matched, when one did.
    pub rule: Option<Arc<RouteRule>>,
    pub upstream: Option<SocketAddr>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_to_a_bare_collector_address() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/otlp/v1/traces"),
            "http://c:4318/otlp/v1/traces"
        );
    }

    #[test]
    fn only_plain_http_collectors_are_accepted() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _entered = runtime.enter();
        for (endpoint, why) in [
            ("https://c:4318", "https is not supported"),
            ("ftp://c:4318", "not an http:// URL"),
            ("http://", "not a URL"),
        ] {
            let export = TraceExport {
                endpoint: endpoint.into(),
                sample_ratio: 1.0,
            };
            let dropped = IntCounter::new("d", "d").unwrap();
            let err = SpanSink::start(&export, dropped).unwrap_err().to_string();
            assert!(err.contains(why), "{endpoint}: {err}");
        }
    }

    fn span() -> Box<Span> {
        let ids = SpanIds {
            trace_id: 1,
            span_id: 2,
            parent: None,
            parent_sampled: false,
        };
        Box::new(Span {
            ids,
            start: SystemTime::now(),
            end: SystemTime::now(),
            method: Method::GET,
            path: "/".into(),
            tls: false,
            host: None,
            version: Version::HTTP_11,
            client: "127.0.0.1".parse().unwrap(),
            user_agent: None,
            request_id: HeaderValue::from_static("id"),
            status: Some(200),
            rule: None,
            upstream: None,
        })
    }

    /// A collector on loopback that reports the span count of each export it receives.
    async fn collector() -> (SocketAddr, mpsc::UnboundedReceiver<usize>) {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
        use prost::Message;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let tx = tx.clone();
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let tx = tx.clone();
                        async move {
                            let body = req.into_body().collect().await?.to_bytes();
                            let export = ExportTraceServiceRequest::decode(body).unwrap();
                            let spans = export.resource_spans[0].scope_spans[0].spans.len();
                            let _ = tx.send(spans);
                            Ok::<_, hyper::Error>(hyper::Response::new(Full::new(Bytes::new())))
                        }
                    });
                let io = hyper_util::rt::TokioIo::new(stream);
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new().serve_connection(io, service),
                );
            }
        });
        (addr, rx)
    }

    #[tokio::test]
    async fn a_full_batch_is_sent_at_once_and_the_rest_by_the_timer() {
        let (addr, mut exports) = collector().await;
        let export = TraceExport {
            endpoint: format!("http://{addr}"),
            sample_ratio: 1.0,
        };
        let dropped = IntCounter::new("d", "d").unwrap();
        // A timer of an hour: only a full batch can make the first export.
        let sink =
            SpanSink::start_every(&export, dropped.clone(), Duration::from_secs(3600)).unwrap();
        for _ in 0..BATCH + 3 {
            sink.send(span());
        }
        let first = tokio::time::timeout(Duration::from_secs(30), exports.recv()).await;
        assert_eq!(
            first.expect("a full batch, sent before the timer").unwrap(),
            BATCH
        );
        // What queued behind a full batch goes with it.
        let rest = tokio::time::timeout(Duration::from_secs(30), exports.recv()).await;
        assert_eq!(rest.expect("the rest").unwrap(), 3);
        assert_eq!(dropped.get(), 0);
        // Less than a batch waits for the timer.
        let sink = SpanSink::start_every(&export, dropped, Duration::from_millis(50)).unwrap();
        sink.send(span());
        let next = tokio::time::timeout(Duration::from_secs(30), exports.recv()).await;
        assert_eq!(next.expect("the timer's export").unwrap(), 1);
    }
}
