//! The gRPC protocol of external authorization: one unary call of Envoy's
//! `envoy.service.auth.v3.Authorization/Check` over HTTP/2 (h2c, or TLS when a
//! BackendTLSPolicy applies to the authorizer's port) through the proxy's own upstream pool:
//! a length-prefixed `CheckRequest` out, a `CheckResponse` and the `grpc-status` trailer back.
//! Status `OK` allows with the answer's header mutations; any other status denies with the
//! answer's `denied_response` (403 when it names none).

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, StatusCode, Version};
use prost::Message;

use super::http::{read_frames, PARTIAL_BODY};
use super::messages::{
    Address, AttributeContext, AttributeRequest, CheckRequest, CheckResponse, HeaderValueOption,
    HttpRequest, Peer, SocketAddress,
};
use super::{full, is_connection_header, Call, ExtAuthError, Verdict};
use crate::table::UpstreamProtocol;

/// The method's path.
const CHECK_PATH: &str = "/envoy.service.auth.v3.Authorization/Check";

/// Asks the authorizer of `call` with a `Check` call.
pub(super) async fn check(call: &Call<'_>) -> Result<Verdict, ExtAuthError> {
    let message = check_request(call).encode_to_vec();
    let mut framed = BytesMut::with_capacity(5 + message.len());
    framed.put_u8(0);
    framed.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
    framed.put_slice(&message);
    let mut req = Request::new(full(framed.freeze()));
    *req.method_mut() = http::Method::POST;
    *req.uri_mut() = http::Uri::from_static(CHECK_PATH);
    *req.version_mut() = Version::HTTP_2;
    let headers = req.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    let timeout = format!("{}m", call.auth.timeout.as_millis().max(1));
    if let Ok(v) = HeaderValue::from_str(&timeout) {
        headers.insert(HeaderName::from_static("grpc-timeout"), v);
    }
    if let Ok(host) = HeaderValue::from_str(&call.service.service.name) {
        headers.insert(header::HOST, host);
    }
    let resp = call
        .authz
        .transport
        .send(call.service, UpstreamProtocol::H2c, req)
        .await
        .map_err(ExtAuthError::Unreachable)?;
    let (parts, body) = resp.into_parts();
    if parts.status != StatusCode::OK {
        return Err(ExtAuthError::Answer(format!(
            "HTTP status {}",
            parts.status
        )));
    }
    let (data, trailers) = read_frames(body).await?;
    // A trailers-only answer carries its status in the headers.
    let status = trailers
        .as_ref()
        .and_then(|t| t.get("grpc-status"))
        .or_else(|| parts.headers.get("grpc-status"))
        .and_then(|v| v.to_str().ok()?.parse::<i32>().ok())
        .ok_or_else(|| ExtAuthError::Answer("no grpc-status".into()))?;
    if status != 0 {
        let message = trailers
            .as_ref()
            .and_then(|t| t.get("grpc-message"))
            .or_else(|| parts.headers.get("grpc-message"))
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default();
        return Err(ExtAuthError::Grpc {
            code: status,
            message,
        });
    }
    verdict(decode(&data)?)
}

/// The one length-prefixed message of a unary answer.
fn decode(data: &[u8]) -> Result<CheckResponse, ExtAuthError> {
    let bad = |m: &str| ExtAuthError::Answer(m.to_owned());
    let (prefix, rest) = data
        .split_first_chunk::<5>()
        .ok_or_else(|| bad("no message"))?;
    if prefix[0] != 0 {
        return Err(bad("compressed message (no compression was offered)"));
    }
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    if rest.len() != len {
        return Err(bad("message length does not match its frame"));
    }
    CheckResponse::decode(rest).map_err(|e| ExtAuthError::Answer(e.to_string()))
}

/// A `CheckResponse` as a verdict.
fn verdict(answer: CheckResponse) -> Result<Verdict, ExtAuthError> {
    let code = answer.status.as_ref().map_or(0, |s| s.code);
    if code == 0 {
        let ok = answer.ok_response.unwrap_or_default();
        let set = ok.headers.iter().filter_map(header_of).collect();
        let remove = ok
            .headers_to_remove
            .iter()
            .filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok())
            .filter(|n| n != header::HOST && !is_connection_header(n))
            .collect();
        return Ok(Verdict::Allow { set, remove });
    }
    let denied = answer.denied_response.unwrap_or_default();
    let status = denied
        .status
        .and_then(|s| u16::try_from(s.code).ok())
        .and_then(|c| StatusCode::from_u16(c).ok())
        .filter(|s| s.as_u16() >= 200)
        .unwrap_or(StatusCode::FORBIDDEN);
    let mut headers = HeaderMap::new();
    for (name, value, _) in denied.headers.iter().filter_map(header_of) {
        headers.append(name, value);
    }
    Ok(Verdict::Deny {
        status,
        headers,
        body: Bytes::from(denied.body),
    })
}

/// A header mutation of an answer; invalid names and values, `Host` and connection headers
/// are skipped.
fn header_of(option: &HeaderValueOption) -> Option<(HeaderName, HeaderValue, bool)> {
    let h = option.header.as_ref()?;
    let name = HeaderName::from_bytes(h.key.as_bytes()).ok()?;
    if name == header::HOST || is_connection_header(&name) || h.key.starts_with(':') {
        return None;
    }
    let value = HeaderValue::from_bytes(h.bytes()).ok()?;
    let append = option.append.as_ref().is_some_and(|a| a.value);
    Some((name, value, append))
}

