//! Spans as OTLP protobuf (`ExportTraceServiceRequest`), written straight from what each
//! request kept ([`Span`]) into one reused buffer per batch: no intermediate span objects,
//! no string copies per attribute. The messages written are the few the proxy's spans use:
//! resource, scope, span, attribute (string or integer value) and status.

use std::time::SystemTime;

use bytes::BufMut;
use http::Version;
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, WireType};

use super::export::Span;
use crate::proxy::text::{push_ip, push_socket_addr};

/// Field numbers of the OTLP messages written here (opentelemetry-proto v1).
mod field {
    pub const REQUEST_RESOURCE_SPANS: u32 = 1;
    pub const RESOURCE_SPANS_RESOURCE: u32 = 1;
    pub const RESOURCE_SPANS_SCOPE_SPANS: u32 = 2;
    pub const RESOURCE_ATTRIBUTES: u32 = 1;
    pub const SCOPE_SPANS_SCOPE: u32 = 1;
    pub const SCOPE_SPANS_SPANS: u32 = 2;
    pub const SCOPE_NAME: u32 = 1;
    pub const SPAN_TRACE_ID: u32 = 1;
    pub const SPAN_SPAN_ID: u32 = 2;
    pub const SPAN_PARENT_SPAN_ID: u32 = 4;
    pub const SPAN_NAME: u32 = 5;
    pub const SPAN_KIND: u32 = 6;
    pub const SPAN_START: u32 = 7;
    pub const SPAN_END: u32 = 8;
    pub const SPAN_ATTRIBUTES: u32 = 9;
    pub const SPAN_STATUS: u32 = 15;
    pub const SPAN_FLAGS: u32 = 16;
    pub const STATUS_MESSAGE: u32 = 2;
    pub const STATUS_CODE: u32 = 3;
    pub const KEY_VALUE_KEY: u32 = 1;
    pub const KEY_VALUE_VALUE: u32 = 2;
    pub const ANY_VALUE_STRING: u32 = 1;
    pub const ANY_VALUE_INT: u32 = 3;
}

/// `SPAN_KIND_SERVER`.
const KIND_SERVER: u64 = 2;
/// `STATUS_CODE_ERROR`.
const STATUS_ERROR: u64 = 2;
/// `SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK` and `SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK`.
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;
/// The W3C `sampled` trace flag: every exported span is sampled.
const SAMPLED: u32 = 0x01;

/// A batch of spans being written, and the buffers it reuses.
pub(crate) struct Batch {
    /// The `Resource` message, written once.
    resource: Vec<u8>,
    /// The `InstrumentationScope` message, written once.
    scope: Vec<u8>,
    /// Each span as a `ScopeSpans.spans` field.
    spans: Vec<u8>,
    /// One span's message before its length is known.
    span: Vec<u8>,
    /// Values that need formatting (addresses, route names).
    text: String,
    /// Spans in `spans`.
    pub(crate) len: usize,
}

impl Batch {
    /// An empty batch of spans from the service `name` at `version`.
    pub(crate) fn new(name: &str, version: &str) -> Self {
        let mut resource = Vec::new();
        string_attribute(
            &mut resource,
            field::RESOURCE_ATTRIBUTES,
            "service.name",
            name,
        );
        string_attribute(
            &mut resource,
            field::RESOURCE_ATTRIBUTES,
            "service.version",
            version,
        );
        let mut scope = Vec::new();
        bytes_field(&mut scope, field::SCOPE_NAME, name.as_bytes());
        Self {
            resource,
            scope,
            spans: Vec::new(),
            span: Vec::new(),
            text: String::new(),
            len: 0,
        }
    }

    /// Adds `span` to the batch.
    pub(crate) fn push(&mut self, span: &Span) {
        let buf = &mut self.span;
        buf.clear();
        bytes_field(buf, field::SPAN_TRACE_ID, &span.ids.trace_id.to_be_bytes());
        bytes_field(buf, field::SPAN_SPAN_ID, &span.ids.span_id.to_be_bytes());
        if let Some(parent) = span.ids.parent {
            bytes_field(buf, field::SPAN_PARENT_SPAN_ID, &parent.to_be_bytes());
        }
        bytes_field(buf, field::SPAN_NAME, span.method.as_str().as_bytes());
        encode_key(field::SPAN_KIND, WireType::Varint, buf);
        encode_varint(KIND_SERVER, buf);
        encode_key(field::SPAN_START, WireType::SixtyFourBit, buf);
        buf.put_u64_le(unix_nanos(span.start));
        encode_key(field::SPAN_END, WireType::SixtyFourBit, buf);
        buf.put_u64_le(unix_nanos(span.end));
        span_attributes(buf, &mut self.text, span);
        if let Some(code) = span.status.filter(|c| *c >= 500) {
            // Server spans are errors for 5xx only (the OpenTelemetry HTTP conventions).
            self.text.clear();
            self.text.push_str(itoa::Buffer::new().format(code));
            let message = self.text.as_bytes();
            let len = 1 + field_len(message.len()) + 1 + encoded_len_varint(STATUS_ERROR);
            encode_key(field::SPAN_STATUS, WireType::LengthDelimited, buf);
            encode_varint(len as u64, buf);
            bytes_field(buf, field::STATUS_MESSAGE, message);
            encode_key(field::STATUS_CODE, WireType::Varint, buf);
            encode_varint(STATUS_ERROR, buf);
        }
        let remote = if span.ids.parent.is_some() {
            IS_REMOTE
        } else {
            0
        };
        encode_key(field::SPAN_FLAGS, WireType::ThirtyTwoBit, buf);
        buf.put_u32_le(SAMPLED | HAS_IS_REMOTE | remote);
        bytes_field(&mut self.spans, field::SCOPE_SPANS_SPANS, &self.span);
        self.len += 1;
    }

