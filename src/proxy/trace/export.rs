//! Span export: the spans of sampled requests leave the request through a bounded queue to a
//! task that sends them in batches over OTLP/HTTP (protobuf) with the `opentelemetry-otlp`
//! exporter. Off unless `--otlp-endpoint` names a collector. A request is sampled when its
//! parent was (the client's `traceparent` says so), else by `--otlp-sample-ratio`; a span the
//! queue has no room for is dropped and counted, never waited for.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};
use opentelemetry_sdk::Resource;
use prometheus::IntCounter;
use tokio::sync::mpsc;

use super::context::SpanIds;

/// Spans the queue holds before new ones are dropped.
const QUEUE: usize = 4096;

/// Spans sent in one export at most.
const BATCH: usize = 512;

/// How often queued spans are sent.
const FLUSH_EVERY: Duration = Duration::from_millis(500);

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
    queue: mpsc::Sender<SpanData>,
    ratio: f64,
    dropped: IntCounter,
}

impl SpanSink {
    /// Builds the OTLP exporter for `export` and starts the task that sends its batches (on
    /// the current tokio runtime).
    pub(crate) fn start(
        export: &TraceExport,
        dropped: IntCounter,
    ) -> Result<Self, TraceExportError> {
        let url = traces_url(&export.endpoint);
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .with_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| TraceExportError::Endpoint {
                endpoint: export.endpoint.clone(),
                reason: e.to_string(),
            })?;
        exporter.set_resource(
            &Resource::builder_empty()
                .with_service_name("edgeplane")
                .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
                .build(),
        );
        let (queue, spans) = mpsc::channel(QUEUE);
        tokio::spawn(send_batches(exporter, spans));
        Ok(Self {
            queue,
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
    pub(crate) fn send(&self, span: Span) {
        if self.queue.try_send(span.into_data()).is_err() {
            self.dropped.inc();
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

/// Sends the queued spans every [`FLUSH_EVERY`], in batches of up to [`BATCH`]; ends when
/// every sender is gone.
async fn send_batches(
    exporter: opentelemetry_otlp::SpanExporter,
    mut spans: mpsc::Receiver<SpanData>,
) {
    loop {
        // Sleeping between batches rather than waiting on the queue spares every request a
        // wake-up of this task.
        tokio::time::sleep(FLUSH_EVERY).await;
        let mut ended = false;
        while !ended {
            let mut batch = Vec::with_capacity(BATCH);
            while batch.len() < BATCH {
                match spans.try_recv() {
                    Ok(span) => batch.push(span),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        ended = true;
                        break;
                    }
                }
            }
            if batch.is_empty() {
                break;
            }
            let count = batch.len();
            let full = count == BATCH;
            if let Err(error) = exporter.export(batch).await {
                tracing::warn!(%error, spans = count, "spans not exported");
            }
            if !full {
                break;
            }
        }
        if ended {
            return;
        }
    }
}

/// The proxy's span of one request, as the request fills it in.
#[derive(Debug)]
pub(crate) struct Span {
    pub ids: SpanIds,
    pub start: SystemTime,
    /// `{method}`, the OpenTelemetry HTTP server span name without a route template.
    pub name: Cow<'static, str>,
    pub attributes: Vec<KeyValue>,
    /// The response status code, once there is one.
    pub status: Option<u16>,
}

impl Span {
    fn into_data(self) -> SpanData {
        let context = SpanContext::new(
            TraceId::from(self.ids.trace_id),
            SpanId::from(self.ids.span_id),
            TraceFlags::SAMPLED,
            false,
            TraceState::NONE,
        );
        // Server spans are errors for 5xx only (the OpenTelemetry HTTP conventions).
        let status = match self.status {
            Some(code) if code >= 500 => Status::error(code.to_string()),
            _ => Status::Unset,
        };
        SpanData {
            span_context: context,
            parent_span_id: self.ids.parent.map_or(SpanId::INVALID, SpanId::from),
            parent_span_is_remote: self.ids.parent.is_some(),
            span_kind: SpanKind::Server,
            name: self.name,
            start_time: self.start,
            end_time: SystemTime::now(),
            attributes: self.attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: InstrumentationScope::builder("edgeplane").build(),
        }
    }
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
}
