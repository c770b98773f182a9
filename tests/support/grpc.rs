//! gRPC for tests: protobuf messages derived by hand (no protoc), a tonic-served backend with
//! unary, server-, client- and bidirectional-streaming methods and one that fails with custom
//! trailers, and tonic client calls through any address with the `:authority` a test picks.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::{Stream, StreamExt};
use http::uri::PathAndQuery;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic::codegen::{BoxFuture, Service};
use tonic::metadata::MetadataMap;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status, Streaming};
use tonic_prost::ProstCodec;

/// The one message of the test service: a text, the backend that answered and the request
/// headers it saw.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Msg {
    #[prost(string, tag = "1")]
    pub text: String,
    #[prost(string, tag = "2")]
    pub backend: String,
    #[prost(btree_map = "string, string", tag = "3")]
    pub headers: BTreeMap<String, String>,
}

/// The test service's name; its methods are `Unary`, `ServerStream` (as many replies as the
/// request's text says), `ClientStream` (one reply joining every request text), `Bidi` (a
/// reply per request, as each arrives) and `Fail` (status `FAILED_PRECONDITION` with an
/// `x-detail` trailer).
pub const SERVICE: &str = "test.Echo";

/// A running test backend; dropping it stops the server.
pub struct GrpcBackend {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for GrpcBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn reply(backend: &str, text: String, metadata: &MetadataMap) -> Msg {
    let headers = metadata
        .clone()
        .into_headers()
        .iter()
        .map(|(n, v)| {
            let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
            (n.as_str().to_owned(), value)
        })
        .collect();
    Msg {
        text,
        backend: backend.to_owned(),
        headers,
    }
}

type MsgStream = Pin<Box<dyn Stream<Item = Result<Msg, Status>> + Send>>;

/// The handler of every method; `Service` for each shape tonic's server asks for.
#[derive(Clone)]
struct Handler(Arc<str>);

impl Service<Request<Msg>> for Handler {
    type Response = Response<Msg>;
    type Error = Status;
    type Future = BoxFuture<Response<Msg>, Status>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: Request<Msg>) -> Self::Future {
        let name = self.0.clone();
        Box::pin(async move {
            let m = reply(&name, req.get_ref().text.clone(), req.metadata());
            Ok(Response::new(m))
        })
    }
}

/// Server streaming.
#[derive(Clone)]
struct Fanout(Arc<str>);

impl Service<Request<Msg>> for Fanout {
    type Response = Response<MsgStream>;
    type Error = Status;
    type Future = BoxFuture<Response<MsgStream>, Status>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: Request<Msg>) -> Self::Future {
        let name = self.0.clone();
        Box::pin(async move {
            let n: usize = req.get_ref().text.parse().unwrap_or(0).min(100);
            let items: Vec<Result<Msg, Status>> = (0..n)
                .map(|i| Ok(reply(&name, i.to_string(), req.metadata())))
                .collect();
            let stream: MsgStream = Box::pin(futures_util::stream::iter(items));
            Ok(Response::new(stream))
        })
    }
}

/// Bidirectional streaming: a reply per request message.
#[derive(Clone)]
struct Gather(Arc<str>);

impl Service<Request<Streaming<Msg>>> for Gather {
    type Response = Response<MsgStream>;
    type Error = Status;
    type Future = BoxFuture<Response<MsgStream>, Status>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: Request<Streaming<Msg>>) -> Self::Future {
        let name = self.0.clone();
        Box::pin(async move {
            let metadata = req.metadata().clone();
            let stream = req.into_inner();
            // Each reply goes out as soon as its request message has arrived.
            let replies = futures_util::stream::unfold(Some(stream), move |s| {
                let name = name.clone();
                let metadata = metadata.clone();
                async move {
                    let mut s = s?;
                    match s.message().await {
                        Ok(Some(m)) => Some((Ok(reply(&name, m.text, &metadata)), Some(s))),
                        Ok(None) => None,
                        Err(e) => Some((Err(e), None)),
                    }
                }
            });
            Ok(Response::new(Box::pin(replies) as MsgStream))
        })
    }
}

/// Client streaming: one reply joining every request text with `+`.
#[derive(Clone)]
struct Join(Arc<str>);

impl Service<Request<Streaming<Msg>>> for Join {
    type Response = Response<Msg>;
    type Error = Status;
    type Future = BoxFuture<Response<Msg>, Status>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: Request<Streaming<Msg>>) -> Self::Future {
        let name = self.0.clone();
        Box::pin(async move {
            let metadata = req.metadata().clone();
            let mut stream = req.into_inner();
            let mut texts = Vec::new();
            for _ in 0..1000 {
                match stream.message().await? {
                    Some(m) => texts.push(m.text),
                    None => break,
                }
            }
            Ok(Response::new(reply(&name, texts.join("+"), &metadata)))
        })
    }
}

/// The status of `Fail`: a code, a message and a custom trailer.
pub fn failure() -> Status {
    let mut trailers = MetadataMap::new();
    trailers.insert("x-detail", "why-not".parse().expect("valid value"));
    Status::with_metadata(Code::FailedPrecondition, "refused on purpose", trailers)
}

async fn dispatch(
    name: Arc<str>,
    req: http::Request<Incoming>,
) -> Result<http::Response<tonic::body::Body>, Infallible> {
    let codec = || ProstCodec::<Msg, Msg>::default();
    let method = req
        .uri()
        .path()
        .strip_prefix("/test.Echo/")
        .map(str::to_owned);
    let resp = match method.as_deref() {
        Some("Unary") => {
            tonic::server::Grpc::new(codec())
                .unary(Handler(name), req)
                .await
        }
        Some("ServerStream") => {
            tonic::server::Grpc::new(codec())
                .server_streaming(Fanout(name), req)
                .await
        }
        Some("ClientStream") => {
            tonic::server::Grpc::new(codec())
                .client_streaming(Join(name), req)
                .await
        }
        Some("Bidi") => {
            tonic::server::Grpc::new(codec())
                .streaming(Gather(name), req)
                .await
        }
        _ if method.as_deref() == Some("Fail") => failure().into_http(),
        _ => Status::unimplemented("not a test method").into_http(),
    };
    Ok(resp)
}