    /// The `ExportTraceServiceRequest` of the spans pushed so far; the batch is empty after.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        // Each length counts its fields' one-byte keys.
        let scope_spans = 1 + field_len(self.scope.len()) + self.spans.len();
        let resource_spans = 1 + field_len(self.resource.len()) + 1 + field_len(scope_spans);
        let mut out = Vec::with_capacity(1 + field_len(resource_spans));
        encode_key(
            field::REQUEST_RESOURCE_SPANS,
            WireType::LengthDelimited,
            &mut out,
        );
        encode_varint(resource_spans as u64, &mut out);
        bytes_field(&mut out, field::RESOURCE_SPANS_RESOURCE, &self.resource);
        encode_key(
            field::RESOURCE_SPANS_SCOPE_SPANS,
            WireType::LengthDelimited,
            &mut out,
        );
        encode_varint(scope_spans as u64, &mut out);
        bytes_field(&mut out, field::SCOPE_SPANS_SCOPE, &self.scope);
        out.extend_from_slice(&self.spans);
        self.spans.clear();
        self.len = 0;
        out
    }
}

/// The OpenTelemetry HTTP server attributes of the span, and the proxy's own.
fn span_attributes(buf: &mut Vec<u8>, text: &mut String, span: &Span) {
    let attr = field::SPAN_ATTRIBUTES;
    // Values the proxy writes as text itself go through `text`, without the formatting
    // machinery.
    let mut written = |buf: &mut Vec<u8>, key: &str, write: &dyn Fn(&mut String)| {
        text.clear();
        write(text);
        string_attribute(buf, attr, key, text);
    };
    string_attribute(buf, attr, "http.request.method", span.method.as_str());
    string_attribute(buf, attr, "url.path", &span.path);
    let scheme = if span.tls { "https" } else { "http" };
    string_attribute(buf, attr, "url.scheme", scheme);
    if let Some(host) = span.host.as_ref().and_then(|h| h.to_str().ok()) {
        string_attribute(buf, attr, "server.address", host);
    }
    let version = match span.version {
        Version::HTTP_10 => "1.0",
        Version::HTTP_2 => "2",
        Version::HTTP_3 => "3",
        _ => "1.1",
    };
    string_attribute(buf, attr, "network.protocol.version", version);
    written(buf, "client.address", &|t| push_ip(t, span.client));
    if let Some(ua) = span.user_agent.as_ref().and_then(|v| v.to_str().ok()) {
        string_attribute(buf, attr, "user_agent.original", ua);
    }
    if let Ok(id) = span.request_id.to_str() {
        string_attribute(buf, attr, "edgeplane.request_id", id);
    }
    if let Some(status) = span.status {
        int_attribute(buf, attr, "http.response.status_code", i64::from(status));
    }
    if let Some(rule) = &span.rule {
        let route = &rule.route;
        written(buf, "edgeplane.route", &|t| {
            t.push_str(route.kind());
            t.push('/');
            t.push_str(route.label());
        });
        match &rule.rule_name {
            Some(name) => string_attribute(buf, attr, "edgeplane.rule", name),
            None => written(buf, "edgeplane.rule", &|t| {
                t.push_str(itoa::Buffer::new().format(rule.rule_index));
            }),
        }
    }
    if let Some(addr) = span.upstream {
        written(buf, "edgeplane.upstream.address", &|t| {
            push_socket_addr(t, addr)
        });
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The length of a length-delimited field's value with its length prefix (not its key).
fn field_len(len: usize) -> usize {
    encoded_len_varint(len as u64) + len
}

/// A length-delimited field: key, length, bytes.
fn bytes_field(buf: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(bytes.len() as u64, buf);
    buf.extend_from_slice(bytes);
}

/// A `KeyValue` field `tag` whose value is the `AnyValue` of `value`'s own bytes (`value`
/// is what an `AnyValue` holds after its key: a string or integer field).
fn key_value(
    buf: &mut Vec<u8>,
    tag: u32,
    key: &str,
    value_len: usize,
    value: impl FnOnce(&mut Vec<u8>),
) {
    let len = 1 + field_len(key.len()) + 1 + field_len(value_len);
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
    bytes_field(buf, field::KEY_VALUE_KEY, key.as_bytes());
    encode_key(field::KEY_VALUE_VALUE, WireType::LengthDelimited, buf);
    encode_varint(value_len as u64, buf);
    value(buf);
}

/// An attribute with a string value, as field `tag`.
fn string_attribute(buf: &mut Vec<u8>, tag: u32, key: &str, value: &str) {
    key_value(buf, tag, key, 1 + field_len(value.len()), |buf| {
        bytes_field(buf, field::ANY_VALUE_STRING, value.as_bytes());
    });
}

/// An attribute with an integer value, as field `tag`.
fn int_attribute(buf: &mut Vec<u8>, tag: u32, key: &str, value: i64) {
    // Protobuf writes an int64 as the varint of its two's complement.
    let raw = value as u64;
    key_value(buf, tag, key, 1 + encoded_len_varint(raw), |buf| {
        encode_key(field::ANY_VALUE_INT, WireType::Varint, buf);
        encode_varint(raw, buf);
    });
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
