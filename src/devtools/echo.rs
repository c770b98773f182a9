//! The echo backend: answers every request with JSON describing it (`path`, `host`, `method`,
//! `proto`, `headers`, `namespace`, `pod`, `bodyLength`), the format Gateway API conformance
//! backends use. It drains the request body as it streams in and reports its length. An
//! optional [`RequestLog`] keeps the last requests it answered, so tests can see what a backend
//! received (mirrored requests get no client-visible response). A request asking for an
//! `Upgrade` is answered `101` and every byte it then sends is echoed back. The same echo can be
//! served behind TLS with its own certificate ([`crate::devtools::echo_tls`]: the backend of a TLS
//! passthrough route or of a BackendTLSPolicy), and a UDP echo answers datagrams
//! ([`serve_udp_echo`]).
//!
//! Like the conformance suite's echo server it also obeys two instructions from the request:
//! the `delay` query parameter (a Go duration such as `500ms`, `2s` or `1.5s`) waits that long
//! before answering, and `X-Echo-Set-Header: Name: value[,Name2: value2]` sets those headers on
//! the response. It also runs the suite's retry simulation (`uuid`, `succeedAfter`,
//! `responseCode`, `delayRetry`: `retry`).
//!
//! A gRPC call (`content-type: application/grpc*`, over h2c) is answered by the conformance
//! suite's gRPC echo service instead ([`crate::devtools::grpc_echo`]), on the same port.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Request, Response, Version};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use serde::Serialize;

pub(crate) use retry::deliver;
use retry::{ResetConnection, Simulated};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

mod retry;
mod transport;

pub use transport::serve_udp_echo;

/// Who an echo server says it is.
#[derive(Debug, Clone)]
pub struct EchoIdentity {
    pub pod: String,
    pub namespace: String,
}

/// The JSON answer, field names as the conformance suite reads them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct EchoReply<'a> {
    path: &'a str,
    host: String,
    method: &'a str,
    proto: &'static str,
    headers: BTreeMap<String, Vec<String>>,
    namespace: &'a str,
    pod: &'a str,
    body_length: u64,
    /// Set when the request came over TLS (see [`crate::devtools::echo_tls`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    tls: Option<&'a TlsSeen>,
}

/// What a TLS echo backend saw of the client's handshake, reported as `tls` in its answer.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsSeen {
    /// The SNI the client sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// The client's certificate chain, PEM, leaf first (empty when it sent none).
    pub peer_certificates: Vec<String>,
}

/// One request as an echo server received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRequest {
    pub method: String,
    /// Path and query as received.
    pub path: String,
    pub host: String,
    /// Header names in lower case, values in arrival order.
    pub headers: Vec<(String, String)>,
}

/// A bounded in-memory log of the requests an echo server answered (the oldest entries are
/// dropped past its capacity). Cloning shares the log.
#[derive(Debug, Clone)]
pub struct RequestLog {
    capacity: usize,
    entries: Arc<Mutex<VecDeque<LoggedRequest>>>,
}

impl RequestLog {
    /// A log keeping at most `capacity` requests.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            entries: Arc::new(Mutex::new(VecDeque::new())),
        }
    }

    fn push(&self, entry: LoggedRequest) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() == self.capacity {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// The logged requests, oldest first.
    pub fn entries(&self) -> Vec<LoggedRequest> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.iter().cloned().collect()
    }

    /// Forgets every logged request.
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

/// Pause after an accept error before accepting again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// Serves echo responses on `listener` (HTTP/1.1 and h2c) until the task is dropped; dropping it
/// also closes every connection it opened. Accept errors are logged and retried, so it only
/// returns when dropped.
pub async fn serve_echo(listener: TcpListener, identity: EchoIdentity) -> std::io::Result<()> {
    serve_echo_logged(listener, identity, None).await
}

/// [`serve_echo`], recording every request in `log` when one is given.
pub async fn serve_echo_logged(
    listener: TcpListener,
    identity: EchoIdentity,
    log: Option<RequestLog>,
) -> std::io::Result<()> {
    serve_echo_with(listener, identity, log).await
}

