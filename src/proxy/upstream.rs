//! Upstream connection pools, shared by every table so pools survive table swaps: a keep-alive
//! HTTP/1.1 client, and one multiplexed HTTP/2 (h2c prior knowledge) connection per endpoint
//! whose requests carry the client's authority as `:authority`; endpoint choice.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header;
use http::uri::{Authority, Scheme};
use http::{Request, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper::client::conn::http2;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use super::error::ProxyError;
use super::BoxError;
use crate::table::{ServiceBackend, UpstreamProtocol};

/// Idle pooled connections are closed after this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Interval of HTTP/2 pings on h2c upstream connections.
const H2C_PING_INTERVAL: Duration = Duration::from_secs(30);

/// Time a ping may go unanswered before the h2c connection is closed.
const H2C_PING_TIMEOUT: Duration = Duration::from_secs(10);

/// Body of every request sent upstream: the client's body, possibly teed to mirrors.
pub type UpstreamBody = UnsyncBoxBody<Bytes, BoxError>;

/// The pooled clients, keyed internally by endpoint address.
#[derive(Clone)]
pub struct Upstreams {
    http1: Client<HttpConnector, UpstreamBody>,
    h2c: H2cPool,
}

impl Upstreams {
    /// Builds both pools with `connect_timeout` on every new TCP connection.
    pub fn new(connect_timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        connector.enforce_http(true);
        let http1 = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(connector);
        Self {
            http1,
            h2c: H2cPool {
                conns: Arc::new(Mutex::new(HashMap::new())),
                connect_timeout,
            },
        }
    }

    /// Sends `req` (origin-form URI, `Host` header naming the site) to `endpoint` with the client
    /// for `protocol`; the response body streams.
    pub async fn send(
        &self,
        protocol: UpstreamProtocol,
        endpoint: SocketAddr,
        mut req: Request<UpstreamBody>,
    ) -> Result<http::Response<Incoming>, ProxyError> {
        match protocol {
            UpstreamProtocol::Http1 => {
                // The pool is keyed by the URI's authority: the endpoint.
                set_authority(&mut req, endpoint.to_string())?;
                self.http1
                    .request(req)
                    .await
                    .map_err(|e| ProxyError::from_upstream(endpoint, e))
            }
            UpstreamProtocol::H2c => {
                // `:authority` comes from the URI: the site the client asked for, not the
                // endpoint; the connection is chosen by endpoint below.
                let authority = match req.headers_mut().remove(header::HOST) {
                    Some(host) => String::from_utf8_lossy(host.as_bytes()).into_owned(),
                    None => endpoint.to_string(),
                };
                set_authority(&mut req, authority)?;
                self.h2c.send(endpoint, req).await
            }
        }
    }
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstreams").finish_non_exhaustive()
    }
}

/// Makes the request URI absolute: `http://{authority}{path and query}`.
fn set_authority(req: &mut Request<UpstreamBody>, authority: String) -> Result<(), ProxyError> {
    let bad = |e: &dyn std::fmt::Display| ProxyError::BadUpstreamRequest(e.to_string());
    let authority = Authority::try_from(authority).map_err(|e| bad(&e))?;
    let path = req.uri().path_and_query().cloned();
    let mut builder = Uri::builder().scheme(Scheme::HTTP).authority(authority);
    if let Some(p) = path {
        builder = builder.path_and_query(p);
    } else {
        builder = builder.path_and_query("/");
    }
    *req.uri_mut() = builder.build().map_err(|e| bad(&e))?;
    Ok(())
}

/// One HTTP/2 connection per endpoint, reopened when it closes.
#[derive(Clone)]
struct H2cPool {
    conns: Arc<Mutex<HashMap<SocketAddr, http2::SendRequest<UpstreamBody>>>>,
    connect_timeout: Duration,
}

impl H2cPool {
    async fn send(
        &self,
        endpoint: SocketAddr,
        req: Request<UpstreamBody>,
    ) -> Result<http::Response<Incoming>, ProxyError> {
        let mut sender = self.sender(endpoint).await?;
        let upstream = |source| ProxyError::UpstreamH2 {
            addr: endpoint,
            source,
        };
        sender.ready().await.map_err(upstream)?;
        sender.send_request(req).await.map_err(upstream)
    }

