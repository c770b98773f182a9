//! The HTTP/1.1 upstream pool. A pooled connection has no task of its own: the request that
//! checks it out makes its exchange with the `h1` codec (writing the request and reading the
//! response head in the request's task, then the body from the response body's `poll_frame`),
//! so a proxied request never hops to a connection task and back through a channel. When the
//! response body ends and the connection can take another request, the body hands it back; a
//! connection whose body is dropped early, or whose peer closed, is closed instead. Idle
//! connections are capped per endpoint, checked for a close by the peer at checkout, and expire
//! after the pool idle timeout. Requests that upgrade (WebSocket) get a connection of their
//! own, with hyper's client driven by a task, since the tunnel outlives the response.

use foldhash::HashMap;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::proxy::body::BoxError;
use crate::proxy::body::{empty_upstream_body, UpstreamBody};
use crate::proxy::error::{H1Error, ProxyError, TimeoutKind};
use crate::proxy::upstream::balance::Endpoints;
use crate::proxy::upstream::client::SendError;
use crate::proxy::upstream::h1::{Connection, Exchange};
use crate::proxy::upstream::tls::{connect_tls, UpstreamIo, UpstreamTls};
use crate::proxy::workers::PerWorker;

/// Where a pooled connection goes: the endpoint, and the TLS identity it was made with
/// ([`UpstreamTls::pool_key`], 0 for plain TCP).
type PoolKey = (SocketAddr, u64);

/// Idle connections by endpoint and TLS identity, each with when it became idle, oldest first
/// (connections are pushed as they become idle, so the list is sorted by that time).
type IdleConns = HashMap<PoolKey, Vec<(Connection, Instant)>>;

/// The pool: idle connections by endpoint, shared by every request and table, one set per
/// data-plane worker: a connection is registered with the reactor of the worker that opened it,
/// and only that worker's requests take it.
#[derive(Clone)]
pub struct Http1Pool {
    idle: Arc<PerWorker<Mutex<IdleConns>>>,
    max_idle: usize,
    idle_timeout: Duration,
    connect_timeout: Duration,
    /// Where open connections are counted per endpoint.
    endpoints: Arc<Endpoints>,
}

impl Http1Pool {
    /// A pool for `workers` workers keeping at most `max_idle` idle connections per endpoint
    /// and worker, each for at most `idle_timeout`.
    pub fn new(
        workers: usize,
        max_idle: usize,
        idle_timeout: Duration,
        connect_timeout: Duration,
    ) -> Self {
        let pool = Self {
            idle: Arc::new(PerWorker::new(workers, || Mutex::new(HashMap::default()))),
            max_idle,
            idle_timeout,
            connect_timeout,
            endpoints: Arc::default(),
        };
        pool.start_sweeper();
        pool
    }

    /// The per-endpoint state that open connections are counted in.
    pub fn endpoints(&self) -> Arc<Endpoints> {
        self.endpoints.clone()
    }

