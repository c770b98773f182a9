//! UDP sockets of the listener manager (`sockets`): one receive loop per UDP socket of the
//! table. Each client address gets a
//! session with its own connected upstream socket (the backend picked by weight when the
//! session starts), so replies go back to the client that sent the datagrams. Sessions belong
//! to the socket's loop, not to a table: a new table keeps them (and their backend); a removed
//! socket ends them. A session with no datagram from its client for the UDP idle timeout
//! ends (backend replies do not keep it alive). A socket holds at most `max_connections`
//! sessions, and at most a quarter of them (or `udp_max_sessions_per_source`) of one client IP
//! address (IPv6: one /64); datagrams
//! that would open a session over either limit are dropped and counted. A session's access log
//! line is written when it ends (`udp_log`).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus::IntCounter;
use tokio::net::UdpSocket;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::udp_log::SessionLog;
use super::{pick_endpoint, refused_at_accept, L4Error};
use crate::metrics::{L4Series, SeriesIndex};
use crate::proxy::settings::for_listener;
use crate::proxy::shared::Shared;
use crate::proxy::sockets::Running;
use crate::table::L4Routes;

/// Largest datagram relayed (the largest a UDP/IPv4 packet can carry).
const MAX_DATAGRAM: usize = 65_535;

/// Binds `addr` and starts its receive loop.
pub(crate) fn start(shared: &Arc<Shared>, addr: SocketAddr) -> std::io::Result<Running> {
    let socket = bind(addr)?;
    let (stop, stop_rx) = oneshot::channel();
    let task = tokio::spawn(receive_loop(
        Arc::new(socket),
        addr,
        shared.clone(),
        stop_rx,
    ));
    Ok(Running { stop, task })
}

/// Binds a UDP socket with SO_REUSEADDR (and SO_REUSEPORT on Linux, as TCP listeners).
fn bind(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_address(true)?;
    #[cfg(target_os = "linux")]
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    UdpSocket::from_std(socket.into())
}

/// One client's session: its upstream socket and when its client last sent a datagram.
struct Session {
    upstream: Arc<UdpSocket>,
    /// Bytes the client sent in the session.
    sent: Arc<AtomicU64>,
    /// The route's series (sessions, bytes, length), when the table has them.
    series: Option<Arc<L4Series>>,
    opened: Instant,
    /// Milliseconds since the loop started, at the client's last datagram.
    last: Arc<AtomicU64>,
    replies: JoinHandle<()>,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(series) = &self.series {
            series.duration.observe(self.opened.elapsed().as_secs_f64());
        }
        self.replies.abort();
    }
}

/// The source a per-source session limit counts: the client's IPv4 address (also when it
/// arrives IPv4-mapped on a dual-stack socket), or the /64 of an IPv6 one, since one host
/// usually has a whole /64 to send from.
fn source(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => v4.into(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.into(),
            None => Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX)).into(),
        },
    }
}

/// The sessions of one socket by client address, with how many each source holds.
#[derive(Default)]
struct Sessions {
    by_peer: HashMap<SocketAddr, Session>,
    per_source: HashMap<IpAddr, usize>,
}

impl Sessions {
    /// Ends `peer`'s session if its relay has stopped (it was idle).
    fn end_if_idle(&mut self, peer: SocketAddr) {
        if self
            .by_peer
            .get(&peer)
            .is_some_and(|s| s.replies.is_finished())
        {
            self.by_peer.remove(&peer);
            self.forget(source(peer.ip()));
        }
    }

    /// Ends every session whose relay has stopped.
    fn end_idle(&mut self) {
        let ended: Vec<SocketAddr> = self
            .by_peer
            .iter()
            .filter(|(_, s)| s.replies.is_finished())
            .map(|(p, _)| *p)
            .collect();
        for peer in ended {
            self.by_peer.remove(&peer);
            self.forget(source(peer.ip()));
        }
    }

    fn forget(&mut self, ip: IpAddr) {
        if let Entry::Occupied(mut count) = self.per_source.entry(ip) {
            *count.get_mut() -= 1;
            if *count.get() == 0 {
                count.remove();
            }
        }
    }

