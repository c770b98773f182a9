//! Tracing: the proxy's span in each request's W3C trace (`context`: `traceparent` read,
//! continued and sent upstream) and, when `--otlp-endpoint` is set, the export of sampled
//! spans over OTLP (`export`, encoded by `encode`). [`RequestTrace`] is what one request
//! carries between them.

pub(crate) mod context;
mod encode;
pub(crate) mod export;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::SystemTime;

use http::header::{self, Entry};
use http::{HeaderValue, Request};

pub(crate) use export::{Span, SpanSink};
pub use export::{TraceExport, TraceExportError};

use crate::table::RouteRule;
use context::{SpanIds, TRACEPARENT};

/// One request's place in its trace, and its span when the request is exported.
#[derive(Debug)]
pub(crate) struct RequestTrace {
    pub ids: SpanIds,
    pub span: Option<Box<Span>>,
}

/// What a request's span says of the request head besides the request itself.
pub(crate) struct Head<'a> {
    pub tls: bool,
    pub client: IpAddr,
    pub request_id: &'a HeaderValue,
}

impl RequestTrace {
    /// The proxy's span for `req`, whose `traceparent` is replaced by the one the upstream
    /// request carries; a span to export when `sink` samples the request.
    /// One lookup of `traceparent` in the request's headers, read and replaced through it:
    /// every request comes through here.
    pub(crate) fn begin<B>(sink: Option<&SpanSink>, req: &mut Request<B>, head: Head<'_>) -> Self {
        let (ids, sampled) = match req.headers_mut().entry(TRACEPARENT) {
            Entry::Occupied(mut given) => {
                let (ids, sampled) = ids_of(sink, given.iter());
                // Replaces every value the client sent.
                given.insert(context::header(&ids, sampled));
                (ids, sampled)
            }
            Entry::Vacant(slot) => {
                let (ids, sampled) = ids_of(sink, std::iter::empty());
                slot.insert(context::header(&ids, sampled));
                (ids, sampled)
            }
        };
        let span = (sink.is_some() && sampled).then(|| {
            let headers = req.headers();
            Box::new(Span {
                ids,
                start: SystemTime::now(),
                end: SystemTime::UNIX_EPOCH,
                method: req.method().clone(),
                path: req.uri().path().to_owned(),
                tls: head.tls,
                host: headers.get(header::HOST).cloned().or_else(|| {
                    let host = req.uri().host()?;
                    HeaderValue::from_str(host).ok()
                }),
                version: req.version(),
                client: head.client,
                user_agent: headers.get(header::USER_AGENT).cloned(),
                request_id: head.request_id.clone(),
                status: None,
                rule: None,
                upstream: None,
            })
        });
        Self { ids, span }
    }

    /// Completes the span with the response's status and what routing chose, and queues it.
    pub(crate) fn finish(
        self,
        sink: Option<&SpanSink>,
        status: u16,
        rule: Option<&Arc<RouteRule>>,
        upstream: Option<SocketAddr>,
    ) {
        let (Some(sink), Some(mut span)) = (sink, self.span) else {
            return;
        };
        span.end = SystemTime::now();
        span.status = Some(status);
        span.rule = rule.cloned();
        span.upstream = upstream;
        sink.send(span);
    }
}

/// The proxy's span for a request whose `traceparent` values are `given`, and whether it is
/// sampled: by `sink` when spans are exported, else as the caller decided.
fn ids_of<'a>(
    sink: Option<&SpanSink>,
    given: impl Iterator<Item = &'a HeaderValue>,
) -> (SpanIds, bool) {
    let ids = context::span_for(given);
    let sampled = match sink {
        Some(sink) => sink.samples(&ids),
        // Not recording: the caller's decision goes on unchanged.
        None => ids.parent_sampled,
    };
    (ids, sampled)
}
