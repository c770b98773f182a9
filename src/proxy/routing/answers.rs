//! The answers the HTTP service gives itself, without a backend: a CORS preflight, gRPC
//! `UNIMPLEMENTED` for a call no route serves, `OPTIONS *`, and the empty body they share.

use http::header::{self, HeaderValue};
use http::{HeaderMap, Response};
use http_body_util::{BodyExt, Empty};

use crate::proxy::body::ProxyBody;

/// The proxy's own answer to a CORS preflight: 200, no body, the filter's headers (none when
/// the origin is not allowed, so the browser refuses the actual request).
pub(crate) fn preflight(headers: HeaderMap) -> Response<ProxyBody> {
    let mut resp = Response::new(empty());
    *resp.headers_mut() = headers;
    resp.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    resp
}

/// The answer to a gRPC call that no route serves: HTTP 200 with gRPC status `UNIMPLEMENTED`
/// in trailers-only form (the gRPC over HTTP/2 protocol's way to fail a call at once): a 404
/// would reach a gRPC client as an opaque transport error instead of a status it can act on.
pub(crate) fn grpc_unimplemented() -> Response<ProxyBody> {
    let mut resp = Response::new(empty());
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert("grpc-status", HeaderValue::from_static("12"));
    headers.insert(
        "grpc-message",
        HeaderValue::from_static("no%20route%20for%20this%20method"),
    );
    resp
}

/// The proxy's own answer to `OPTIONS *` (RFC 9110 9.3.7): 200 without a body; the request
/// concerns the server, not any route.
pub(crate) fn options_asterisk() -> Response<ProxyBody> {
    let mut resp = Response::new(empty());
    resp.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    resp
}

pub(crate) fn empty() -> ProxyBody {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}
