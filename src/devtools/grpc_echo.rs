//! The gRPC side of the echo backend: `gateway_api_conformance.echo_basic.grpcecho.GrpcEcho`,
//! the service the Gateway API conformance suite's gRPC backend serves. `Echo` and `EchoTwo`
//! answer an `EchoResponse` whose `assertions` carry the called method, the request's headers
//! and `:authority`, and the server's namespace and pod; every other method is `UNIMPLEMENTED`.
//! The few protobuf fields involved are encoded here by hand, so the backend needs no gRPC
//! library.

use std::convert::Infallible;

use bytes::{BufMut, Bytes, BytesMut};
use http::{header, HeaderMap, HeaderValue, Request, Response, Version};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};

use crate::devtools::echo::EchoIdentity;

/// The fully qualified name of the echo service.
pub const SERVICE: &str = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";

/// The gRPC status code of a method the server does not implement.
const UNIMPLEMENTED: &str = "12";

/// Answers one gRPC call: drains the request messages, then answers `Echo` and `EchoTwo` with
/// one `EchoResponse` and status `OK`, anything else with `UNIMPLEMENTED` (trailers only).
pub async fn answer(
    req: Request<Incoming>,
    identity: &EchoIdentity,
) -> Response<UnsyncBoxBody<Bytes, Infallible>> {
    let (parts, mut body) = req.into_parts();
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            break;
        }
    }
    let path = parts.uri.path();
    let method = path
        .strip_prefix('/')
        .and_then(|p| p.split_once('/'))
        .filter(|(service, _)| *service == SERVICE)
        .map(|(_, method)| method)
        .filter(|m| matches!(*m, "Echo" | "EchoTwo"));
    let mut resp = Response::new(UnsyncBoxBody::default());
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    if method.is_none() {
        resp.headers_mut()
            .insert("grpc-status", HeaderValue::from_static(UNIMPLEMENTED));
        resp.headers_mut().insert(
            "grpc-message",
            HeaderValue::from_static("method%20not%20implemented"),
        );
        return resp;
    }
    let authority = if parts.version == Version::HTTP_2 {
        parts.uri.authority().map(|a| a.to_string())
    } else {
        None
    }
    .or_else(|| {
        parts
            .headers
            .get(header::HOST)
            .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
    })
    .unwrap_or_default();
    let message = echo_response(path, &parts.headers, &authority, identity);
    let mut framed = BytesMut::with_capacity(message.len() + 5);
    framed.put_u8(0);
    framed.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
    framed.put_slice(&message);
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let frames = [
        Ok(Frame::data(framed.freeze())),
        Ok(Frame::trailers(trailers)),
    ];
    *resp.body_mut() = StreamBody::new(futures_util::stream::iter(frames)).boxed_unsync();
    resp
}

/// `EchoResponse { assertions: Assertions { fully_qualified_method, headers, authority,
/// context: Context { namespace, pod } } }`, protobuf-encoded.
fn echo_response(
    method: &str,
    headers: &HeaderMap,
    authority: &str,
    identity: &EchoIdentity,
) -> Vec<u8> {
    let mut assertions = Vec::new();
    string_field(&mut assertions, 1, method.as_bytes());
    let mut pairs: Vec<(&str, &[u8])> = vec![(":authority", authority.as_bytes())];
    pairs.extend(
        headers
            .iter()
            .filter(|(n, _)| *n != header::HOST)
            .map(|(n, v)| (n.as_str(), v.as_bytes())),
    );
    for (name, value) in pairs {
        let mut header = Vec::new();
        string_field(&mut header, 1, name.as_bytes());
        string_field(&mut header, 2, value);
        string_field(&mut assertions, 2, &header);
    }
    string_field(&mut assertions, 3, authority.as_bytes());
    let mut context = Vec::new();
    string_field(&mut context, 1, identity.namespace.as_bytes());
    string_field(&mut context, 4, identity.pod.as_bytes());
    string_field(&mut assertions, 4, &context);
    let mut response = Vec::new();
    string_field(&mut response, 1, &assertions);
    response
}

/// A length-delimited field (strings, bytes and nested messages share the wire type 2).
fn string_field(out: &mut Vec<u8>, number: u32, value: &[u8]) {
    varint(out, u64::from(number << 3 | 2));
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_length_delimited_with_varints() {
        let mut out = Vec::new();
        string_field(&mut out, 1, b"ab");
        assert_eq!(out, [0x0a, 2, b'a', b'b']);
        let mut long = Vec::new();
        string_field(&mut long, 4, &[0u8; 300]);
        assert_eq!(&long[..3], &[0x22, 0xac, 0x02]);
    }

    #[test]
    fn response_nests_assertions_and_context() {
        let identity = EchoIdentity {
            pod: "p".into(),
            namespace: "n".into(),
        };
        let bytes = echo_response("/s/M", &HeaderMap::new(), "h", &identity);
        // EchoResponse.assertions (field 1) holds everything else.
        assert_eq!(bytes[0], 0x0a);
        assert_eq!(bytes[1] as usize, bytes.len() - 2);
        let inner = &bytes[2..];
        assert_eq!(&inner[..6], &[0x0a, 4, b'/', b's', b'/', b'M']);
        assert!(inner.ends_with(&[0x22, 6, 0x0a, 1, b'n', 0x22, 1, b'p']));
    }
}
