//! Upstream connection pools, shared by every table so pools survive table swaps: keep-alive
//! HTTP/1.1 connections driven by the requests that use them (`pool`: idle connections capped
//! per endpoint and closed after the pool idle timeout), and one multiplexed HTTP/2 (h2c prior knowledge) connection per endpoint whose
//! requests carry the client's authority as `:authority`, let go when unused for the idle
//! timeout. Endpoint choice is `balance`.

use foldhash::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::header;
use http::uri::{Authority, Scheme};
use http::{Request, Response, Uri};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use crate::proxy::body::UpstreamBody;
use crate::proxy::error::ProxyError;
use crate::proxy::upstream::balance::Endpoints;
use crate::proxy::upstream::pool::{connect_tcp, Http1Pool, ResponseBody};
use crate::proxy::upstream::tls::{connect_tls, UpstreamIo, UpstreamTls};
use crate::proxy::workers::PerWorker;
use crate::table::UpstreamProtocol;

/// Interval of HTTP/2 pings on h2c upstream connections.
const H2C_PING_INTERVAL: Duration = Duration::from_secs(30);

/// Time a ping may go unanswered before the h2c connection is closed.
const H2C_PING_TIMEOUT: Duration = Duration::from_secs(10);

/// The pooled clients, keyed internally by endpoint address.
#[derive(Clone)]
pub struct Upstreams {
    http1: Http1Pool,
    h2c: H2cPool,
}

/// The pools' limits (from the command line: `--connect-timeout`, `--upstream-idle-timeout`,
/// `--upstream-max-idle-per-endpoint`).
#[derive(Debug, Clone, Copy)]
pub struct PoolLimits {
    /// Data-plane workers: each has pools of its own.
    pub workers: usize,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_idle_per_endpoint: usize,
}

impl Upstreams {
    /// Builds both pools with the options' connect timeout, per-endpoint idle cap and idle
    /// timeout.
    pub fn new(limits: PoolLimits) -> Self {
        let http1 = Http1Pool::new(
            limits.workers,
            limits.max_idle_per_endpoint,
            limits.idle_timeout,
            limits.connect_timeout,
        );
        Self {
            h2c: H2cPool {
                endpoints: http1.endpoints(),
                conns: Arc::new(PerWorker::new(limits.workers, || {
                    Mutex::new(HashMap::default())
                })),
                connect_timeout: limits.connect_timeout,
                idle_timeout: limits.idle_timeout,
                next_id: Arc::new(AtomicU64::new(0)),
            },
            http1,
        }
    }

    /// The per-endpoint state both pools count their open connections in.
    pub(crate) fn endpoints(&self) -> Arc<Endpoints> {
        self.http1.endpoints()
    }

    /// Sends `req` (origin-form URI, `Host` header naming the site) to `endpoint` with the pool
    /// for `protocol`; the response body streams.
    pub async fn send(
        &self,
        protocol: UpstreamProtocol,
        endpoint: SocketAddr,
        tls: Option<&UpstreamTls>,
        mut req: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, SendError> {
        match protocol {
            // Origin-form, as it comes: the connection is chosen by endpoint, and `Host`
            // names the site.
            UpstreamProtocol::Http1 => self.http1.send(endpoint, tls, req).await,
            UpstreamProtocol::H2c => {
                // `:authority` comes from the URI: the site the client asked for, not the
                // endpoint; the connection is chosen by endpoint below.
                let authority = match req.headers_mut().remove(header::HOST) {
                    Some(host) => String::from_utf8_lossy(host.as_bytes()).into_owned(),
                    None => endpoint.to_string(),
                };
                set_authority(&mut req, authority)?;
                // Boxed, so that HTTP/1.1 requests' futures do not carry the h2c state.
                let resp = Box::pin(self.h2c.send(endpoint, tls, req)).await?;
                Ok(resp.map(ResponseBody::plain))
            }
        }
    }
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstreams").finish_non_exhaustive()
    }
}

