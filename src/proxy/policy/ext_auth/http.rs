//! The HTTP protocol of external authorization: a sub-request to the authorizer with the
//! client's method (or the configured one), the path prefix and the client's path and query
//! (or a fixed path), `Host`, `Authorization`, `Content-Length` and the selected headers, and
//! the forwarded body. A 2xx answer allows, and its selected headers are set on the upstream
//! request; any other answer is the client's (status, headers, body).

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Uri, Version};
use http_body_util::BodyExt;

use super::{full, is_connection_header, Call, ExtAuthError, Verdict, MAX_ANSWER_FRAMES};
use crate::proxy::body::ProxyBody;
use crate::table::{UpstreamProtocol, MAX_AUTH_RESPONSE_BODY};

/// Tells the authorizer that the body it got is only the start of the client's.
pub(super) const PARTIAL_BODY: HeaderName = HeaderName::from_static("x-envoy-auth-partial-body");

/// Asks the authorizer of `call` over HTTP.
pub(super) async fn check(call: &Call<'_>) -> Result<Verdict, ExtAuthError> {
    let req = sub_request(call)?;
    let resp = call
        .authz
        .transport
        .send(call.service, call.service.protocol, req)
        .await
        .map_err(ExtAuthError::Unreachable)?;
    let (parts, body) = resp.into_parts();
    let body = read_answer(body).await?;
    if parts.status.is_success() {
        let set = parts
            .headers
            .iter()
            .filter(|(name, _)| copied(call, name))
            .map(|(name, value)| (name.clone(), value.clone(), false))
            .collect();
        return Ok(Verdict::Allow {
            set,
            remove: Vec::new(),
        });
    }
    Ok(Verdict::Deny {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// Whether a header of an allowing answer goes onto the upstream request: selected, and not
/// about the authorizer's own message or connection.
fn copied(call: &Call<'_>, name: &HeaderName) -> bool {
    call.auth.response_headers.contains(name)
        && !is_connection_header(name)
        && ![
            header::HOST,
            header::CONTENT_LENGTH,
            header::CONTENT_TYPE,
            header::CONTENT_ENCODING,
            header::DATE,
            header::SERVER,
        ]
        .contains(name)
}

/// The sub-request to the authorizer.
fn sub_request(call: &Call<'_>) -> Result<Request<crate::proxy::body::UpstreamBody>, ExtAuthError> {
    let auth = call.auth;
    let head = call.head;
    let original = head.uri().path_and_query().map_or("/", |p| p.as_str());
    let target = auth.path.target(original);
    let uri = Uri::try_from(target.as_str())
        .map_err(|e| ExtAuthError::Answer(format!("sub-request path {target:?}: {e}")))?;
    let mut req = Request::new(full(call.body.clone()));
    *req.method_mut() = auth.method.clone().unwrap_or_else(|| head.method().clone());
    *req.uri_mut() = uri;
    *req.version_mut() = match call.service.protocol {
        UpstreamProtocol::Http1 => Version::HTTP_11,
        UpstreamProtocol::H2c => Version::HTTP_2,
    };
    let headers = req.headers_mut();
    for (name, value) in head.headers() {
        let always = name == header::AUTHORIZATION;
        if (always || auth.request_headers.contains(name))
            && !is_connection_header(name)
            && name != header::CONTENT_LENGTH
            && name != header::HOST
            && name != header::EXPECT
        {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Ok(host) = HeaderValue::from_str(call.origin.host) {
        headers.insert(header::HOST, host);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(call.body.len()));
    if auth.forward_body > 0 {
        let partial = if call.partial { "true" } else { "false" };
        headers.insert(PARTIAL_BODY, HeaderValue::from_static(partial));
    }
    if auth.original_headers {
        let url = call.origin.url(original);
        if let Ok(v) = HeaderValue::from_str(&url) {
            headers.insert(HeaderName::from_static("x-original-url"), v);
        }
        if let Ok(v) = HeaderValue::from_str(head.method().as_str()) {
            headers.insert(HeaderName::from_static("x-original-method"), v);
        }
        if let Ok(v) = HeaderValue::from_str(original) {
            headers.insert(HeaderName::from_static("x-auth-request-redirect"), v);
        }
    }
    Ok(req)
}

/// The authorizer's answer body, up to [`MAX_AUTH_RESPONSE_BODY`] bytes.
pub(super) async fn read_answer(body: ProxyBody) -> Result<Bytes, ExtAuthError> {
    Ok(read_frames(body).await?.0)
}

/// The answer's data (bounded) and its trailers.
pub(super) async fn read_frames(
    mut body: ProxyBody,
) -> Result<(Bytes, Option<HeaderMap>), ExtAuthError> {
    let mut data = BytesMut::new();
    let mut trailers = None;
    for _ in 0..MAX_ANSWER_FRAMES {
        let Some(frame) = body.frame().await else {
            return Ok((data.freeze(), trailers));
        };
        let frame = frame.map_err(|e| ExtAuthError::Answer(e.to_string()))?;
        match frame.into_data() {
            Ok(chunk) => {
                if data.len() + chunk.len() > MAX_AUTH_RESPONSE_BODY {
                    return Err(ExtAuthError::Answer(format!(
                        "body over {MAX_AUTH_RESPONSE_BODY} bytes"
                    )));
                }
                data.extend_from_slice(&chunk);
            }
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailers = Some(t);
                }
            }
        }
    }
    Err(ExtAuthError::Answer(format!(
        "more than {MAX_ANSWER_FRAMES} frames"
    )))
}