async fn serve_echo_with(
    listener: TcpListener,
    identity: EchoIdentity,
    log: Option<RequestLog>,
) -> std::io::Result<()> {
    let identity = Arc::new(identity);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30));
    let mut conns: JoinSet<()> = JoinSet::new();
    loop {
        tokio::select! {
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let _ = stream.set_nodelay(true);
                    let identity = identity.clone();
                    let log = log.clone();
                    let service = service_fn(move |req| {
                        let identity = identity.clone();
                        let log = log.clone();
                        async move { deliver(answer(req, &identity, log.as_ref(), None).await) }
                    });
                    let conn = builder
                        .serve_connection_with_upgrades(TokioIo::new(stream), service)
                        .into_owned();
                    conns.spawn(async move {
                        let _ = conn.await;
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "echo accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
        }
    }
}

/// Logs the request, then answers a gRPC call with the gRPC echo, an upgrade with `101` and a
/// byte echo, anything else with the JSON echo (with `tls` when the connection is TLS).
pub(crate) async fn answer(
    mut req: Request<Incoming>,
    identity: &EchoIdentity,
    log: Option<&RequestLog>,
    tls: Option<&TlsSeen>,
) -> Response<UnsyncBoxBody<Bytes, Infallible>> {
    if let Some(log) = log {
        log.push(LoggedRequest {
            method: req.method().as_str().to_owned(),
            path: req
                .uri()
                .path_and_query()
                .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()),
            host: req
                .headers()
                .get(header::HOST)
                .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
                .or_else(|| req.uri().authority().map(|a| a.to_string()))
                .unwrap_or_default(),
            headers: req
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
        });
    }
    if crate::table::is_grpc(req.headers()) {
        return crate::devtools::grpc_echo::answer(req, identity).await;
    }
    let Some(protocol) = req.headers().get(header::UPGRADE).cloned() else {
        return echo(req, identity, tls).await.map(BodyExt::boxed_unsync);
    };
    let on = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        if let Ok(upgraded) = on.await {
            let (mut r, mut w) = tokio::io::split(TokioIo::new(upgraded));
            let _ = tokio::io::copy(&mut r, &mut w).await;
        }
    });
    let mut resp = Response::new(UnsyncBoxBody::default());
    *resp.status_mut() = http::StatusCode::SWITCHING_PROTOCOLS;
    resp.headers_mut().insert(header::UPGRADE, protocol);
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    resp
}

/// Answers one request after draining its body.
async fn echo(
    req: Request<Incoming>,
    identity: &EchoIdentity,
    tls: Option<&TlsSeen>,
) -> Response<Full<Bytes>> {
    let (parts, mut body) = req.into_parts();
    let mut body_length = 0u64;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    body_length += data.len() as u64;
                }
            }
            Err(_) => break,
        }
    }
    if let Some(delay) = parts.uri.query().and_then(delay_param) {
        tokio::time::sleep(delay).await;
    }
    let (simulated, retry_delay) = retry::simulate(parts.uri.query());
    if let Some(delay) = retry_delay.filter(|d| *d <= MAX_DELAY) {
        tokio::time::sleep(delay).await;
    }
    if simulated == Simulated::Reset {
        let mut resp = Response::new(Full::new(Bytes::new()));
        resp.extensions_mut().insert(ResetConnection);
        return resp;
    }
    // As Go servers do: HTTP/2 reports `:authority`, HTTP/1 the `Host` header.
    let host_header = || {
        parts
            .headers
            .get(header::HOST)
            .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
    };
    let authority = || parts.uri.authority().map(|a| a.to_string());
    let host = if parts.version == Version::HTTP_2 {
        authority().or_else(host_header)
    } else {
        host_header().or_else(authority)
    }
    .unwrap_or_default();
    // Like Go's `RequestURI`: an HTTP/1 absolute-form target is reported whole, so a test can
    // tell whether a proxy forwarded it in origin form.
    let target = if parts.version != Version::HTTP_2 && parts.uri.authority().is_some() {
        parts.uri.to_string()
    } else {
        parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned())
    };
    let reply = EchoReply {
        path: &target,
        host,
        method: parts.method.as_str(),
        proto: proto(parts.version),
        headers: header_lists(&parts.headers),
        namespace: &identity.namespace,
        pod: &identity.pod,
        body_length,
        tls,
    };
    let json = serde_json::to_vec(&reply).unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(json)));
    if let Simulated::Fail(status) = simulated {
        *resp.status_mut() = status;
    }
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for value in parts.headers.get_all(SET_HEADER) {
        for (name, value) in set_header_pairs(value) {
            resp.headers_mut().insert(name, value);
        }
    }
    resp
}