    /// Why a new session for `peer` is refused, if it is: the socket's or its source's limit.
    fn refuse(&self, peer: SocketAddr, per_socket: usize, per_source: usize) -> Option<L4Error> {
        if self.by_peer.len() >= per_socket {
            Some(L4Error::SessionLimit)
        } else if self
            .per_source
            .get(&source(peer.ip()))
            .copied()
            .unwrap_or(0)
            >= per_source
        {
            Some(L4Error::SourceLimit)
        } else {
            None
        }
    }

    /// Adds (or replaces) `peer`'s session.
    fn insert(&mut self, peer: SocketAddr, session: Session) {
        if self.by_peer.insert(peer, session).is_none() {
            *self.per_source.entry(source(peer.ip())).or_default() += 1;
        }
    }
}

/// Counts a datagram dropped for `error` in `l4_dropped_total`.
fn drop_datagram(shared: &Shared, error: &L4Error) {
    if let Some(reason) = error.dropped() {
        shared
            .metrics
            .l4_dropped
            .with_label_values(&["udp", reason])
            .inc();
    }
}

async fn receive_loop(
    socket: Arc<UdpSocket>,
    addr: SocketAddr,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<oneshot::Sender<()>>,
) {
    let epoch = Instant::now();
    let idle = shared.options.udp_idle_timeout;
    let (per_socket, per_source) = (
        shared.options.max_connections,
        shared.options.udp_sessions_per_source(),
    );
    let mut sessions = Sessions::default();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut sweep = tokio::time::interval(idle.max(Duration::from_millis(10)));
    let ack = loop {
        let (n, peer) = tokio::select! {
            ack = &mut stop => break ack.ok(),
            _ = sweep.tick() => {
                sessions.end_idle();
                continue;
            }
            received = socket.recv_from(&mut buf) => match received {
                Ok(r) => r,
                Err(error) => {
                    // ICMP errors of earlier sends surface here on some systems; keep going.
                    tracing::debug!(%addr, %error, "UDP receive failed");
                    continue;
                }
            },
        };
        // The `ipAccess` lists are checked on every datagram: a table that refuses a client
        // stops its open session too.
        if shared
            .table
            .load()
            .udp
            .get(&addr)
            .is_some_and(|l| refused_at_accept(l, peer.ip()))
        {
            drop_datagram(&shared, &L4Error::IpDenied(peer.ip()));
            continue;
        }
        sessions.end_if_idle(peer);
        // Every session holds a socket: a flood of new source addresses must not exhaust them,
        // nor may one address take them all from many source ports.
        if !sessions.by_peer.contains_key(&peer) {
            if let Some(refused) = sessions.refuse(peer, per_socket, per_source) {
                drop_datagram(&shared, &refused);
                continue;
            }
            match open_session(&socket, addr, peer, &shared, epoch).await {
                Ok(s) => sessions.insert(peer, s),
                Err(error) => {
                    tracing::debug!(%addr, %peer, %error, "datagram dropped");
                    drop_datagram(&shared, &error);
                    continue;
                }
            }
        }
        let Some(session) = sessions.by_peer.get_mut(&peer) else {
            continue;
        };
        session.last.store(millis(epoch), Ordering::Relaxed);
        session.sent.fetch_add(n as u64, Ordering::Relaxed);
        match session.upstream.send(&buf[..n]).await {
            Ok(sent) => {
                if let Some(series) = &session.series {
                    series.received.inc_by(sent as u64);
                }
            }
            Err(error) => tracing::debug!(%peer, %error, "datagram not forwarded"),
        }
    };
    // The sessions and their upstream sockets end with the loop; then the socket closes.
    drop(sessions);
    drop(socket);
    if let Some(ack) = ack {
        let _ = ack.send(());
    }
}

