//! Backends for mirroring tests: a recorder that reports every request it fully receives
//! (mirrors' responses are discarded, so a test can only see them arrive), and a black hole that
//! accepts connections and never reads from them.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::mpsc;

use super::echo::Echo;
use super::net::bind_loopback;

/// One request as a recorder saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: Method,
    /// Path and query.
    pub path: String,
    /// `Host` header, else the URI authority (HTTP/2).
    pub host: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The receiving end of a recorder.
pub struct Recordings {
    rx: mpsc::UnboundedReceiver<Recorded>,
}

impl Recordings {
    /// The next request, waiting at most `within`.
    pub async fn next(&mut self, within: Duration) -> Option<Recorded> {
        tokio::time::timeout(within, self.rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// Counts requests until none arrives for `quiet` (bounded by `max` overall).
    pub async fn count(&mut self, quiet: Duration, max: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + max;
        let mut n = 0;
        while tokio::time::Instant::now() < deadline {
            match tokio::time::timeout(quiet, self.rx.recv()).await {
                Ok(Some(_)) => n += 1,
                _ => break,
            }
        }
        n
    }
}

/// Starts a recorder (HTTP/1.1 and h2c) answering `200` with an empty body after reading each
/// request's whole body; a request whose body fails is not recorded.
pub async fn start_recorder(pod: &str) -> (Echo, Recordings) {
    let listener = bind_loopback().await;
    let addr = listener
        .local_addr()
        .expect("bound listener has an address");
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await?;
            let tx = tx.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let tx = tx.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        if let Ok(body) = body.collect().await {
                            let host = parts
                                .headers
                                .get(http::header::HOST)
                                .and_then(|h| h.to_str().ok())
                                .map(str::to_owned)
                                .or_else(|| parts.uri.authority().map(|a| a.to_string()))
                                .unwrap_or_default();
                            let _ = tx.send(Recorded {
                                method: parts.method,
                                path: parts
                                    .uri
                                    .path_and_query()
                                    .map_or_else(|| "/".to_owned(), |p| p.to_string()),
                                host,
                                headers: parts.headers,
                                body: body.to_bytes(),
                            });
                        }
                        Ok::<_, std::convert::Infallible>(Response::new(Empty::<Bytes>::new()))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (Echo::from_task(addr, pod, task), Recordings { rx })
}

/// A listener that accepts connections and holds them open without reading a byte.
pub async fn start_black_hole() -> Echo {
    let listener = bind_loopback().await;
    let addr = listener
        .local_addr()
        .expect("bound listener has an address");
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let (stream, _) = listener.accept().await?;
            if held.len() < 64 {
                held.push(stream);
            }
        }
    });
    Echo::from_task(addr, "black-hole", task)
}
