//! One webhook request: path and method checked, the body's size bounded before it is read
//! (declared length) and while it is read (streamed), a review permit taken so that only a
//! few reviews are held and converted at once, then [`crate::kinds::crd::answer_review`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use tokio::sync::Semaphore;

use super::{WebhookLimits, CONVERT_PATH};
use crate::metrics::Metrics;

/// Time a client has to send a request body.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a request waits for a review permit before it is answered 429.
const PERMIT_WAIT: Duration = Duration::from_secs(1);

/// What every request of one server shares.
#[derive(Debug)]
pub(super) struct Shared {
    pub limits: WebhookLimits,
    pub reviews: Arc<Semaphore>,
    pub metrics: Arc<Metrics>,
}

impl Shared {
    pub fn new(limits: WebhookLimits, metrics: Arc<Metrics>) -> Self {
        Self {
            reviews: Arc::new(Semaphore::new(limits.max_concurrent_reviews.max(1))),
            limits,
            metrics,
        }
    }

    /// Counts one connection closed or request refused by a limit.
    pub fn limited(&self, reason: &str) {
        self.metrics
            .webhook_limited
            .with_label_values(&[reason])
            .inc();
    }
}

/// Answers one request: `POST /convert` with a review, 404 on other paths, 405 on other
/// methods, 413 on bodies over the limit, 429 when every review permit stays taken for
/// [`PERMIT_WAIT`], 400 on bodies that are not a review.
pub(super) async fn handle(req: Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    if req.uri().path() != CONVERT_PATH {
        return text(
            StatusCode::NOT_FOUND,
            &format!("not found: the conversion webhook serves only POST {CONVERT_PATH}\n"),
        );
    }
    if req.method() != Method::POST {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("method {} not allowed: use POST\n", req.method()),
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    let max = shared.limits.max_body_bytes;
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        shared.limited("body_size");
        return too_large(max);
    }
    let permit =
        match tokio::time::timeout(PERMIT_WAIT, shared.reviews.clone().acquire_owned()).await {
            Ok(Ok(p)) => p,
            _ => {
                shared.limited("busy");
                let mut r = text(
                    StatusCode::TOO_MANY_REQUESTS,
                    &format!(
                        "{} reviews are being converted: try again\n",
                        shared.limits.max_concurrent_reviews
                    ),
                );
                r.headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from_static("1"));
                return r;
            }
        };
    let limited = Limited::new(req.into_body(), max);
    let bytes = match tokio::time::timeout(BODY_READ_TIMEOUT, limited.collect()).await {
        Err(_) => {
            shared.limited("body_timeout");
            return text(
                StatusCode::REQUEST_TIMEOUT,
                "request body not received in time\n",
            );
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            shared.limited("body_size");
            return too_large(max);
        }
        Ok(Err(e)) => {
            return text(
                StatusCode::BAD_REQUEST,
                &format!("cannot read request body: {e}\n"),
            )
        }
        Ok(Ok(b)) => b.to_bytes(),
    };
    // Conversion is CPU work on a body of up to a few MiB: off the I/O threads.
    let answer =
        tokio::task::spawn_blocking(move || crate::kinds::crd::answer_review(&bytes)).await;
    drop(permit);
    match answer {
        Ok(Ok(v)) => body(StatusCode::OK, "application/json", v),
        Ok(Err(e)) => text(StatusCode::BAD_REQUEST, &format!("{e}\n")),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("conversion failed: {e}\n"),
        ),
    }
}

fn too_large(max: usize) -> Response<Full<Bytes>> {
    text(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("request body over {max} bytes\n"),
    )
}

fn text(status: StatusCode, s: &str) -> Response<Full<Bytes>> {
    body(status, "text/plain; charset=utf-8", s.to_owned())
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