/// Starts a test backend on a free loopback address; it speaks HTTP/2 only (h2c), so a proxy
/// that sent HTTP/1.1 would fail every call.
pub async fn start_grpc_backend(name: &str) -> GrpcBackend {
    let listener = TcpListener::bind((super::net::loopback_ip(), 0))
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("local address");
    let name: Arc<str> = name.into();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                continue;
            };
            let name = name.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| dispatch(name.clone(), req));
                let _ = auto::Builder::new(TokioExecutor::new())
                    .http2_only()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    GrpcBackend { addr, task }
}

/// A channel to `addr` whose calls carry `authority` as `:authority`.
pub async fn channel(addr: SocketAddr, authority: &str) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("valid endpoint")
        .origin(format!("http://{authority}").parse().expect("valid origin"))
        .connect()
        .await
        .expect("connect to the proxy")
}

/// Connects every channel it serves to one address through TLS with one SNI, offering ALPN
/// `h2` only, as gRPC clients do.
#[derive(Clone)]
struct TlsConnect {
    addr: SocketAddr,
    sni: String,
    config: Arc<rustls::ClientConfig>,
}

impl Service<http::Uri> for TlsConnect {
    type Response = TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: http::Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let stream = super::tls::connect(this.addr, &this.sni, this.config).await?;
            if super::tls::alpn(&stream).as_deref() != Some(b"h2".as_slice()) {
                return Err("the server did not pick h2 through ALPN".into());
            }
            Ok(TokioIo::new(stream))
        })
    }
}

/// A channel to `addr` over TLS (SNI and `:authority` both `host`), trusting `root` only.
pub async fn tls_channel(
    addr: SocketAddr,
    host: &str,
    root: &super::tls::TestCert,
) -> Result<Channel, tonic::transport::Error> {
    let connector = TlsConnect {
        addr,
        sni: host.to_owned(),
        config: super::tls::client_config(&[root], &[b"h2"]),
    };
    Endpoint::from_shared(format!("http://{host}"))
        .expect("valid endpoint")
        .connect_with_connector(connector)
        .await
}

fn path(method: &str) -> PathAndQuery {
    method.parse().expect("valid gRPC path")
}

/// A unary call of `method` (`/package.Service/Method`) with `text` and request metadata.
pub async fn unary(
    channel: &Channel,
    method: &str,
    text: &str,
    metadata: &[(&'static str, &str)],
) -> Result<Response<Msg>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let mut req = Request::new(Msg {
        text: text.to_owned(),
        ..Msg::default()
    });
    for (name, value) in metadata {
        req.metadata_mut()
            .insert(*name, value.parse().expect("valid value"));
    }
    grpc.unary(req, path(method), ProstCodec::default()).await
}

/// A server-streaming call: every reply text, then the final status.
pub async fn server_stream(channel: &Channel, count: usize) -> Result<Vec<String>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let req = Request::new(Msg {
        text: count.to_string(),
        ..Msg::default()
    });
    let mut stream = grpc
        .server_streaming(
            req,
            path("/test.Echo/ServerStream"),
            ProstCodec::<Msg, Msg>::default(),
        )
        .await?
        .into_inner();
    let mut texts = Vec::new();
    for _ in 0..=count {
        match stream.message().await? {
            Some(m) => texts.push(m.text),
            None => break,
        }
    }
    Ok(texts)
}

/// A client-streaming call sending `texts`.
pub async fn client_stream(channel: &Channel, texts: &[&str]) -> Result<Msg, Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let msgs: Vec<Msg> = texts
        .iter()
        .map(|t| Msg {
            text: (*t).to_owned(),
            ..Msg::default()
        })
        .collect();
    let req = Request::new(futures_util::stream::iter(msgs));
    grpc.client_streaming(req, path("/test.Echo/ClientStream"), ProstCodec::default())
        .await
        .map(Response::into_inner)
}

/// A bidirectional call in lockstep: each message is sent only after the reply to the previous
/// one arrived, which needs every hop to forward each message as it comes. Returns the
/// replies' texts.
pub async fn bidi_lockstep(channel: &Channel, texts: &[&str]) -> Result<Vec<String>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Msg>(1);
    let outgoing =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let first = texts.first().map(|t| (*t).to_owned()).unwrap_or_default();
    tx.send(Msg {
        text: first,
        ..Msg::default()
    })
    .await
    .map_err(|_| Status::internal("request stream closed"))?;
    let mut replies = grpc
        .streaming(
            Request::new(outgoing),
            path("/test.Echo/Bidi"),
            ProstCodec::<Msg, Msg>::default(),
        )
        .await?
        .into_inner();
    let mut got = Vec::new();
    for next in texts.iter().skip(1).map(Some).chain([None]) {
        let reply = replies
            .message()
            .await?
            .ok_or_else(|| Status::internal("reply stream ended early"))?;
        got.push(reply.text);
        match next {
            Some(t) => tx
                .send(Msg {
                    text: (*t).to_owned(),
                    ..Msg::default()
                })
                .await
                .map_err(|_| Status::internal("request stream closed"))?,
            None => break,
        }
    }
    drop(tx);
    // The stream ends with the server's status once the requests end.
    let rest = replies.next().await;
    if let Some(Err(e)) = rest {
        return Err(e);
    }
    Ok(got)
}
