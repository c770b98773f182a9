//! The access log: one line per request, written when its response has been sent (or given
//! up), and one per TCP stream and UDP session when it ends, as JSON or `key=value` text, with
//! the fields a ProxyConfig names (all when it names none). Off by default (`--access-log`).
//! Lines go to standard output, apart from the process's own log (standard error), so a log
//! shipper can take them as they are, or to a file (`--access-log-file`); `writer` makes sure
//! writing never holds a request.

mod line;
mod otlp;
mod writer;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{header, HeaderValue, Method, Request, Version};

use crate::proxy::request_id::REQUEST_ID;
use crate::table::{AccessLog, AccessLogFormat, ListenerTable, RouteRef, RouteRule, SocketSource};

pub(crate) use otlp::OtlpLines;
pub(crate) use writer::AccessLogger;
pub use writer::{AccessSink, DEFAULT_QUEUE};

/// A field of a line, in the order lines print them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    Time,
    ClientAddress,
    Method,
    Host,
    Path,
    Protocol,
    Status,
    Duration,
    RequestBytes,
    ResponseBytes,
    Gateway,
    Listener,
    Route,
    Rule,
    Upstream,
    UpstreamTime,
    Retries,
    Decision,
    UserAgent,
    RequestId,
    TraceId,
}

const ALL: [Field; 21] = [
    Field::Time,
    Field::ClientAddress,
    Field::Method,
    Field::Host,
    Field::Path,
    Field::Protocol,
    Field::Status,
    Field::Duration,
    Field::RequestBytes,
    Field::ResponseBytes,
    Field::Gateway,
    Field::Listener,
    Field::Route,
    Field::Rule,
    Field::Upstream,
    Field::UpstreamTime,
    Field::Retries,
    Field::Decision,
    Field::UserAgent,
    Field::RequestId,
    Field::TraceId,
];

impl Field {
    /// The field's name in lines and in the ProxyConfig (camelCase).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Time => "time",
            Self::ClientAddress => "clientAddress",
            Self::Method => "method",
            Self::Host => "host",
            Self::Path => "path",
            Self::Protocol => "protocol",
            Self::Status => "status",
            Self::Duration => "duration",
            Self::RequestBytes => "requestBytes",
            Self::ResponseBytes => "responseBytes",
            Self::Gateway => "gateway",
            Self::Listener => "listener",
            Self::Route => "route",
            Self::Rule => "rule",
            Self::Upstream => "upstream",
            Self::UpstreamTime => "upstreamTime",
            Self::Retries => "retries",
            Self::Decision => "decision",
            Self::UserAgent => "userAgent",
            Self::RequestId => "requestId",
            Self::TraceId => "traceId",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        ALL.into_iter().find(|f| f.name() == name)
    }
}

/// The access log of a connection: format and fields.
#[derive(Debug, Clone)]
pub struct LogSpec {
    format: AccessLogFormat,
    fields: Arc<[Slot]>,
}

/// A field of a line and the text that goes before its value (`{"name":` or `,"name":` in
/// JSON, `name=` or ` name=` in text), laid out once per configuration instead of per line.
#[derive(Debug)]
struct Slot {
    field: Field,
    key: Box<str>,
}

impl Default for LogSpec {
    fn default() -> Self {
        Self::new(AccessLogFormat::Off)
    }
}

impl LogSpec {
    /// Every field in `format`.
    pub fn new(format: AccessLogFormat) -> Self {
        Self::with_fields(format, &ALL)
    }

    /// A ProxyConfig's log; unknown field names are skipped (the CRD's enum admits none).
    pub(crate) fn from_table(log: &AccessLog) -> Self {
        let fields: Vec<Field> = log.fields.iter().filter_map(|n| Field::parse(n)).collect();
        Self::with_fields(log.format, if fields.is_empty() { &ALL } else { &fields })
    }

