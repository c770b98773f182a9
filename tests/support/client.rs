//! Test clients: pooled HTTP/1.1 and h2c (prior knowledge) clients, request builders, and a
//! `Reply` with helpers to read the echo server's JSON. Every request has a time limit.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::sync::mpsc;

/// Error type of test request bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A request body: a full buffer or a stream fed through a channel.
pub type TestBody = BoxBody<Bytes, BoxError>;
/// A pooled client.
pub type TestClient = Client<HttpConnector, TestBody>;

/// Time limit of one request in tests.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A keep-alive HTTP/1.1 client.
pub fn h1_client() -> TestClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// An HTTP/2 client speaking h2c with prior knowledge. Its `:authority` is the address it
/// connects to; to send another authority through a proxy use [`H2c`].
pub fn h2c_client() -> TestClient {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http()
}

/// One h2c (prior knowledge) connection to `addr`, whose requests carry any `:authority`: the
/// way a browser's HTTP/2 requests reach a proxy.
pub struct H2c {
    sender: hyper::client::conn::http2::SendRequest<TestBody>,
    conn: tokio::task::JoinHandle<()>,
}

impl Drop for H2c {
    fn drop(&mut self) {
        self.conn.abort();
    }
}

impl H2c {
    /// Connects and completes the HTTP/2 handshake.
    pub async fn connect(addr: SocketAddr) -> Result<Self, BoxError> {
        let stream =
            tokio::time::timeout(REQUEST_TIMEOUT, tokio::net::TcpStream::connect(addr)).await??;
        let (sender, conn) = hyper::client::conn::http2::handshake(
            TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await?;
        let conn = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Self { sender, conn })
    }

    /// `method path` with `:authority` `host`.
    pub fn request(method: Method, host: &str, path: &str) -> http::request::Builder {
        Request::builder()
            .method(method)
            .version(Version::HTTP_2)
            .uri(format!("http://{host}{path}"))
    }

    /// Sends `req` and reads the whole response, within [`REQUEST_TIMEOUT`].
    pub async fn send(&mut self, req: Request<TestBody>) -> Result<Reply, BoxError> {
        let fut = async {
            self.sender.ready().await?;
            let resp = self.sender.send_request(req).await?;
            let (parts, body) = resp.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, BoxError>(Reply {
                status: parts.status,
                version: parts.version,
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut).await?
    }
}

/// A body holding `bytes`.
pub fn full(bytes: impl Into<Bytes>) -> TestBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// An empty body.
pub fn empty() -> TestBody {
    full(Bytes::new())
}

/// A body streamed from the returned sender; the body ends when the sender is dropped.
pub fn channel_body() -> (mpsc::Sender<Bytes>, TestBody) {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, BoxError>(Frame::data(b)), rx))
    });
    (tx, StreamBody::new(stream).boxed())
}

/// A request to `addr` (the proxy) for `path` with `Host: host`. For HTTP/2 the host goes in the
/// URI authority instead, as a browser would send it.
pub fn request(method: Method, addr: SocketAddr, host: &str, path: &str) -> http::request::Builder {
    Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header(http::header::HOST, host)
}

/// `GET path` to `addr` with `Host: host`, for the HTTP/1.1 client.
pub fn get(addr: SocketAddr, host: &str, path: &str) -> Request<TestBody> {
    request(Method::GET, addr, host, path)
        .body(empty())
        .expect("valid request")
}

/// A finished response with its whole body.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The body as echo JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The echo server that answered.
    pub fn pod(&self) -> Option<String> {
        self.json()["pod"].as_str().map(str::to_owned)
    }

    /// A string field of the echo JSON (`path`, `host`, `method`, `proto`).
    pub fn field(&self, name: &str) -> Option<String> {
        self.json()[name].as_str().map(str::to_owned)
    }

    /// Values of a request header as the echo server saw it; the name is matched ignoring case.
    pub fn echoed_header(&self, name: &str) -> Vec<String> {
        let json = self.json();
        let Some(map) = json["headers"].as_object() else {
            return vec![];
        };
        map.iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.as_array().cloned().unwrap_or_default())
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    /// A response header as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

/// Sends `req` and reads the whole response, within [`REQUEST_TIMEOUT`].
pub async fn send(client: &TestClient, req: Request<TestBody>) -> Result<Reply, BoxError> {
    let fut = async {
        let resp = client.request(req).await?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok::<_, BoxError>(Reply {
            status: parts.status,
            version: parts.version,
            headers: parts.headers,
            body,
        })
    };
    tokio::time::timeout(REQUEST_TIMEOUT, fut).await?
}

/// `GET path` with `Host: host` over HTTP/1.1 on a fresh client; panics on transport errors.
pub async fn get_h1(addr: SocketAddr, host: &str, path: &str) -> Reply {
    send(&h1_client(), get(addr, host, path))
        .await
        .expect("request completes")
}
