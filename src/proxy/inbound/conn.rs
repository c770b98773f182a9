//! One accepted connection from accept to close: the pre-HTTP phases (TLS handshake, protocol
//! detection, HTTP/2 preface) under one handshake deadline; then the own HTTP/1.1 server
//! (`h1`) or hyper's HTTP/2 serving it, closed when
//! idle for the idle timeout or, at drain, as soon as no request is in flight. Also the
//! per-listener count of open connections that the connection limit and the drain read.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use prometheus::IntGauge;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;

use crate::proxy::body::RequestBody;
use crate::proxy::handshake::detect::{detect, Prefixed, Protocol};
use crate::proxy::handshake::tls::handshake;
use crate::proxy::inbound::h1;
use crate::proxy::l4::tcp::read_hello;
use crate::proxy::routing::service::Handler;
use crate::proxy::routing::tracked::Activity;
use crate::proxy::settings::{for_listener, ConnSettings};
use crate::proxy::shared::Shared;

/// After a connection was asked to close (idle, drain), time given to flush the last response
/// or the GOAWAY before a connection with nothing in flight is dropped: HTTP/2 peers that never
/// answer the GOAWAY's PING would otherwise hold it.
const CLOSE_GRACE: Duration = Duration::from_millis(250);

/// The connection builder: HTTP/1.1 and HTTP/2 on one port with every timer of hyper that
/// applies: the request head timeout (slowloris) and HTTP/2 keep-alive PINGs; with a
/// header size limit, the HTTP/1.1 read buffer (hyper answers 431 to a head that does not fit)
/// and the HTTP/2 header list size.
pub(crate) fn builder(options: &ConnSettings) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    if let Some(size) = options.head_buffer() {
        builder.http1().max_buf_size(size);
    }
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(options.http2_keepalive_interval)
        .keep_alive_timeout(options.http2_keepalive_timeout)
        .max_concurrent_streams(options.http2_max_concurrent_streams);
    if let Some(size) = options.max_request_header_bytes {
        builder.http2().max_header_list_size(size);
    }
    builder
}

/// Open connections of one listener socket, for the connection limit, the drain and the
/// `connections_open` gauge.
pub(crate) struct OpenConns {
    open: AtomicUsize,
    closed: Notify,
    gauge: IntGauge,
}

impl OpenConns {
    pub(crate) fn new(gauge: IntGauge) -> Arc<Self> {
        Arc::new(Self {
            open: AtomicUsize::new(0),
            closed: Notify::new(),
            gauge,
        })
    }

    /// Connections open now.
    pub(crate) fn count(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Counts one connection until the returned mark drops, unless `limit` are open already.
    /// One atomic step: workers accepting at once never take the count past the limit.
    pub(crate) fn try_add(self: &Arc<Self>, limit: usize) -> Option<Open> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()?;
        self.gauge.inc();
        Some(Open(self.clone()))
    }

    /// Resolves when no connection is open.
    pub(crate) async fn all_closed(&self) {
        loop {
            let closed = self.closed.notified();
            if self.count() == 0 {
                return;
            }
            closed.await;
        }
    }
}

/// One open connection, counted until dropped.
pub(crate) struct Open(Arc<OpenConns>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        self.0.gauge.dec();
        self.0.closed.notify_waiters();
    }
}

/// What a connection task needs from its accept loop.
pub(crate) struct Accepted {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    pub listener: SocketAddr,
    pub shared: Arc<Shared>,
    pub builder: auto::Builder<TokioExecutor>,
    pub drain: watch::Receiver<bool>,
    pub open: Open,
}

