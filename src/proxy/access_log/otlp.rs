//! Access log lines as OpenTelemetry log records, when span export is on (`--otlp-endpoint`):
//! each line goes to the collector's `/v1/logs` too, over OTLP/HTTP, with the request's trace
//! and span ids, so a backend that holds both joins a request's line and its span. Like the
//! spans, the records leave through a bounded queue to a task that sends them in batches; a
//! record the queue has no room for is dropped and counted.

use std::time::{Duration, SystemTime};

use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity};
use opentelemetry::trace::{SpanId, TraceFlags, TraceId};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::{
    LogBatch, LogExporter, LogProcessor, SdkLogRecord, SdkLogger, SdkLoggerProvider,
};
use opentelemetry_sdk::Resource;
use prometheus::IntCounter;
use tokio::sync::mpsc;

use super::Entry;
use crate::proxy::trace::export::signal_url;

/// Records the queue holds before new ones are dropped.
const QUEUE: usize = 4096;
/// Records sent in one export at most.
const BATCH: usize = 512;
/// How often queued records are sent.
const FLUSH_EVERY: Duration = Duration::from_millis(500);

/// The logger lines become records through.
pub(crate) struct OtlpLines {
    logger: SdkLogger,
    /// Keeps the logger's processor alive.
    _provider: SdkLoggerProvider,
}

impl std::fmt::Debug for OtlpLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpLines").finish_non_exhaustive()
    }
}

impl OtlpLines {
    /// Starts the export of records to the collector at `endpoint` (its `/v1/logs` unless the
    /// URL has a path), on the current tokio runtime; records dropped count in `dropped`.
    pub(crate) fn start(endpoint: &str, dropped: IntCounter) -> Result<Self, String> {
        let mut exporter = opentelemetry_otlp::LogExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(signal_url(endpoint, "/v1/logs"))
            .with_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?;
        exporter.set_resource(&resource());
        let (queue, records) = mpsc::channel(QUEUE);
        tokio::spawn(send_batches(exporter, records));
        let provider = SdkLoggerProvider::builder()
            .with_resource(resource())
            .with_log_processor(Forward { queue, dropped })
            .build();
        let logger = provider.logger("edgeplane.access_log");
        Ok(Self {
            logger,
            _provider: provider,
        })
    }

    /// Sends `line`, the formatted line of `entry`, as a record.
    pub(crate) fn send(&self, entry: &Entry, line: &str) {
        let mut record = self.logger.create_log_record();
        record.set_timestamp(SystemTime::from(entry.time));
        record.set_observed_timestamp(SystemTime::now());
        record.set_severity_number(Severity::Info);
        record.set_severity_text("INFO");
        record.set_body(AnyValue::String(line.to_owned().into()));
        record.add_attribute("network.protocol.name", entry.protocol);
        if let Some(status) = entry.status {
            record.add_attribute("http.response.status_code", i64::from(status));
        }
        if let Some(route) = &entry.route {
            record.add_attribute(
                "edgeplane.route",
                format!("{}/{}", route.kind(), route.label()),
            );
        }
        if let Some(trace_id) = entry.trace_id {
            let span = entry.span_id.map_or(SpanId::INVALID, SpanId::from);
            record.set_trace_context(TraceId::from(trace_id), span, Some(TraceFlags::default()));
        }
        self.logger.emit(record);
    }
}

fn resource() -> Resource {
    Resource::builder_empty()
        .with_service_name("edgeplane")
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The logger's processor: hands each record to the export task, never waiting.
#[derive(Debug)]
struct Forward {
    queue: mpsc::Sender<(SdkLogRecord, InstrumentationScope)>,
    dropped: IntCounter,
}

impl LogProcessor for Forward {
    fn emit(&self, record: &mut SdkLogRecord, scope: &InstrumentationScope) {
        if self
            .queue
            .try_send((record.clone(), scope.clone()))
            .is_err()
        {
            self.dropped.inc();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
}

/// Sends the queued records every [`FLUSH_EVERY`], in batches of up to [`BATCH`]; ends when
/// the logger is gone. Sleeping between batches spares each line a wake-up of this task.
async fn send_batches(
    exporter: opentelemetry_otlp::LogExporter,
    mut records: mpsc::Receiver<(SdkLogRecord, InstrumentationScope)>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut ended = false;
    while !ended {
        tokio::time::sleep(FLUSH_EVERY).await;
        loop {
            while batch.len() < BATCH {
                match records.try_recv() {
                    Ok(record) => batch.push(record),
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
            let full = batch.len() == BATCH;
            let refs: Vec<(&SdkLogRecord, &InstrumentationScope)> =
                batch.iter().map(|(r, s)| (r, s)).collect();
            if let Err(error) = exporter.export(LogBatch::new(&refs)).await {
                tracing::warn!(%error, records = refs.len(), "access log records not exported");
            }
            drop(refs);
            batch.clear();
            if !full || ended {
                break;
            }
        }
    }
}
