//! The admin server: health, readiness, Prometheus metrics and debug views of what is published.
//! HTTP/1.1 on its own address; never on a request path of the proxy.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpListener;

use crate::reconcile::Published;

/// Default address of the admin server.
pub const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:9901";

/// Time a client has to send a request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the admin endpoints on `listener` until the task is dropped or the listener fails.
pub async fn serve_admin(listener: TcpListener, published: Arc<Published>) -> std::io::Result<()> {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and similar: back off instead of spinning.
                tracing::warn!(error = %e, "admin accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let published = published.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let published = published.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(&req, &published)) }
            });
            let conn = http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "admin connection ended");
            }
        });
    }
}

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";
const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Answers one admin request: `/healthz`, `/readyz`, `/metrics`, `/debug/config`,
/// `/debug/status`; 404 for any other path, 405 for methods other than GET and HEAD.
pub fn handle<B>(req: &Request<B>, published: &Published) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" if published.is_ready() => text(StatusCode::OK, "ready\n"),
        "/readyz" => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no route table published yet\n",
        ),
        "/metrics" => body(StatusCode::OK, PROMETHEUS, published.metrics.encode()),
        "/debug/config" => json(&**published.table.load()),
        "/debug/status" => json(&**published.status.load()),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn json<T: Serialize>(value: &T) -> Response<Full<Bytes>> {
    match serde_json::to_vec_pretty(value) {
        Ok(mut v) => {
            v.push(b'\n');
            body(StatusCode::OK, JSON, v)
        }
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot encode: {e}\n"),
        ),
    }
}

fn text(status: StatusCode, s: &str) -> Response<Full<Bytes>> {
    body(status, TEXT, s.to_owned())
}

fn body(
    status: StatusCode,
    content_type: &'static str,
    b: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(b.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use std::sync::atomic::Ordering;

    fn get(path: &str, p: &Published) -> Response<Full<Bytes>> {
        let req = Request::get(path).body(()).unwrap();
        handle(&req, p)
    }

    #[test]
    fn readiness_follows_the_flag() {
        let p = Published::new(Metrics::new());
        assert_eq!(get("/readyz", &p).status(), StatusCode::SERVICE_UNAVAILABLE);
        p.ready.store(true, Ordering::Release);
        assert_eq!(get("/readyz", &p).status(), StatusCode::OK);
        assert_eq!(get("/nope", &p).status(), StatusCode::NOT_FOUND);
        let post = Request::post("/healthz").body(()).unwrap();
        assert_eq!(handle(&post, &p).status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
