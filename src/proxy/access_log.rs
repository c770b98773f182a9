//! The access log: one line per request, written when its response has been sent (or given
//! up), as JSON or `key=value` text, with the fields a ProxyConfig names (all when it names
//! none). Off by default (`--access-log`). Lines go to standard output, apart from the
//! process's own log (standard error), so a log shipper can take them as they are.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use http::{HeaderValue, Method, Version};

use http::{header, Request};
use hyper::body::Incoming;

use crate::table::{AccessLog, AccessLogFormat, RouteRef};

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
    Route,
    Upstream,
    UserAgent,
    RequestId,
}

const ALL: [Field; 14] = [
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
    Field::Route,
    Field::Upstream,
    Field::UserAgent,
    Field::RequestId,
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
            Self::Route => "route",
            Self::Upstream => "upstream",
            Self::UserAgent => "userAgent",
            Self::RequestId => "requestId",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Where lines go: standard output, or a list tests read.
#[derive(Debug, Clone, Default)]
pub enum AccessSink {
    #[default]
    Stdout,
    Capture(Arc<Mutex<Vec<String>>>),
}

/// The access log of a connection: format and fields.
#[derive(Debug, Clone)]
pub struct LogSpec {
    format: AccessLogFormat,
    fields: Arc<[Field]>,
}

impl Default for LogSpec {
    fn default() -> Self {
        Self::new(AccessLogFormat::Off)
    }
}

impl LogSpec {
    /// Every field in `format`.
    pub fn new(format: AccessLogFormat) -> Self {
        Self {
            format,
            fields: Arc::from(ALL.as_slice()),
        }
    }

    /// A ProxyConfig's log; unknown field names are skipped (the CRD's enum admits none).
    pub(crate) fn from_table(log: &AccessLog) -> Self {
        let fields: Vec<Field> = log.fields.iter().filter_map(|n| Field::parse(n)).collect();
        Self {
            format: log.format,
            fields: if fields.is_empty() {
                Arc::from(ALL.as_slice())
            } else {
                Arc::from(fields)
            },
        }
    }

    /// True when no line is written.
    pub(crate) fn is_off(&self) -> bool {
        self.format == AccessLogFormat::Off
    }
}

/// What a line says of its request, gathered as the request goes.
#[derive(Debug)]
pub(crate) struct Entry {
    pub spec: LogSpec,
    pub sink: AccessSink,
    pub time: jiff::Timestamp,
    pub start: Instant,
    pub client: IpAddr,
    pub method: Method,
    pub host: Option<HeaderValue>,
    pub path: String,
    pub version: Version,
    pub user_agent: Option<HeaderValue>,
    pub request_id: Option<HeaderValue>,
    pub status: u16,
    pub route: Option<Arc<RouteRef>>,
    pub upstream: Option<SocketAddr>,
    pub request_bytes: u64,
    pub response_bytes: u64,
}

/// A header's text, or nothing.
fn header(v: &Option<HeaderValue>) -> Value<'_> {
    match v.as_ref().and_then(|v| v.to_str().ok()) {
        Some(s) => Value::Str(s),
        None => Value::Null,
    }
}

enum Value<'a> {
    Str(&'a str),
    Num(u64),
    Float(f64),
    Null,
}

