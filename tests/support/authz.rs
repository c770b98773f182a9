//! External authorizers for tests, on loopback: an HTTP authorizer whose answer the end of the
//! asked path decides (`/deny` 403 with headers and a body, `/login` 401, `/slow` after 3 s,
//! else 200 with `x-user`), and an Envoy `Authorization/Check` gRPC server (a request path
//! ending in `/deny` denied with 418, else OK with `x-user: grpc-<host>`), each recording what
//! it was asked; and an error page Service answering 418 with a page naming its `X-Code`. The protobuf messages are derived here from their upstream field numbers.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use prost::Message;
use tokio::task::JoinHandle;

use super::net::bind_loopback;

/// What an authorizer saw of one check: path, headers (lower-case names), body.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

pub type Log = Arc<Mutex<Vec<Seen>>>;

/// A test server; dropping it stops it.
pub struct Server {
    pub addr: SocketAddr,
    pub log: Log,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Answer = Response<http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>>;

/// Serves `answer` (given what was seen) on a loopback port, HTTP/1.1 and h2c.
async fn serve<F, Fut>(answer: F) -> Server
where
    F: Fn(Seen, Log) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Answer> + Send,
{
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    let log: Log = Arc::default();
    let shared = log.clone();
    let task = tokio::spawn(async move {
        // Bounded: a test makes far fewer connections.
        for _ in 0..1000 {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (answer, log) = (answer.clone(), shared.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let (answer, log) = (answer.clone(), log.clone());
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let seen = Seen {
                            method: parts.method.to_string(),
                            path: parts
                                .uri
                                .path_and_query()
                                .map_or("/".into(), |p| p.to_string()),
                            headers: parts
                                .headers
                                .iter()
                                .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").into()))
                                .collect(),
                            body: body.to_vec(),
                        };
                        Ok::<_, Infallible>(answer(seen, log).await)
                    }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Server { addr, log, task }
}

fn reply(status: u16, headers: &[(&'static str, &'static str)], body: &'static str) -> Answer {
    let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())).boxed_unsync());
    *resp.status_mut() = StatusCode::from_u16(status).unwrap();
    for (n, v) in headers {
        resp.headers_mut()
            .insert(http::HeaderName::from_static(n), v.parse().unwrap());
    }
    resp
}

/// The HTTP authorizer: the end of the path it is asked about decides.
pub async fn http_authorizer() -> Server {
    serve(|seen: Seen, log: Log| async move {
        log.lock().unwrap().push(seen.clone());
        let path = seen.path.split('?').next().unwrap_or_default().to_owned();
        if path.ends_with("/slow") {
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        if path.ends_with("/deny") {
            return reply(
                403,
                &[("x-reason", "not-you"), ("www-authenticate", "Bearer")],
                "go away",
            );
        }
        if path.ends_with("/login") {
            return reply(401, &[], "");
        }
        reply(200, &[("x-user", "alice"), ("x-secret", "kept-back")], "")
    })
    .await
}

/// An error page Service (ingress-nginx's custom error backend): answers every request with
/// status 418, `x-page: custom` and a body naming the `X-Code` it was asked for, recording
/// what it was asked.
pub async fn error_page_server() -> Server {
    serve(|seen: Seen, log: Log| async move {
        let code = seen.headers.get("x-code").cloned().unwrap_or_default();
        log.lock().unwrap().push(seen);
        let mut resp = reply(418, &[("x-page", "custom")], "");
        *resp.body_mut() = Full::new(Bytes::from(format!("page for {code}"))).boxed_unsync();
        resp
    })
    .await
}

// The few Envoy messages the gRPC authorizer reads and writes (field numbers as upstream).
#[derive(Clone, PartialEq, prost::Message)]
struct CheckRequest {
    #[prost(message, optional, tag = "1")]
    attributes: Option<Attributes>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct Attributes {
    #[prost(message, optional, tag = "4")]
    request: Option<AttrRequest>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct AttrRequest {
    #[prost(message, optional, tag = "2")]
    http: Option<HttpAttrs>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct HttpAttrs {
    #[prost(string, tag = "2")]
    method: String,
    #[prost(map = "string, string", tag = "3")]
    headers: HashMap<String, String>,
    #[prost(string, tag = "4")]
    path: String,
    #[prost(string, tag = "5")]
    host: String,
}
#[derive(Clone, PartialEq, prost::Message)]
struct CheckResponse {
    #[prost(message, optional, tag = "1")]
    status: Option<RpcStatus>,
    #[prost(message, optional, tag = "2")]
    denied: Option<Denied>,
    #[prost(message, optional, tag = "3")]
    ok: Option<OkResp>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
}
#[derive(Clone, PartialEq, prost::Message)]
struct Denied {
    #[prost(message, optional, tag = "1")]
    status: Option<HttpStatus>,
    #[prost(message, repeated, tag = "2")]
    headers: Vec<HeaderOption>,
    #[prost(string, tag = "3")]
    body: String,
}
#[derive(Clone, PartialEq, prost::Message)]
struct HttpStatus {
    #[prost(int32, tag = "1")]
    code: i32,
}
#[derive(Clone, PartialEq, prost::Message)]
struct OkResp {
    #[prost(message, repeated, tag = "2")]
    headers: Vec<HeaderOption>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct HeaderOption {
    #[prost(message, optional, tag = "1")]
    header: Option<Header>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct Header {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(string, tag = "2")]
    value: String,
}

fn header(key: &str, value: &str) -> HeaderOption {
    HeaderOption {
        header: Some(Header {
            key: key.into(),
            value: value.into(),
        }),
    }
}

/// The gRPC authorizer: a `Check` whose request path ends in `/deny` is denied with 418.
pub async fn grpc_authorizer() -> Server {
    serve(|seen: Seen, log: Log| async move {
        let message = CheckRequest::decode(seen.body.get(5..).unwrap_or_default()).unwrap();
        let http = message.attributes.unwrap().request.unwrap().http.unwrap();
        let mut recorded = seen.clone();
        recorded.headers = http.headers.clone();
        recorded.path = format!("{} {} {}", seen.path, http.method, http.path);
        log.lock().unwrap().push(recorded);
        let answer = if http.path.ends_with("/deny") {
            CheckResponse {
                status: Some(RpcStatus { code: 7 }),
                denied: Some(Denied {
                    status: Some(HttpStatus { code: 418 }),
                    headers: vec![header("x-reason", "grpc-policy")],
                    body: "grpc says no".into(),
                }),
                ok: None,
            }
        } else {
            CheckResponse {
                status: Some(RpcStatus { code: 0 }),
                denied: None,
                ok: Some(OkResp {
                    headers: vec![header("x-user", format!("grpc-{}", http.host).as_str())],
                }),
            }
        };
        let m = answer.encode_to_vec();
        let mut framed = vec![0];
        framed.extend_from_slice(&(m.len() as u32).to_be_bytes());
        framed.extend_from_slice(&m);
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        let frames = vec![
            Ok::<_, Infallible>(Frame::data(Bytes::from(framed))),
            Ok(Frame::trailers(trailers)),
        ];
        let mut resp =
            Response::new(StreamBody::new(futures_util::stream::iter(frames)).boxed_unsync());
        resp.headers_mut()
            .insert("content-type", "application/grpc".parse().unwrap());
        resp
    })
    .await
}