/// The `CheckRequest` describing the client's request.
fn check_request(call: &Call<'_>) -> CheckRequest {
    let head = call.head;
    let auth = call.auth;
    let mut headers: HashMap<String, String> = HashMap::new();
    for (name, value) in head.headers() {
        if !auth.request_headers.contains(name) || is_connection_header(name) {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes());
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push(',');
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    let path = head.uri().path_and_query().map_or("/", |p| p.as_str());
    headers.insert(":authority".into(), call.origin.host.to_owned());
    headers.insert(":method".into(), head.method().as_str().to_owned());
    headers.insert(":path".into(), path.to_owned());
    headers.insert(":scheme".into(), call.origin.scheme.to_owned());
    if auth.forward_body > 0 {
        headers.insert(PARTIAL_BODY.as_str().into(), call.partial.to_string());
    }
    let size = head
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<i64>().ok())
        .unwrap_or(-1);
    let protocol = match head.version() {
        Version::HTTP_2 => "HTTP/2",
        Version::HTTP_10 => "HTTP/1.0",
        _ => "HTTP/1.1",
    };
    let body = std::str::from_utf8(&call.body)
        .map(str::to_owned)
        .unwrap_or_default();
    let http = HttpRequest {
        id: head
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        method: head.method().as_str().to_owned(),
        headers,
        path: path.to_owned(),
        host: call.origin.host.to_owned(),
        scheme: call.origin.scheme.to_owned(),
        query: head.uri().query().unwrap_or_default().to_owned(),
        size,
        protocol: protocol.to_owned(),
        body,
        raw_body: call.body.to_vec(),
    };
    let client = call.origin.client;
    CheckRequest {
        attributes: Some(AttributeContext {
            source: Some(Peer {
                address: Some(Address {
                    socket_address: Some(SocketAddress {
                        address: client.ip().to_string(),
                        port_value: u32::from(client.port()),
                    }),
                }),
            }),
            destination: None,
            request: Some(AttributeRequest { http: Some(http) }),
            context_extensions: HashMap::new(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::policy::ext_auth::messages::{
        BoolValue, DeniedHttpResponse, HeaderValue as PbHeader, HttpStatus, OkHttpResponse,
        RpcStatus,
    };

    fn option(key: &str, value: &str, append: Option<bool>) -> HeaderValueOption {
        HeaderValueOption {
            header: Some(PbHeader {
                key: key.into(),
                value: value.into(),
                raw_value: Vec::new(),
            }),
            append: append.map(|value| BoolValue { value }),
        }
    }

    fn framed(answer: &CheckResponse) -> Vec<u8> {
        let m = answer.encode_to_vec();
        let mut out = vec![0];
        out.extend_from_slice(&(m.len() as u32).to_be_bytes());
        out.extend_from_slice(&m);
        out
    }

    #[test]
    fn ok_answers_set_headers_and_skip_host() {
        let answer = CheckResponse {
            status: Some(RpcStatus::default()),
            ok_response: Some(OkHttpResponse {
                headers: vec![
                    option("x-user", "alice", None),
                    option("x-role", "admin", Some(true)),
                    option("host", "evil", None),
                ],
                headers_to_remove: vec!["cookie".into()],
            }),
            denied_response: None,
        };
        let Verdict::Allow { set, remove } = verdict(decode(&framed(&answer)).unwrap()).unwrap()
        else {
            panic!("allowed");
        };
        let names: Vec<_> = set
            .iter()
            .map(|(n, v, a)| (n.as_str(), v.to_str().unwrap(), *a))
            .collect();
        assert_eq!(
            names,
            [("x-user", "alice", false), ("x-role", "admin", true)]
        );
        assert_eq!(remove, [HeaderName::from_static("cookie")]);
    }

    #[test]
    fn denials_default_to_403_and_frames_are_checked() {
        let answer = CheckResponse {
            status: Some(RpcStatus {
                code: 7,
                message: "no".into(),
            }),
            ok_response: None,
            denied_response: Some(DeniedHttpResponse {
                status: None,
                headers: vec![option("x-why", "policy", None)],
                body: "denied".into(),
            }),
        };
        let Verdict::Deny {
            status,
            headers,
            body,
        } = verdict(answer.clone()).unwrap()
        else {
            panic!("denied");
        };
        assert_eq!((status, &body[..]), (StatusCode::FORBIDDEN, &b"denied"[..]));
        assert_eq!(headers["x-why"], "policy");
        let mut with_status = answer;
        with_status.denied_response.as_mut().unwrap().status = Some(HttpStatus { code: 401 });
        assert!(matches!(
            verdict(with_status).unwrap(),
            Verdict::Deny {
                status: StatusCode::UNAUTHORIZED,
                ..
            }
        ));
        let mut short = framed(&CheckResponse::default());
        short.push(1);
        assert!(decode(&short).is_err());
        assert!(decode(&[1, 0, 0, 0, 0]).is_err());
    }
}