/// Serves one accepted connection (plain or TLS, or a TLS/TCP route's stream) until it closes.
pub(crate) async fn handle(conn: Accepted) {
    let Accepted {
        stream,
        peer,
        listener,
        shared,
        builder,
        mut drain,
        open: _open,
    } = conn;
    let (is_l4, is_tls, passthrough, settings) = {
        let table = shared.table.load();
        let found = table.listener(&listener);
        let settings = found.and_then(|l| l.settings.as_deref());
        (
            found.is_some_and(|l| l.l4.is_some()),
            found.is_some_and(|l| l.tls.is_some()),
            found.is_some_and(|l| l.passthrough.is_some()),
            for_listener(&shared.conn_defaults, settings),
        )
    };
    if is_l4 {
        let log = settings.access_log.clone();
        crate::proxy::l4::tcp::serve(stream, peer, listener, shared, log, None).await;
        return;
    }
    // A listener with a ProxyConfig gets a builder with its own limits.
    let builder = if Arc::ptr_eq(&settings, &shared.conn_defaults) {
        builder
    } else {
        self::builder(&settings)
    };
    let _ = stream.set_nodelay(true);
    let deadline = Instant::now() + settings.handshake_timeout;
    let mut handler = Handler::new(shared.clone(), listener, peer, settings);
    if !is_tls {
        if let Some(io) = before_http(stream, deadline, &mut drain, &shared).await {
            serve_http(&builder, io, handler, drain).await;
        }
        return;
    }
    if !passthrough {
        if let Some(tls) = tls_handshake(stream, &mut handler, deadline, &mut drain).await {
            if let Some(io) = before_http(tls, deadline, &mut drain, &shared).await {
                serve_http(&builder, io, handler, drain).await;
            }
        }
        return;
    }
    // The socket also has TLS Passthrough listeners: the ClientHello's SNI says whether the
    // connection is passed through or terminated here.
    let mut stream = stream;
    let read = bounded(read_hello(&mut stream), deadline, &mut drain, &shared).await;
    let hello = match read {
        Some(Ok(hello)) => hello,
        Some(Err(error)) => {
            tracing::debug!(%peer, %error, "no ClientHello");
            return;
        }
        None => return,
    };
    let passes = shared
        .table
        .load()
        .listener(&listener)
        .is_some_and(|l| l.passes_through(hello.sni.as_deref()));
    if passes {
        let log = handler.settings.access_log.clone();
        crate::proxy::l4::tcp::serve(stream, peer, listener, shared, log, Some(hello)).await;
        return;
    }
    let io = Prefixed::new(hello.bytes, stream);
    if let Some(tls) = tls_handshake(io, &mut handler, deadline, &mut drain).await {
        if let Some(io) = before_http(tls, deadline, &mut drain, &shared).await {
            serve_http(&builder, io, handler, drain).await;
        }
    }
}

/// Completes the TLS handshake of a connection of an HTTPS socket by `deadline`, noting the
/// SNI in `handler`; `None` when it failed or ran out of time.
async fn tls_handshake<I: AsyncRead + AsyncWrite + Unpin>(
    io: I,
    handler: &mut Handler,
    deadline: Instant,
    drain: &mut watch::Receiver<bool>,
) -> Option<TlsStream<I>> {
    let shared = handler.shared.clone();
    let handshake = handshake(&shared.table, handler.listener, io);
    match bounded(handshake, deadline, drain, &shared).await {
        Some(Ok((stream, info))) => {
            handler.tls = Some(info);
            Some(stream)
        }
        Some(Err(error)) => {
            tracing::debug!(peer = %handler.peer, %error, "TLS handshake failed");
            None
        }
        None => None,
    }
}

/// Reads until the protocol is known (for HTTP/2: the preface and SETTINGS), by `deadline`.
async fn before_http<I: AsyncRead + Unpin>(
    mut io: I,
    deadline: Instant,
    drain: &mut watch::Receiver<bool>,
    shared: &Shared,
) -> Option<(Protocol, Prefixed<I>)> {
    let mut buf = Vec::new();
    match bounded(detect(&mut io, &mut buf), deadline, drain, shared).await {
        Some(Ok(Some(protocol))) => Some((protocol, Prefixed::new(buf, io))),
        _ => None,
    }
}

