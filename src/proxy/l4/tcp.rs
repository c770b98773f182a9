//! One connection on a TLS or TCP socket, from accept to close. TCP: a backend is picked (by
//! weight, then a random ready endpoint) and bytes are copied both ways. TLS: the ClientHello
//! is read without being answered, its SNI picks the Gateway listener and route; Passthrough
//! replays the ClientHello to the backend and copies the encrypted bytes, Terminate completes
//! the handshake with the listener's certificate and copies the plaintext. The backend is
//! chosen once: a new table never moves an open stream. An HTTPS socket with passthrough
//! listeners reads the ClientHello itself and hands the connections it passes through here
//! with the bytes read ([`ClientHello`]). Drain does not cut a stream; the
//! listener manager ends what is still open at the drain timeout. A stream silent both ways
//! for the listener's TCP idle timeout is closed (`idle`). A stream's access log line is
//! written when it ends.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use http::HeaderValue;

use super::counted::Counted;
use super::idle::{relay, Ended, Relayed};
use super::sni::{self, Hello, MAX_HELLO};
use super::{pick_endpoint, refused_at_accept, refuses, L4Error};
use crate::metrics::{L4Series, SeriesIndex};
use crate::proxy::access_log::{Entry, LogSpec};
use crate::proxy::decision;
use crate::proxy::handshake::detect::Prefixed;
use crate::proxy::shared::Shared;
use crate::table::{L4Route, L4Routes, RouteRef};

/// How far a stream got, for its access log line.
#[derive(Debug, Default)]
struct Reached {
    route: Option<Arc<RouteRef>>,
    upstream: Option<SocketAddr>,
    sni: Option<String>,
    /// Bytes of the client's sent upstream before the relay (a passthrough ClientHello).
    prefix: u64,
}

/// A ClientHello read before the stream was handed here (an HTTPS socket's accept path), and
/// its SNI, lower-cased.
pub(crate) struct ClientHello {
    pub bytes: Vec<u8>,
    pub sni: Option<String>,
}

/// Bytes read at most while waiting for a complete ClientHello (records add 5 bytes each).
const MAX_PEEK: usize = MAX_HELLO + 1024;

/// Serves one accepted connection of an L4 socket until either side closes; with `hello`,
/// a connection of an HTTPS socket whose ClientHello named a passthrough listener.
pub(crate) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    listener: SocketAddr,
    shared: Arc<Shared>,
    log: LogSpec,
    hello: Option<ClientHello>,
) {
    let start = std::time::Instant::now();
    let _ = stream.set_nodelay(true);
    let (protocol, refused, idle, socket) = {
        let table = shared.table.load();
        let socket = table.listener(&listener);
        let protocol = match socket.and_then(|l| l.l4.as_ref()) {
            Some(L4Routes::Tls(_)) => "tls",
            _ if hello.is_some() => "tls",
            _ => "tcp",
        };
        let refused = socket.is_some_and(|l| refused_at_accept(l, peer.ip()));
        let idle = socket
            .and_then(|l| l.settings.as_ref())
            .and_then(|s| s.tcp_idle_timeout)
            .unwrap_or(shared.options.tcp_idle_timeout);
        let socket = socket.filter(|_| !log.is_off()).cloned();
        (protocol, refused, idle, socket)
    };
    let mut reached = Reached::default();
    let result = if refused {
        // Closed at once: nothing read, nothing sent, no backend contacted.
        drop(stream);
        Err(L4Error::IpDenied(peer.ip()))
    } else if protocol == "tls" {
        serve_tls(stream, peer, listener, &shared, idle, &mut reached, hello).await
    } else {
        serve_tcp(stream, listener, &shared, idle, &mut reached).await
    };
    if !log.is_off() {
        let mut entry = Box::new(Entry::l4(log, protocol, peer.ip(), start));
        entry.route = reached.route;
        entry.upstream = reached.upstream;
        entry.listener = socket.map(|l| (l, None));
        entry.decision = Some(match &result {
            Ok(_) => decision::PROXIED,
            Err(error) => error.dropped().unwrap_or("stream_error"),
        });
        entry.host = reached.sni.and_then(|s| HeaderValue::from_str(&s).ok());
        if let Ok(relayed) = &result {
            entry.request_bytes = reached.prefix + relayed.from_client;
            entry.response_bytes = relayed.to_client;
        }
        entry.finish(&shared.access);
    }
    if let Ok(Relayed {
        ended: Ended::Idle, ..
    }) = result
    {
        tracing::debug!(%peer, %listener, "stream closed (idle)");
        shared
            .metrics
            .l4_idle_closed
            .with_label_values(&[protocol])
            .inc();
    }
    if let Err(error) = result {
        tracing::debug!(%peer, %listener, %error, "stream closed");
        if let Some(reason) = error.dropped() {
            shared
                .metrics
                .l4_dropped
                .with_label_values(&[protocol, reason])
                .inc();
        }
    }
}

async fn serve_tcp(
    client: TcpStream,
    listener: SocketAddr,
    shared: &Shared,
    idle: Duration,
    reached: &mut Reached,
) -> Result<Relayed, L4Error> {
    let (route, series) = {
        let table = shared.table.load();
        let socket = table.listener(&listener);
        match socket.and_then(|l| l.l4.as_ref().map(|l4| (l, l4))) {
            Some((l, L4Routes::Tcp { route: Some(r) })) => {
                let series = SeriesIndex::of(&table).and_then(|i| i.l4(l.as_ref(), r));
                (r.clone(), series.cloned())
            }
            _ => return Err(L4Error::NoRoute),
        }
    };
    reached.route = Some(route.route.clone());
    let upstream = connect(&route, shared).await?;
    reached.upstream = upstream.peer_addr().ok();
    counted_relay(client, upstream, idle, series).await
}