impl Entry {
    fn value(&self, field: Field, scratch: &mut String) -> Value<'_> {
        scratch.clear();
        match field {
            Field::Time => {
                let _ = write!(scratch, "{}", self.time);
                Value::Null
            }
            Field::ClientAddress => {
                let _ = write!(scratch, "{}", self.client);
                Value::Null
            }
            Field::Method => Value::Str(self.method.as_str()),
            Field::Host => header(&self.host),
            Field::Path => Value::Str(&self.path),
            Field::Protocol => Value::Str(match self.version {
                Version::HTTP_09 => "HTTP/0.9",
                Version::HTTP_10 => "HTTP/1.0",
                Version::HTTP_2 => "HTTP/2",
                Version::HTTP_3 => "HTTP/3",
                _ => "HTTP/1.1",
            }),
            Field::Status => Value::Num(u64::from(self.status)),
            Field::Duration => Value::Float(self.start.elapsed().as_secs_f64()),
            Field::RequestBytes => Value::Num(self.request_bytes),
            Field::ResponseBytes => Value::Num(self.response_bytes),
            Field::Route => match &self.route {
                Some(r) => {
                    let _ = write!(scratch, "{}", r.label());
                    Value::Null
                }
                None => Value::Null,
            },
            Field::Upstream => match self.upstream {
                Some(a) => {
                    let _ = write!(scratch, "{a}");
                    Value::Null
                }
                None => Value::Null,
            },
            Field::UserAgent => header(&self.user_agent),
            Field::RequestId => header(&self.request_id),
        }
    }

    /// The line, without its newline.
    pub(crate) fn line(&self) -> String {
        let json = self.spec.format == AccessLogFormat::Json;
        let mut out = String::with_capacity(256);
        let mut scratch = String::new();
        if json {
            out.push('{');
        }
        for (i, field) in self.spec.fields.iter().enumerate() {
            let value = self.value(*field, &mut scratch);
            let value = match value {
                Value::Null if !scratch.is_empty() => Value::Str(scratch.as_str()),
                v => v,
            };
            if i > 0 {
                out.push(if json { ',' } else { ' ' });
            }
            if json {
                let _ = write!(out, "\"{}\":", field.name());
            } else {
                let _ = write!(out, "{}=", field.name());
            }
            match value {
                Value::Num(n) => {
                    let _ = write!(out, "{n}");
                }
                Value::Float(f) => {
                    let _ = write!(out, "{f:.6}");
                }
                Value::Null if json => out.push_str("null"),
                Value::Null => out.push('-'),
                Value::Str(s) if json => {
                    out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "null".into()));
                }
                Value::Str(s) if s.is_empty() || s.contains([' ', '"', '=', '\\']) => {
                    let _ = write!(out, "{s:?}");
                }
                Value::Str(s) => out.push_str(s),
            }
        }
        if json {
            out.push('}');
        }
        out
    }

    /// Writes the line to its sink.
    pub(crate) fn emit(&self) {
        let line = self.line();
        match &self.sink {
            AccessSink::Stdout => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(line.as_bytes());
                let _ = out.write_all(b"\n");
            }
            AccessSink::Capture(lines) => {
                if let Ok(mut lines) = lines.lock() {
                    lines.push(line);
                }
            }
        }
    }
}

impl Entry {
    /// What the access log line says of the request head, from `client` (the address the
    /// trusted forwarded headers name), written in `spec` to `sink`.
    pub(crate) fn head(
        spec: LogSpec,
        sink: AccessSink,
        client: IpAddr,
        req: &Request<Incoming>,
        start: Instant,
    ) -> Entry {
        let headers = req.headers();
        Entry {
            spec,
            sink,
            time: jiff::Timestamp::now(),
            start,
            client,
            method: req.method().clone(),
            host: headers.get(header::HOST).cloned().or_else(|| {
                req.uri()
                    .authority()
                    .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
            }),
            path: req
                .uri()
                .path_and_query()
                .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()),
            version: req.version(),
            user_agent: headers.get(header::USER_AGENT).cloned(),
            request_id: headers.get("x-request-id").cloned(),
            status: 0,
            route: None,
            upstream: None,
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
            sink: AccessSink::default(),
            time: jiff::Timestamp::UNIX_EPOCH,
            start: Instant::now(),
            client: "192.0.2.1".parse().unwrap(),
            method: Method::GET,
            host: Some(HeaderValue::from_static("example.com")),
            path: "/a b?x=1".into(),
            version: Version::HTTP_11,
            user_agent: None,
            request_id: None,
            status: 200,
            route: Some(Arc::new(RouteRef::new("HTTPRoute", "default", "r"))),
            upstream: None,
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
        let line = entry(LogSpec::from_table(&log)).line();
        assert_eq!(
            line,
            r#"{"status":200,"path":"/a b?x=1","route":"default/r","upstream":null}"#
        );
        let text = AccessLog {
            format: AccessLogFormat::Text,
            fields: vec!["method".into(), "path".into(), "responseBytes".into()],
        };
        let line = entry(LogSpec::from_table(&text)).line();
        assert_eq!(line, r#"method=GET path="/a b?x=1" responseBytes=5"#);
        let all = entry(LogSpec::new(AccessLogFormat::Json)).line();
        let parsed: serde_json::Value = serde_json::from_str(&all).unwrap();
        assert_eq!(parsed.as_object().unwrap().len(), ALL.len());
        assert_eq!(parsed["time"], "1970-01-01T00:00:00Z");
    }
}