/// Request header whose `Name: value` pairs (comma-separated) are set on the response.
pub const SET_HEADER: &str = "x-echo-set-header";

/// Longest `delay` honoured, so a typo cannot park a connection for days.
const MAX_DELAY: Duration = Duration::from_secs(3600);

/// The `delay` query parameter as a duration, when present and valid.
fn delay_param(query: &str) -> Option<Duration> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "delay")
        .and_then(|(_, v)| parse_go_duration(v))
        .map(|d| d.min(MAX_DELAY))
}

/// Parses a Go duration (`300ms`, `1.5s`, `2h45m`, `0`): decimal numbers, each with a unit of
/// `ns`, `us`, `µs`, `ms`, `s`, `m` or `h`.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * seconds;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// The valid `Name: value` pairs of one `X-Echo-Set-Header` value.
fn set_header_pairs(value: &HeaderValue) -> Vec<(header::HeaderName, HeaderValue)> {
    let Ok(text) = value.to_str() else {
        return Vec::new();
    };
    text.split(',')
        .filter_map(|pair| pair.split_once(':'))
        .filter_map(|(name, value)| {
            let name = header::HeaderName::from_bytes(name.trim().as_bytes()).ok()?;
            let value = HeaderValue::from_str(value.trim()).ok()?;
            Some((name, value))
        })
        .collect()
}

fn proto(version: Version) -> &'static str {
    match version {
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// Headers by canonical name (`X-Forwarded-For`), every value kept in order; `Host` is reported
/// separately, as Go servers do.
fn header_lists(headers: &HeaderMap) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if name == header::HOST {
            continue;
        }
        out.entry(canonical(name.as_str()))
            .or_default()
            .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
    }
    out
}

/// `x-forwarded-for` -> `X-Forwarded-For`.
fn canonical(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = true;
    for c in name.chars() {
        out.push(if upper { c.to_ascii_uppercase() } else { c });
        upper = c == '-';
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_log_keeps_the_newest_entries() {
        let log = RequestLog::new(2);
        let shared = log.clone();
        for path in ["/a", "/b", "/c"] {
            log.push(LoggedRequest {
                method: "GET".into(),
                path: path.into(),
                host: "h".into(),
                headers: vec![],
            });
        }
        let paths: Vec<_> = shared.entries().into_iter().map(|e| e.path).collect();
        assert_eq!(paths, ["/b", "/c"]);
        shared.clear();
        assert!(log.entries().is_empty());
    }

    #[test]
    fn go_durations() {
        let ms = |v| Some(Duration::from_millis(v));
        assert_eq!(parse_go_duration("2s"), ms(2000));
        assert_eq!(parse_go_duration("500ms"), ms(500));
        assert_eq!(parse_go_duration("1.5s"), ms(1500));
        assert_eq!(parse_go_duration("1m30s"), ms(90_000));
        assert_eq!(parse_go_duration("0"), ms(0));
        for bad in ["", "2", "2x", "s", "-1s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
        assert_eq!(delay_param("a=1&delay=10ms"), ms(10));
        assert_eq!(delay_param("delay=99h"), Some(MAX_DELAY));
        assert_eq!(delay_param("nodelay=1s"), None);
    }

    #[test]
    fn set_header_instructions() {
        let v = HeaderValue::from_static("X-A: one, x-b:two,bad header: x,novalue");
        let got: Vec<(String, String)> = set_header_pairs(&v)
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        assert_eq!(
            got,
            vec![("x-a".into(), "one".into()), ("x-b".into(), "two".into())]
        );
    }

    #[test]
    fn canonical_names() {
        assert_eq!(canonical("x-forwarded-for"), "X-Forwarded-For");
        assert_eq!(canonical("te"), "Te");
    }
}