/// Relays a stream that reached its backend, counted in the route's series (if the table has
/// them): the stream, its bytes as they pass, and its length when it ends.
async fn counted_relay<A, B>(
    client: A,
    upstream: B,
    idle: Duration,
    series: Option<Arc<L4Series>>,
) -> Result<Relayed, L4Error>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let Some(series) = series else {
        return relay(client, upstream, idle).await.map_err(L4Error::Io);
    };
    series.connections.inc();
    let opened = Instant::now();
    let client = Counted::new(client, Some(series.received.clone()));
    let upstream = Counted::new(upstream, Some(series.sent.clone()));
    let ended = relay(client, upstream, idle).await.map_err(L4Error::Io);
    series.duration.observe(opened.elapsed().as_secs_f64());
    ended
}

async fn serve_tls(
    mut client: TcpStream,
    peer: SocketAddr,
    listener: SocketAddr,
    shared: &Shared,
    idle: Duration,
    reached: &mut Reached,
    read: Option<ClientHello>,
) -> Result<Relayed, L4Error> {
    let deadline = Instant::now() + shared.options.handshake_timeout;
    let ClientHello { bytes: hello, sni } = match read {
        Some(read) => read,
        None => tokio::time::timeout_at(deadline, read_hello(&mut client))
            .await
            .map_err(|_| L4Error::HandshakeTimeout)??,
    };
    reached.sni.clone_from(&sni);
    let (route, terminate, series) = {
        let table = shared.table.load();
        let Some(routes) = table.listener(&listener).and_then(|l| l.sni_routes()) else {
            return Err(L4Error::NoRoute);
        };
        // An HTTPS listener's name is served by the HTTPS accept path, never here.
        let l = routes
            .listener(sni.as_deref())
            .filter(|l| !l.https)
            .ok_or_else(|| L4Error::UnknownSni(sni.clone()))?;
        if refuses(l.ip_access.as_deref(), peer.ip()) {
            return Err(L4Error::IpDenied(peer.ip()));
        }
        let route = l
            .route(sni.as_deref())
            .ok_or_else(|| L4Error::UnknownSni(sni.clone()))?;
        let series = SeriesIndex::of(&table).and_then(|i| i.l4(l, route));
        (route.clone(), l.terminate, series.cloned())
    };
    reached.route = Some(route.route.clone());
    if !terminate {
        let mut upstream = connect(&route, shared).await?;
        reached.upstream = upstream.peer_addr().ok();
        upstream.write_all(&hello).await.map_err(L4Error::Io)?;
        reached.prefix = hello.len() as u64;
        if let Some(series) = &series {
            series.received.inc_by(hello.len() as u64);
        }
        return counted_relay(client, upstream, idle, series).await;
    }
    let acceptor =
        crate::proxy::handshake::tls::stream_acceptor(&shared.table, listener, sni.as_deref())
            .ok_or_else(|| L4Error::UnknownSni(sni.clone()))?;
    let accept = acceptor.accept(Prefixed::new(hello, client));
    let tls = tokio::time::timeout_at(deadline, accept)
        .await
        .map_err(|_| L4Error::HandshakeTimeout)?
        .map_err(|e| L4Error::Tls(e.to_string()))?;
    let upstream = connect(&route, shared).await?;
    reached.upstream = upstream.peer_addr().ok();
    counted_relay(tls, upstream, idle, series).await
}

/// Reads until the ClientHello is complete; returns the bytes read and the SNI.
pub(crate) async fn read_hello<I: AsyncRead + AsyncWrite + Unpin>(
    io: &mut I,
) -> Result<ClientHello, L4Error> {
    let mut buf = Vec::with_capacity(1024);
    loop {
        match sni::parse(&buf) {
            Hello::Complete(sni) => return Ok(ClientHello { bytes: buf, sni }),
            Hello::Invalid(why) => return Err(L4Error::NotTls(why)),
            Hello::Partial if buf.len() >= MAX_PEEK => {
                return Err(L4Error::NotTls("ClientHello too long"))
            }
            Hello::Partial => {}
        }
        let mut chunk = [0u8; 2048];
        let want = chunk.len().min(MAX_PEEK - buf.len());
        let n = io.read(&mut chunk[..want]).await.map_err(L4Error::Io)?;
        if n == 0 {
            return Err(L4Error::NotTls("closed before the ClientHello"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Connects to an endpoint of the route's backends, bounded by the connect timeout. A refused
/// or timed-out connection is tried again on another endpoint (nothing was sent yet), up to
/// [`CONNECT_TRIES`] in all.
async fn connect(route: &L4Route, shared: &Shared) -> Result<TcpStream, L4Error> {
    let mut tried = Vec::new();
    loop {
        let endpoint = pick_endpoint(route, &shared.backends, &tried)?;
        let connected =
            tokio::time::timeout(shared.options.connect_timeout, TcpStream::connect(endpoint))
                .await
                .map_err(|_| L4Error::Connect(endpoint, std::io::ErrorKind::TimedOut.into()))
                .and_then(|r| r.map_err(|e| L4Error::Connect(endpoint, e)));
        match connected {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) if tried.len() + 1 >= CONNECT_TRIES => return Err(e),
            Err(e) => {
                tracing::debug!(error = %e, "L4 connect failed, trying another endpoint");
                tried.push(endpoint);
            }
        }
    }
}

/// Connection attempts per TCP or TLS stream: the first and two more on other endpoints.
const CONNECT_TRIES: usize = 3;
