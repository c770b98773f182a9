//! Tracing: the proxy's span in each request's W3C trace (`context`: `traceparent` read,
//! continued and sent upstream) and, when `--otlp-endpoint` is set, the export of sampled
//! spans over OTLP (`export`). [`RequestTrace`] is what one request carries between them.

pub(crate) mod context;
pub(crate) mod export;

use std::borrow::Cow;
use std::net::IpAddr;
use std::time::SystemTime;

use http::{header, HeaderValue, Request, Version};
use opentelemetry::KeyValue;

pub(crate) use export::{Span, SpanSink};
pub use export::{TraceExport, TraceExportError};

use crate::table::RouteRule;
use context::{SpanIds, TRACEPARENT};

/// One request's place in its trace, and its span when the request is exported.
#[derive(Debug)]
pub(crate) struct RequestTrace {
    pub ids: SpanIds,
    pub span: Option<Span>,
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
    pub(crate) fn begin<B>(sink: Option<&SpanSink>, req: &mut Request<B>, head: Head<'_>) -> Self {
        let ids = context::span_for(req.headers());
        let sampled = match sink {
            Some(sink) => sink.samples(&ids),
            // Not recording: the caller's decision goes on unchanged.
            None => ids.parent_sampled,
        };
        let span = (sink.is_some() && sampled).then(|| Span {
            ids,
            start: SystemTime::now(),
            name: Cow::Owned(req.method().as_str().to_owned()),
            attributes: head.attributes(req),
            status: None,
        });
        req.headers_mut()
            .insert(TRACEPARENT, context::header(&ids, sampled));
        Self { ids, span }
    }

    /// Completes the span with the response's status and what routing chose, and queues it.
    pub(crate) fn finish(
        self,
        sink: Option<&SpanSink>,
        status: u16,
        route: Option<String>,
        rule: Option<&RouteRule>,
        upstream: Option<std::net::SocketAddr>,
    ) {
        let (Some(sink), Some(mut span)) = (sink, self.span) else {
            return;
        };
        span.status = Some(status);
        span.attributes.push(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        if let Some(route) = route {
            span.attributes
                .push(KeyValue::new("edgeplane.route", route));
        }
        if let Some(rule) = rule {
            let name = match &rule.rule_name {
                Some(name) => name.clone(),
                None => rule.rule_index.to_string(),
            };
            span.attributes.push(KeyValue::new("edgeplane.rule", name));
        }
        if let Some(addr) = upstream {
            span.attributes.push(KeyValue::new(
                "edgeplane.upstream.address",
                addr.to_string(),
            ));
        }
        sink.send(span);
    }
}

impl Head<'_> {
    /// The OpenTelemetry HTTP server attributes of the request head.
    fn attributes<B>(&self, req: &Request<B>) -> Vec<KeyValue> {
        let mut out = Vec::with_capacity(12);
        out.push(KeyValue::new(
            "http.request.method",
            req.method().as_str().to_owned(),
        ));
        out.push(KeyValue::new("url.path", req.uri().path().to_owned()));
        out.push(KeyValue::new(
            "url.scheme",
            if self.tls { "https" } else { "http" },
        ));
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| req.uri().host());
        if let Some(host) = host {
            out.push(KeyValue::new("server.address", host.to_owned()));
        }
        let version = match req.version() {
            Version::HTTP_10 => "1.0",
            Version::HTTP_2 => "2",
            Version::HTTP_3 => "3",
            _ => "1.1",
        };
        out.push(KeyValue::new("network.protocol.version", version));
        out.push(KeyValue::new("client.address", self.client.to_string()));
        let ua = req.headers().get(header::USER_AGENT);
        if let Some(ua) = ua.and_then(|v| v.to_str().ok()) {
            out.push(KeyValue::new("user_agent.original", ua.to_owned()));
        }
        if let Ok(id) = self.request_id.to_str() {
            out.push(KeyValue::new("edgeplane.request_id", id.to_owned()));
        }
        out
    }
}
