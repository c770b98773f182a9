//! `/api/trace`: the request tracer's endpoint. Subscribes to the proxy's tap with the filter
//! the query names (`host`, `path` prefix, `header=Name:value`, repeatable) and streams the
//! record of each matching request as one JSON line as it happens, until `count` requests
//! (default 1, at most 100) were seen or `wait` seconds (default 60, at most 600) passed.
//! `edgeplane trace` and the page's tracer read it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use tokio::sync::mpsc;

use crate::proxy::{Tap, TapFilter};

/// Requests one trace may wait for at most.
pub const MAX_COUNT: usize = 100;
/// Seconds one trace may wait at most.
pub const MAX_WAIT_SECS: u64 = 600;

/// What a trace asks for, from the query string.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceQuery {
    pub host: Option<String>,
    pub path: Option<String>,
    pub headers: Vec<(String, String)>,
    pub count: usize,
    pub wait: Duration,
}

/// Why a trace query is refused (400).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TraceQueryError {
    #[error("{0}: not a number")]
    Number(&'static str),
    #[error("count must be from 1 to {MAX_COUNT}")]
    Count,
    #[error("wait must be from 1 to {MAX_WAIT_SECS} seconds")]
    Wait,
    #[error("header {0:?}: expected Name:value with a valid header name")]
    Header(String),
    #[error("unknown parameter {0:?} (host, path, header, count, wait)")]
    Unknown(String),
}

impl TraceQuery {
    /// Parses `host=..&path=..&header=Name:value&count=N&wait=S`.
    pub fn parse(query: Option<&str>) -> Result<Self, TraceQueryError> {
        let mut q = Self {
            host: None,
            path: None,
            headers: Vec::new(),
            count: 1,
            wait: Duration::from_secs(60),
        };
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match &*key {
                "host" => q.host = Some(value.into_owned()),
                "path" => q.path = Some(value.into_owned()),
                "header" => {
                    let (name, v) = value
                        .split_once(':')
                        .filter(|(n, _)| HeaderName::from_bytes(n.trim().as_bytes()).is_ok())
                        .ok_or_else(|| TraceQueryError::Header(value.to_string()))?;
                    q.headers
                        .push((name.trim().to_owned(), v.trim().to_owned()));
                }
                "count" => {
                    let n: usize = value
                        .parse()
                        .map_err(|_| TraceQueryError::Number("count"))?;
                    if !(1..=MAX_COUNT).contains(&n) {
                        return Err(TraceQueryError::Count);
                    }
                    q.count = n;
                }
                "wait" => {
                    let s: u64 = value.parse().map_err(|_| TraceQueryError::Number("wait"))?;
                    if !(1..=MAX_WAIT_SECS).contains(&s) {
                        return Err(TraceQueryError::Wait);
                    }
                    q.wait = Duration::from_secs(s);
                }
                other => return Err(TraceQueryError::Unknown(other.to_owned())),
            }
        }
        Ok(q)
    }

    fn filter(&self) -> TapFilter {
        TapFilter {
            host: self.host.clone(),
            path_prefix: self.path.clone(),
            headers: self
                .headers
                .iter()
                .filter_map(|(n, v)| Some((HeaderName::from_bytes(n.as_bytes()).ok()?, v.clone())))
                .collect(),
        }
    }
}

/// The streamed answer: one JSON line per traced request. The subscription is open before the
/// response head leaves, so a request sent after the head arrived is seen.
pub fn stream(tap: &Arc<Tap>, query: TraceQuery) -> Response<BoxBody<Bytes, Infallible>> {
    let mut subscription = tap.subscribe(query.filter(), query.count);
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + query.wait;
        for _ in 0..query.count {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(record) = subscription.next(left).await else {
                break;
            };
            let line = format!("{}\n", serde_json::to_string(&record).unwrap_or_default());
            if tx.send(Bytes::from(line)).await.is_err() {
                break;
            }
        }
    });
    let body = Lines(rx);
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/x-ndjson")
        .header(http::header::CACHE_CONTROL, "no-store")
        .body(BodyExt::boxed(body))
        .unwrap_or_else(|_| Response::new(BodyExt::boxed(http_body_util::Empty::new())))
}

/// A body of the lines a channel delivers, ending when its sender is gone.
struct Lines(mpsc::Receiver<Bytes>);

impl Body for Lines {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|line| line.map(|l| Ok(Frame::data(l))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse_with_defaults_and_bounds() {
        let q = TraceQuery::parse(Some(
            "host=Example.com&path=%2Fapi&header=x-user%3A%20alice&count=3&wait=5",
        ))
        .unwrap();
        assert_eq!(q.host.as_deref(), Some("Example.com"));
        assert_eq!(q.path.as_deref(), Some("/api"));
        assert_eq!(q.headers, vec![("x-user".to_owned(), "alice".to_owned())]);
        assert_eq!((q.count, q.wait), (3, Duration::from_secs(5)));
        let d = TraceQuery::parse(None).unwrap();
        assert_eq!((d.count, d.wait), (1, Duration::from_secs(60)));
        assert_eq!(
            TraceQuery::parse(Some("count=0")),
            Err(TraceQueryError::Count)
        );
        assert_eq!(
            TraceQuery::parse(Some("count=101")),
            Err(TraceQueryError::Count)
        );
        assert_eq!(
            TraceQuery::parse(Some("wait=x")),
            Err(TraceQueryError::Number("wait"))
        );
        assert!(matches!(
            TraceQuery::parse(Some("header=nocolon")),
            Err(TraceQueryError::Header(_))
        ));
        assert!(matches!(
            TraceQuery::parse(Some("hots=a")),
            Err(TraceQueryError::Unknown(_))
        ));
    }
}