/// Runs `fut` until `deadline`; once the drain starts, for at most [`CLOSE_GRACE`] more (a
/// client already sending its request is served, a silent one does not delay the exit).
/// `None` when time ran out (counted as a handshake timeout).
async fn bounded<F: Future>(
    fut: F,
    deadline: Instant,
    drain: &mut watch::Receiver<bool>,
    shared: &Shared,
) -> Option<F::Output> {
    tokio::pin!(fut);
    let mut deadline = deadline;
    let mut draining = false;
    loop {
        tokio::select! {
            biased;
            out = tokio::time::timeout_at(deadline, &mut fut) => {
                if out.is_err() {
                    shared.metrics.connections_closed.with_label_values(&["handshake_timeout"]).inc();
                }
                return out.ok();
            }
            _ = drain.wait_for(|d| *d), if !draining => {
                draining = true;
                deadline = deadline.min(Instant::now() + CLOSE_GRACE);
            }
        }
    }
}

/// Serves HTTP until the peer closes, the connection has been idle for the idle timeout, or the
/// drain asks it to close: HTTP/1.1 with the own server (`h1`), HTTP/2 with hyper. Idle and
/// drain close gracefully: an idle HTTP/1.1 connection closes at once and a response in flight
/// says `Connection: close`; HTTP/2 gets a GOAWAY. A connection asked to close is dropped once
/// nothing is in flight.
async fn serve_http<I>(
    builder: &auto::Builder<TokioExecutor>,
    (protocol, io): (Protocol, I),
    handler: Handler,
    drain: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = handler.activity.clone();
    let shared = handler.shared.clone();
    let idle = handler.settings.idle_timeout;
    let peer = handler.peer;
    let ended = if protocol == Protocol::Http1 {
        let (close, closed) = watch::channel(false);
        let conn = h1::serve(Box::new(io), handler, closed);
        let ended = until_closed(
            conn,
            |_| {
                close.send_replace(true);
            },
            (&activity, idle, &shared),
            drain,
        )
        .await;
        ended.map(|e| e.map_err(|e| Box::new(e) as crate::proxy::body::BoxError))
    } else {
        let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
            // Boxed: a request's future is large, and hyper moves the future it is given
            // into place; moving a box copies a pointer, not the whole state machine.
            let handling = Box::pin(handler.clone().handle(req.map(RequestBody::Hyper)));
            async move { Ok::<_, Infallible>(handling.await) }
        });
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
        until_closed(
            conn,
            |conn| conn.graceful_shutdown(),
            (&activity, idle, &shared),
            drain,
        )
        .await
    };
    if let Some(Err(error)) = ended {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

/// Runs the connection `conn` to its end; when it has been idle for the idle timeout or the
/// drain starts, asks it to close (`shutdown`), and drops it once it has had nothing in flight
/// for [`CLOSE_GRACE`] after that (`None`).
async fn until_closed<C: Future>(
    conn: C,
    mut shutdown: impl FnMut(Pin<&mut C>),
    (activity, idle, shared): (&Activity, Duration, &Shared),
    mut drain: watch::Receiver<bool>,
) -> Option<C::Output> {
    tokio::pin!(conn);
    let mut closing = false;
    loop {
        tokio::select! {
            biased;
            ended = conn.as_mut() => return Some(ended),
            _ = activity.idle_for(idle), if !closing => {
                shared.metrics.connections_closed.with_label_values(&["idle"]).inc();
                shutdown(conn.as_mut());
                closing = true;
            }
            _ = drain.wait_for(|d| *d), if !closing => {
                shutdown(conn.as_mut());
                closing = true;
            }
            _ = async {
                tokio::time::sleep(CLOSE_GRACE).await;
                activity.idle_for(CLOSE_GRACE).await;
            }, if closing => return None,
        }
    }
}