    /// Sends `req` (origin-form URI, `Host` naming the site) on a pooled or new connection,
    /// over TLS when `tls` says so. The response body drives the connection and returns it to
    /// the pool when it ends.
    pub async fn send(
        &self,
        endpoint: SocketAddr,
        tls: Option<&UpstreamTls>,
        req: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, SendError> {
        if req.headers().contains_key(http::header::UPGRADE) {
            return Box::pin(self.send_upgrade(endpoint, tls, req)).await;
        }
        let key = (endpoint, UpstreamTls::pool_key(tls));
        let conn = match self.checkout(key) {
            Some(c) => c,
            // Boxed: opening a connection is the rare path, and its state would otherwise make
            // every request's future larger.
            None => match Box::pin(self.connect(endpoint, tls)).await {
                Ok(io) => Connection::new(io, self.endpoints.connection(endpoint)),
                Err(error) => return Err(SendError::unsent(error, req)),
            },
        };
        let (parts, body) = req.into_parts();
        let bodyless = body.is_end_stream();
        let mut exchange = Exchange::start(conn, &parts, body);
        let head = match poll_fn(|cx| exchange.poll_head(cx)).await {
            Ok(head) => head,
            Err(source) => {
                let error = match source {
                    H1Error::SendIdle(after) => ProxyError::Timeout {
                        kind: TimeoutKind::BackendSendIdle,
                        after,
                    },
                    source => ProxyError::UpstreamH1 {
                        addr: endpoint,
                        source,
                    },
                };
                // A body-less request is whole in its parts: given back, it can go again.
                let sent =
                    bodyless.then(|| Box::new(Request::from_parts(parts, empty_upstream_body())));
                return Err(SendError {
                    error,
                    unsent: None,
                    sent,
                });
            }
        };
        drop(parts);
        let mut resp = Response::new(ResponseBody {
            kind: Kind::Pooled(Box::new(Pooled {
                exchange,
                pool: self.clone(),
                key,
            })),
        });
        *resp.status_mut() = head.status;
        *resp.version_mut() = head.version;
        *resp.headers_mut() = head.headers;
        resp.body_mut().release_if_ended();
        Ok(resp)
    }

    /// An upgrade gets a connection of its own, driven by a task: the tunnel outlives the
    /// response.
    async fn send_upgrade(
        &self,
        endpoint: SocketAddr,
        tls: Option<&UpstreamTls>,
        req: Request<UpstreamBody>,
    ) -> Result<Response<ResponseBody>, SendError> {
        let io = match self.connect(endpoint, tls).await {
            Ok(io) => io,
            Err(error) => return Err(SendError::unsent(error, req)),
        };
        let counted = self.endpoints.connection(endpoint);
        let (mut sender, conn) = http1::Builder::new()
            .handshake(TokioIo::new(io))
            .await
            .map_err(upstream_error(endpoint))?;
        tokio::spawn(async move {
            let _counted = counted;
            conn.with_upgrades().await
        });
        let resp = sender
            .send_request(req)
            .await
            .map_err(upstream_error(endpoint))?;
        Ok(resp.map(ResponseBody::plain))
    }

    /// The newest idle connection for `key` that is still open. A list emptied here stays in
    /// the map, its allocation ready for the connection's return; the sweeper removes lists
    /// still empty when it runs.
    fn checkout(&self, key: PoolKey) -> Option<Connection> {
        loop {
            let (mut conn, since) = {
                let mut idle = self.idle.mine().lock().ok()?;
                idle.get_mut(&key)?.pop()?
            };
            if since.elapsed() < self.idle_timeout && conn.is_open() {
                return Some(conn);
            }
        }
    }

    /// A new connection to `endpoint`, over TLS when `tls` says so.
    async fn connect(
        &self,
        endpoint: SocketAddr,
        tls: Option<&UpstreamTls>,
    ) -> Result<UpstreamIo, ProxyError> {
        let began = std::time::Instant::now();
        let stream = connect_tcp(endpoint, self.connect_timeout).await?;
        let io = match tls {
            None => UpstreamIo::Plain(stream),
            Some(tls) => {
                connect_tls(stream, endpoint, tls, b"http/1.1", self.connect_timeout).await?
            }
        };
        crate::proxy::upstream::forward::observe_connect(began.elapsed());
        Ok(io)
    }

    /// Keeps an idle connection unless the endpoint has its cap already; drops expired ones
    /// (a prefix of the list, which is oldest first: one clock reading, not one per entry).
    fn put_back(&self, key: PoolKey, conn: Connection) {
        let Ok(mut idle) = self.idle.mine().lock() else {
            return;
        };
        let now = Instant::now();
        let list = idle.entry(key).or_default();
        let expired = list.partition_point(|(_, since)| {
            now.saturating_duration_since(*since) >= self.idle_timeout
        });
        list.drain(..expired);
        if list.len() < self.max_idle {
            list.push((conn, now));
        }
    }

    /// Closes idle connections as they expire, for as long as the pool exists. Needs a
    /// runtime; without one (a pool built outside tokio) expiry happens at checkout only.
    fn start_sweeper(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let idle = Arc::downgrade(&self.idle);
        let timeout = self.idle_timeout;
        runtime.spawn(async move {
            let mut tick = tokio::time::interval((timeout / 2).max(Duration::from_millis(10)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(idle) = idle.upgrade() else {
                    return;
                };
                let now = Instant::now();
                for worker in idle.all() {
                    let Ok(mut idle) = worker.lock() else {
                        return;
                    };
                    idle.retain(|_, list| {
                        list.retain(|(_, since)| now.saturating_duration_since(*since) < timeout);
                        !list.is_empty()
                    });
                }
            }
        });
    }

    /// Number of idle connections.
    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle
            .all()
            .filter_map(|w| {
                w.lock()
                    .ok()
                    .map(|i| i.values().map(Vec::len).sum::<usize>())
            })
            .sum()
    }
}

/// A TCP connection to `endpoint` within `timeout`, with Nagle off (requests and responses are
/// written whole; waiting for ACKs only adds latency).
pub(crate) async fn connect_tcp(
    endpoint: SocketAddr,
    timeout: Duration,
) -> Result<TcpStream, ProxyError> {
    let stream = tokio::time::timeout(timeout, TcpStream::connect(endpoint))
        .await
        .map_err(|_| ProxyError::ConnectTimeout { addr: endpoint })?
        .map_err(|source| ProxyError::ConnectIo {
            addr: endpoint,
            source,
        })?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// The error of a failed handshake or exchange with `endpoint`.
fn upstream_error(endpoint: SocketAddr) -> impl FnOnce(hyper::Error) -> ProxyError {
    move |source| ProxyError::UpstreamHttp {
        addr: endpoint,
        source,
    }
}

/// An exchange on a pooled connection, which goes back to the pool (`key`) when the exchange
/// has ended and the connection can be reused.
struct Pooled {
    exchange: Exchange,
    pool: Http1Pool,
    key: PoolKey,
}

/// The body of an upstream response.
pub struct ResponseBody {
    kind: Kind,
}

enum Kind {
    /// Read by its own polls from a pooled connection. Boxed: the response moves through
    /// several layers on its way to the client, and a pointer is cheaper to move than the
    /// exchange's state.
    Pooled(Box<Pooled>),
    /// Read from a connection a task drives (h2c, upgrades).
    Task(Incoming),
    /// Ended, its connection given back or closed.
    Ended,
}

impl ResponseBody {
    /// A body whose connection a task drives.
    pub fn plain(inner: Incoming) -> Self {
        Self {
            kind: Kind::Task(inner),
        }
    }

    /// Gives the connection back once the whole body has been read.
    fn release_if_ended(&mut self) {
        if !matches!(&self.kind, Kind::Pooled(p) if p.exchange.is_end_stream()) {
            return;
        }
        if let Kind::Pooled(p) = std::mem::replace(&mut self.kind, Kind::Ended) {
            let Pooled {
                exchange,
                pool,
                key,
            } = *p;
            if let Some(conn) = exchange.finish() {
                pool.put_back(key, conn);
            }
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match &mut this.kind {
            Kind::Pooled(p) => match p.exchange.poll_data(cx) {
                Poll::Ready(Some(Ok(data))) => {
                    this.release_if_ended();
                    Poll::Ready(Some(Ok(Frame::data(data))))
                }
                Poll::Ready(None) => {
                    this.release_if_ended();
                    Poll::Ready(None)
                }
                Poll::Ready(Some(Err(e))) => {
                    // The connection is closed with the exchange.
                    this.kind = Kind::Ended;
                    Poll::Ready(Some(Err(e.into())))
                }
                Poll::Pending => Poll::Pending,
            },
            Kind::Task(inner) => Pin::new(inner).poll_frame(cx).map_err(Into::into),
            Kind::Ended => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Pooled(p) => p.exchange.is_end_stream(),
            Kind::Task(inner) => inner.is_end_stream(),
            Kind::Ended => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Pooled(p) => p
                .exchange
                .remaining()
                .map_or_else(SizeHint::default, SizeHint::with_exact),
            Kind::Task(inner) => inner.size_hint(),
            Kind::Ended => SizeHint::with_exact(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::{BodyExt, Empty};

    use super::*;

    /// A keep-alive backend answering `ok`, counting the connections it accepted; it closes a
    /// connection idle for `idle`.
    async fn backend_closing_after(idle: Duration) -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::AcqRel);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(|_req| async {
                        Ok::<_, std::convert::Infallible>(Response::new(http_body_util::Full::new(
                            Bytes::from_static(b"ok"),
                        )))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(idle)
                        .serve_connection(TokioIo::new(s), service)
                        .await;
                });
            }
        });
        (addr, accepted)
    }

    async fn backend() -> (SocketAddr, Arc<AtomicUsize>) {
        backend_closing_after(Duration::from_secs(60)).await
    }

    fn get() -> Request<UpstreamBody> {
        Request::get("/")
            .header(http::header::HOST, "site")
            .body(Empty::new().map_err(|never| match never {}).boxed_unsync())
            .expect("request")
    }

    #[tokio::test]
    async fn a_finished_response_gives_its_connection_back_and_a_dropped_one_does_not() {
        let (addr, accepted) = backend().await;
        let pool = Http1Pool::new(1, 4, Duration::from_secs(60), Duration::from_secs(2));
        for _ in 0..3 {
            let resp = pool.send(addr, None, get()).await.expect("response");
            let body = resp.into_body().collect().await.expect("body").to_bytes();
            assert_eq!(&body[..], b"ok");
        }
        assert_eq!(
            accepted.load(Ordering::Acquire),
            1,
            "one connection, reused"
        );
        assert_eq!(pool.idle_count(), 1);
        // A response dropped before its body was read takes its connection with it.
        let resp = pool.send(addr, None, get()).await.expect("response");
        assert_eq!(pool.idle_count(), 0);
        drop(resp);
        assert_eq!(pool.idle_count(), 0);
        let resp = pool.send(addr, None, get()).await.expect("response");
        resp.into_body().collect().await.expect("body");
        assert_eq!(accepted.load(Ordering::Acquire), 2);
    }

    #[tokio::test]
    async fn a_connection_the_peer_closed_is_not_reused() {
        let (addr, accepted) = backend_closing_after(Duration::from_millis(50)).await;
        let pool = Http1Pool::new(1, 4, Duration::from_secs(60), Duration::from_secs(2));
        for round in 1..=2 {
            let resp = pool.send(addr, None, get()).await.expect("response");
            resp.into_body().collect().await.expect("body");
            assert_eq!(pool.idle_count(), 1);
            // The backend closes the idle connection meanwhile.
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(accepted.load(Ordering::Acquire), round);
        }
    }

    #[tokio::test]
    async fn an_expired_idle_connection_is_closed() {
        let (addr, accepted) = backend().await;
        let pool = Http1Pool::new(1, 4, Duration::from_millis(100), Duration::from_secs(2));
        let resp = pool.send(addr, None, get()).await.expect("response");
        resp.into_body().collect().await.expect("body");
        assert_eq!(pool.idle_count(), 1);
        // Expired: the sweeper closes it, the next request opens a new connection.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(pool.idle_count(), 0);
        let resp = pool.send(addr, None, get()).await.expect("response");
        resp.into_body().collect().await.expect("body");
        assert_eq!(accepted.load(Ordering::Acquire), 2);
    }
}