    fn with_fields(format: AccessLogFormat, fields: &[Field]) -> Self {
        let json = format == AccessLogFormat::Json;
        let slots = fields.iter().enumerate().map(|(i, &field)| {
            let name = field.name();
            let key = match (json, i) {
                (true, 0) => format!("{{\"{name}\":"),
                (true, _) => format!(",\"{name}\":"),
                (false, 0) => format!("{name}="),
                (false, _) => format!(" {name}="),
            };
            Slot {
                field,
                key: key.into(),
            }
        });
        Self {
            format,
            fields: slots.collect(),
        }
    }

    /// True when no line is written.
    pub(crate) fn is_off(&self) -> bool {
        self.format == AccessLogFormat::Off
    }
}

/// What a line says of its request (or TCP stream, or UDP session), gathered as it goes.
#[derive(Debug)]
pub(crate) struct Entry {
    pub spec: LogSpec,
    pub time: jiff::Timestamp,
    pub start: Instant,
    /// Set when the line is written.
    pub duration: Option<Duration>,
    pub client: IpAddr,
    /// `HTTP/1.1`, `HTTP/2`, ..., or `tcp`, `tls`, `udp`.
    pub protocol: &'static str,
    pub method: Option<Method>,
    /// The request's authority (a TLS stream's SNI).
    pub host: Option<HeaderValue>,
    pub path: Option<String>,
    pub user_agent: Option<HeaderValue>,
    pub request_id: Option<HeaderValue>,
    /// The W3C trace the request belongs to (32 hex digits in the line).
    pub trace_id: Option<u128>,
    /// The proxy's span in that trace (for OTLP log records).
    pub span_id: Option<u64>,
    pub status: Option<u16>,
    pub route: Option<Arc<RouteRef>>,
    /// The rule that matched, when one did.
    pub rule: Option<Arc<RouteRule>>,
    pub upstream: Option<SocketAddr>,
    /// The table's listener that took the request and, when a rule matched, the index of the
    /// Gateway listener whose rule it is ([`ListenerTable::groups`]): `gateway` and `listener`.
    pub listener: Option<(Arc<ListenerTable>, Option<u32>)>,
    /// From the first upstream attempt to the response head (retries included).
    pub upstream_time: Option<Duration>,
    /// Upstream attempts after the first.
    pub retries: u32,
    /// What the proxy did with the request ([`crate::proxy::decision`]).
    pub decision: Option<&'static str>,
    /// Bytes from the client (a request's body; what a stream or session sent).
    pub request_bytes: u64,
    /// Bytes to the client.
    pub response_bytes: u64,
}

impl Entry {
    /// An entry for a TCP or TLS stream or a UDP session from `client`, started at `start`.
    pub(crate) fn l4(
        spec: LogSpec,
        protocol: &'static str,
        client: IpAddr,
        start: Instant,
    ) -> Self {
        Self {
            spec,
            time: jiff::Timestamp::now(),
            start,
            duration: None,
            client,
            protocol,
            method: None,
            host: None,
            path: None,
            user_agent: None,
            request_id: None,
            trace_id: None,
            span_id: None,
            status: None,
            route: None,
            rule: None,
            upstream: None,
            listener: None,
            upstream_time: None,
            retries: 0,
            decision: None,
            request_bytes: 0,
            response_bytes: 0,
        }
    }

    /// The Gateway listener the request (or stream) came through: the matched rule's, else
    /// the socket's only one (several and no rule: none).
    fn source(&self) -> Option<&SocketSource> {
        let (listener, group) = self.listener.as_ref()?;
        let grouped = group.and_then(|g| listener.groups.get(usize::try_from(g).ok()?));
        grouped.or_else(|| match listener.sources.as_slice() {
            [only] => Some(only),
            _ => None,
        })
    }

    /// Completes the entry's duration and queues its line on `log`.
    pub(crate) fn finish(mut self: Box<Self>, log: &AccessLogger) {
        self.duration = Some(self.start.elapsed());
        log.log(self);
    }
}

/// The protocol field of an HTTP request.
fn http_protocol(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2",
        Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}

