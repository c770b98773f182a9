//! Admin endpoints: one function from request to response, over the published state only.

use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use serde::Serialize;

use crate::reconcile::Published;

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