    /// The live connection to `endpoint`, or a new one.
    async fn sender(
        &self,
        endpoint: SocketAddr,
    ) -> Result<http2::SendRequest<UpstreamBody>, ProxyError> {
        if let Some(s) = self.lookup(endpoint) {
            return Ok(s);
        }
        let stream = tokio::time::timeout(
            self.connect_timeout,
            tokio::net::TcpStream::connect(endpoint),
        )
        .await
        .map_err(|_| ProxyError::ConnectTimeout { addr: endpoint })?
        .map_err(|source| ProxyError::ConnectIo {
            addr: endpoint,
            source,
        })?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            // Pings find peers that vanished without closing (a deleted pod), so their
            // connection ends and its pool entry is dropped.
            .keep_alive_interval(H2C_PING_INTERVAL)
            .keep_alive_timeout(H2C_PING_TIMEOUT)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|source| ProxyError::UpstreamH2 {
                addr: endpoint,
                source,
            })?;
        tokio::spawn(async move {
            if let Err(error) = conn.await {
                tracing::debug!(%endpoint, %error, "h2c upstream connection ended");
            }
        });
        if let Ok(mut conns) = self.conns.lock() {
            // Endpoints come and go with the table: forget connections that have ended, so the
            // map holds live connections only.
            conns.retain(|_, s| !s.is_closed());
            conns.insert(endpoint, sender.clone());
        }
        Ok(sender)
    }

    fn lookup(&self, endpoint: SocketAddr) -> Option<http2::SendRequest<UpstreamBody>> {
        let mut conns = self.conns.lock().ok()?;
        match conns.get(&endpoint) {
            Some(s) if !s.is_closed() => Some(s.clone()),
            Some(_) => {
                conns.remove(&endpoint);
                None
            }
            None => None,
        }
    }
}

/// Picks one ready endpoint of `service` uniformly at random, or says there is none (503).
pub fn pick_endpoint(service: &ServiceBackend) -> Result<SocketAddr, ProxyError> {
    match service.endpoints.len() {
        0 => Err(ProxyError::NoEndpoints {
            service: service.service.clone(),
        }),
        1 => Ok(service.endpoints[0]),
        n => Ok(service.endpoints[fastrand::usize(..n)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::echo::{serve_echo, EchoIdentity};
    use http_body_util::{BodyExt, Empty};

    async fn echo_on_loopback() -> (SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind echo");
        let addr = listener.local_addr().expect("echo address");
        let identity = EchoIdentity {
            pod: "p".into(),
            namespace: "n".into(),
        };
        (addr, tokio::spawn(serve_echo(listener, identity)))
    }

    fn request(host: &str) -> Request<UpstreamBody> {
        Request::get("/")
            .header(header::HOST, host)
            .body(Empty::new().map_err(|never| match never {}).boxed_unsync())
            .expect("valid request")
    }

    #[tokio::test]
    async fn h2c_pool_forgets_ended_connections() {
        let upstreams = Upstreams::new(Duration::from_secs(2));
        let (a, server_a) = echo_on_loopback().await;
        let resp = upstreams
            .send(UpstreamProtocol::H2c, a, request("site"))
            .await
            .expect("h2c to a");
        assert_eq!(resp.status(), 200);
        drop(resp);
        server_a.abort();
        // The connection to `a` ends once its server is gone (bounded wait).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let ended = || {
            let conns = upstreams.h2c.conns.lock().expect("pool lock");
            conns.get(&a).is_none_or(|s| s.is_closed())
        };
        while !ended() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "connection to a never ended"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (b, _server_b) = echo_on_loopback().await;
        let resp = upstreams
            .send(UpstreamProtocol::H2c, b, request("site"))
            .await
            .expect("h2c to b");
        assert_eq!(resp.status(), 200);
        let conns = upstreams.h2c.conns.lock().expect("pool lock");
        assert_eq!(conns.keys().copied().collect::<Vec<_>>(), vec![b]);
    }
}