impl Entry {
    /// What the access log line says of the request head, from `client` (the address the
    /// trusted forwarded headers name), written in `spec`.
    pub(crate) fn head<B>(
        spec: LogSpec,
        client: IpAddr,
        req: &Request<B>,
        start: Instant,
    ) -> Entry {
        let headers = req.headers();
        Entry {
            spec,
            time: jiff::Timestamp::now(),
            start,
            duration: None,
            client,
            method: Some(req.method().clone()),
            host: headers.get(header::HOST).cloned().or_else(|| {
                req.uri()
                    .authority()
                    .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
            }),
            path: Some(
                req.uri()
                    .path_and_query()
                    .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()),
            ),
            protocol: http_protocol(req.version()),
            user_agent: headers.get(header::USER_AGENT).cloned(),
            request_id: headers.get(REQUEST_ID).cloned(),
            trace_id: None,
            span_id: None,
            status: None,
            route: None,
            rule: None,
            upstream: None,
            listener: None,
            upstream_time: None,
            retries: 0,
            decision: None,
            request_bytes: 0,
            response_bytes: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(spec: LogSpec) -> Entry {
        Entry {
            spec,
            time: jiff::Timestamp::UNIX_EPOCH,
            start: Instant::now(),
            duration: Some(Duration::from_millis(1500)),
            client: "192.0.2.1".parse().unwrap(),
            method: Some(Method::GET),
            host: Some(HeaderValue::from_static("example.com")),
            path: Some("/a b?x=1".into()),
            protocol: http_protocol(Version::HTTP_11),
            user_agent: None,
            request_id: None,
            trace_id: None,
            span_id: None,
            status: Some(200),
            route: Some(Arc::new(RouteRef::new("HTTPRoute", "default", "r"))),
            rule: None,
            upstream: None,
            listener: None,
            upstream_time: Some(Duration::from_millis(250)),
            retries: 1,
            decision: Some(crate::proxy::decision::PROXIED),
            request_bytes: 3,
            response_bytes: 5,
        }
    }

    #[test]
    fn json_and_text_lines_carry_the_chosen_fields_in_order() {
        let log = AccessLog {
            format: AccessLogFormat::Json,
            fields: vec![
                "status".into(),
                "path".into(),
                "route".into(),
                "upstream".into(),
            ],
        };
        let line = entry(LogSpec::from_table(&log)).format();
        assert_eq!(
            line,
            r#"{"status":200,"path":"/a b?x=1","route":"HTTPRoute/default/r","upstream":null}"#
        );
        let text = AccessLog {
            format: AccessLogFormat::Text,
            fields: vec!["method".into(), "path".into(), "responseBytes".into()],
        };
        let line = entry(LogSpec::from_table(&text)).format();
        assert_eq!(line, r#"method=GET path="/a b?x=1" responseBytes=5"#);
        let upstream = AccessLog {
            format: AccessLogFormat::Text,
            fields: ["upstreamTime", "retries", "decision", "gateway", "rule"]
                .map(String::from)
                .to_vec(),
        };
        let line = entry(LogSpec::from_table(&upstream)).format();
        assert_eq!(
            line,
            "upstreamTime=0.250000 retries=1 decision=proxied gateway=- rule=-"
        );
        let all = entry(LogSpec::new(AccessLogFormat::Json)).format();
        let parsed: serde_json::Value = serde_json::from_str(&all).unwrap();
        assert_eq!(parsed.as_object().unwrap().len(), ALL.len());
        assert_eq!(parsed["time"], "1970-01-01T00:00:00.000000000Z");
        assert_eq!(parsed["clientAddress"], "192.0.2.1");
        assert_eq!(parsed["duration"], 1.5);
        assert_eq!(parsed["status"], 200);
        let mut v6 = entry(LogSpec::from_table(&AccessLog {
            format: AccessLogFormat::Text,
            fields: ["clientAddress", "duration"].map(String::from).to_vec(),
        }));
        v6.client = "2001:db8::1".parse().unwrap();
        v6.duration = Some(Duration::from_micros(12_000_034));
        assert_eq!(v6.format(), "clientAddress=2001:db8::1 duration=12.000034");
    }
}