fn millis(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Starts a session for `peer`: picks a backend from the live table, connects an upstream
/// socket to it, and relays its replies to `peer` until the session is idle.
async fn open_session(
    socket: &Arc<UdpSocket>,
    addr: SocketAddr,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    epoch: Instant,
) -> Result<Session, L4Error> {
    let (route, log, series, table_listener) = {
        let table = shared.table.load();
        let listener = table.udp.get(&addr);
        let log = for_listener(
            &shared.conn_defaults,
            listener.and_then(|l| l.settings.as_deref()),
        )
        .access_log
        .clone();
        match listener.and_then(|l| l.l4.as_ref().map(|l4| (l, l4))) {
            Some((l, L4Routes::Udp { route: Some(r) })) => {
                let series = SeriesIndex::of(&table).and_then(|i| i.l4(l.as_ref(), r));
                (r.clone(), log, series.cloned(), l.clone())
            }
            _ => return Err(L4Error::NoRoute),
        }
    };
    let endpoint = pick_endpoint(&route, &shared.backends, &[])?;
    let local: IpAddr = if endpoint.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let upstream = UdpSocket::bind((local, 0))
        .await
        .map_err(|e| L4Error::Connect(endpoint, e))?;
    upstream
        .connect(endpoint)
        .await
        .map_err(|e| L4Error::Connect(endpoint, e))?;
    let upstream = Arc::new(upstream);
    let last = Arc::new(AtomicU64::new(millis(epoch)));
    let sent = Arc::new(AtomicU64::new(0));
    let log = SessionLog::open(
        log,
        &shared.access,
        table_listener,
        peer,
        &route.route,
        endpoint,
        sent.clone(),
    );
    let replies = tokio::spawn(relay_replies(
        Relay {
            upstream: upstream.clone(),
            client: socket.clone(),
            peer,
            last: last.clone(),
            epoch,
            idle: shared.options.udp_idle_timeout,
        },
        ReplyCounters {
            idle_ended: shared.metrics.l4_idle_closed.with_label_values(&["udp"]),
            sent: series.as_ref().map(|s| s.sent.clone()),
        },
        log,
    ));
    if let Some(series) = &series {
        series.connections.inc();
    }
    Ok(Session {
        upstream,
        sent,
        series,
        opened: Instant::now(),
        last,
        replies,
    })
}

/// The reply side of a session: the backend's socket, the client's, and the client's last
/// datagram (milliseconds since `epoch`) with the idle timeout it is held to.
struct Relay {
    upstream: Arc<UdpSocket>,
    client: Arc<UdpSocket>,
    peer: SocketAddr,
    last: Arc<AtomicU64>,
    epoch: Instant,
    idle: Duration,
}

/// What a session's reply relay counts: the session ending idle, and the bytes sent to the
/// client (when the route has series).
struct ReplyCounters {
    idle_ended: IntCounter,
    sent: Option<IntCounter>,
}

/// Sends the backend's datagrams to the client until the client has sent none for `idle`
/// (replies do not count: a backend that keeps sending cannot keep a session alive); counts
/// the session in `idle_ended` then. The session's line (`log`) is written when this ends or
/// is aborted.
async fn relay_replies(relay: Relay, counters: ReplyCounters, mut log: Option<SessionLog>) {
    let ReplyCounters {
        idle_ended,
        sent: sent_bytes,
    } = counters;
    let Relay {
        upstream,
        client,
        peer,
        last,
        epoch,
        idle,
    } = relay;
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let since = last.load(Ordering::Relaxed);
        let due = epoch + Duration::from_millis(since) + idle;
        match tokio::time::timeout_at(due, upstream.recv(&mut buf)).await {
            Ok(Ok(n)) => match client.send_to(&buf[..n], peer).await {
                Ok(sent) => {
                    if let Some(counter) = &sent_bytes {
                        counter.inc_by(sent as u64);
                    }
                    if let Some(log) = log.as_mut() {
                        log.replied(sent);
                    }
                }
                Err(error) => tracing::debug!(%peer, %error, "reply not sent"),
            },
            // A refused datagram (ICMP port unreachable) is reported on the next receive.
            Ok(Err(error)) => tracing::debug!(%peer, %error, "upstream receive failed"),
            Err(_) if last.load(Ordering::Relaxed) == since => break,
            Err(_) => {}
        }
    }
    idle_ended.inc();
    tracing::debug!(%peer, "UDP session ended (idle)");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_ipv4_addresses_and_ipv6_prefixes() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(source(ip("192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(source(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(source(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            source(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
            source(ip("2001:db8:1:2::9"))
        );
        assert_ne!(source(ip("2001:db8:1:3::1")), source(ip("2001:db8:1:2::1")));
    }
}