/// A request that could not be exchanged with an endpoint. The request given back is boxed:
/// failures are the rare path, and every send's result is moved through several layers.
#[derive(Debug)]
pub struct SendError {
    pub error: ProxyError,
    /// The request, when none of it reached the backend (the connection could not be made, or
    /// closed before the request was written): it can be sent to another endpoint as it is,
    /// whatever its method and body.
    pub unsent: Option<Box<Request<UpstreamBody>>>,
    /// The request, when it was sent without a body and no response came (the HTTP/1.1 pool
    /// keeps a body-less request's head until the response's): all of it is here, so an
    /// idempotent one can go again without a copy made before it was sent.
    pub sent: Option<Box<Request<UpstreamBody>>>,
}

impl SendError {
    /// A failure before any byte of `req` was written.
    pub fn unsent(error: ProxyError, req: Request<UpstreamBody>) -> Self {
        Self {
            error,
            unsent: Some(Box::new(req)),
            sent: None,
        }
    }
}

impl From<ProxyError> for SendError {
    fn from(error: ProxyError) -> Self {
        Self {
            error,
            unsent: None,
            sent: None,
        }
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

/// A pooled h2c connection: its sender, an id (a reopened connection to the same endpoint gets
/// a new one) and when a request last started on it.
struct H2cConn {
    sender: http2::SendRequest<UpstreamBody>,
    id: u64,
    last_used: Arc<Mutex<tokio::time::Instant>>,
}

/// One worker's h2c connections by endpoint and TLS identity.
type H2cConns = HashMap<(SocketAddr, u64), H2cConn>;

/// One HTTP/2 connection per endpoint and worker (its task runs on the worker that opened it),
/// reopened when it closes. A connection on which no
/// request started for the idle timeout leaves the pool; hyper closes it once its last stream
/// ends.
#[derive(Clone)]
struct H2cPool {
    /// By worker, then endpoint and TLS identity ([`UpstreamTls::pool_key`]).
    conns: Arc<PerWorker<Mutex<H2cConns>>>,
    connect_timeout: Duration,
    idle_timeout: Duration,
    next_id: Arc<AtomicU64>,
    /// Where open connections are counted per endpoint.
    endpoints: Arc<Endpoints>,
}

impl H2cPool {
    async fn send(
        &self,
        endpoint: SocketAddr,
        tls: Option<&UpstreamTls>,
        req: Request<UpstreamBody>,
    ) -> Result<http::Response<hyper::body::Incoming>, SendError> {
        let mut sender = match self.sender(endpoint, tls).await {
            Ok(s) => s,
            Err(error) => return Err(SendError::unsent(error, req)),
        };
        let upstream = |source| ProxyError::UpstreamHttp {
            addr: endpoint,
            source,
        };
        if let Err(e) = sender.ready().await {
            return Err(SendError::unsent(upstream(e), req));
        }
        match sender.try_send_request(req).await {
            Ok(resp) => Ok(resp),
            Err(mut e) => match e.take_message() {
                Some(unsent) => Err(SendError::unsent(upstream(e.into_error()), unsent)),
                None => Err(upstream(e.into_error()).into()),
            },
        }
    }

    /// The live connection to `endpoint` (over TLS when `tls` says so), or a new one.
    async fn sender(
        &self,
        endpoint: SocketAddr,
        tls: Option<&UpstreamTls>,
    ) -> Result<http2::SendRequest<UpstreamBody>, ProxyError> {
        let key = (endpoint, UpstreamTls::pool_key(tls));
        if let Some(s) = self.lookup(key) {
            return Ok(s);
        }
        let began = std::time::Instant::now();
        let stream = connect_tcp(endpoint, self.connect_timeout).await?;
        let stream = match tls {
            None => UpstreamIo::Plain(stream),
            Some(tls) => connect_tls(stream, endpoint, tls, b"h2", self.connect_timeout).await?,
        };
        crate::proxy::upstream::forward::observe_connect(began.elapsed());
        let (sender, conn) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            // Pings find peers that vanished without closing (a deleted pod), so their
            // connection ends and its pool entry is dropped.
            .keep_alive_interval(H2C_PING_INTERVAL)
            .keep_alive_timeout(H2C_PING_TIMEOUT)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|source| ProxyError::UpstreamHttp {
                addr: endpoint,
                source,
            })?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let last_used = Arc::new(Mutex::new(tokio::time::Instant::now()));
        let counted = self.endpoints.connection(endpoint);
        let run = self.clone().run(key, id, last_used.clone(), conn);
        tokio::spawn(async move {
            let _counted = counted;
            run.await
        });
        if let Ok(mut conns) = self.conns.mine().lock() {
            // Endpoints come and go with the table: forget connections that have ended, so the
            // map holds live connections only.
            conns.retain(|_, c| !c.sender.is_closed());
            let sender = sender.clone();
            conns.insert(
                key,
                H2cConn {
                    sender,
                    id,
                    last_used,
                },
            );
        }
        Ok(sender)
    }

    /// Drives one connection; when no request started on it for the idle timeout, removes it
    /// from the pool so it closes after its last stream.
    async fn run(
        self,
        key: (SocketAddr, u64),
        id: u64,
        last_used: Arc<Mutex<tokio::time::Instant>>,
        conn: impl std::future::Future<Output = hyper::Result<()>>,
    ) {
        let endpoint = key.0;
        tokio::pin!(conn);
        loop {
            let since = last_used
                .lock()
                .map(|t| *t)
                .unwrap_or_else(|p| *p.into_inner());
            tokio::select! {
                ended = conn.as_mut() => {
                    if let Err(error) = ended {
                        tracing::debug!(%endpoint, %error, "h2c upstream connection ended");
                    }
                    return;
                }
                _ = tokio::time::sleep_until(since + self.idle_timeout) => {
                    let still = last_used.lock().map(|t| *t == since).unwrap_or(true);
                    if still {
                        break;
                    }
                }
            }
        }
        // The connection's task runs on the worker that opened it: its own entry.
        if let Ok(mut conns) = self.conns.mine().lock() {
            if conns.get(&key).is_some_and(|c| c.id == id) {
                conns.remove(&key);
            }
        }
        if let Err(error) = conn.await {
            tracing::debug!(%endpoint, %error, "h2c upstream connection ended");
        }
    }

    fn lookup(&self, key: (SocketAddr, u64)) -> Option<http2::SendRequest<UpstreamBody>> {
        let mut conns = self.conns.mine().lock().ok()?;
        match conns.get(&key) {
            Some(c) if !c.sender.is_closed() => {
                if let Ok(mut t) = c.last_used.lock() {
                    *t = tokio::time::Instant::now();
                }
                Some(c.sender.clone())
            }
            Some(_) => {
                conns.remove(&key);
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devtools::echo::{serve_echo, EchoIdentity};
    use crate::proxy::options::ProxyOptions;
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
        let defaults = ProxyOptions::default();
        let upstreams = Upstreams::new(PoolLimits {
            workers: 1,
            connect_timeout: Duration::from_secs(2),
            idle_timeout: defaults.upstream_idle_timeout,
            max_idle_per_endpoint: defaults.upstream_max_idle_per_endpoint,
        });
        let (a, server_a) = echo_on_loopback().await;
        let resp = upstreams
            .send(UpstreamProtocol::H2c, a, None, request("site"))
            .await
            .expect("h2c to a");
        assert_eq!(resp.status(), 200);
        drop(resp);
        server_a.abort();
        // The connection to `a` ends once its server is gone (bounded wait).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let ended = || {
            let conns = upstreams.h2c.conns.mine().lock().expect("pool lock");
            conns.get(&(a, 0)).is_none_or(|c| c.sender.is_closed())
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
            .send(UpstreamProtocol::H2c, b, None, request("site"))
            .await
            .expect("h2c to b");
        assert_eq!(resp.status(), 200);
        let conns = upstreams.h2c.conns.mine().lock().expect("pool lock");
        assert_eq!(conns.keys().copied().collect::<Vec<_>>(), vec![(b, 0)]);
    }
}
