//! UDP listeners: one receive loop per UDP socket of the table, bound and removed by
//! [`UdpListeners::sync`] as the listener manager does for TCP. Each client address gets a
//! session with its own connected upstream socket (the backend picked by weight when the
//! session starts), so replies go back to the client that sent the datagrams. Sessions belong
//! to the socket's loop, not to a table: a new table keeps them (and their backend); a removed
//! socket ends them. A session with no datagram either way for the UDP idle timeout ends. A
//! socket holds at most `max_connections` sessions; datagrams of further clients are dropped.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::super::{ListenerError, Shared};
use super::{pick_endpoint, refused_at_accept, L4Error};
use crate::table::L4Routes;

/// Largest datagram relayed (the largest a UDP/IPv4 packet can carry).
const MAX_DATAGRAM: usize = 65_535;

/// A running receive loop; dropping `stop` (or sending on it) ends it and its sessions.
struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// The bound UDP sockets, and the wanted ones that could not be bound with their error.
#[derive(Default)]
pub(crate) struct UdpListeners {
    running: Mutex<BTreeMap<SocketAddr, Running>>,
    failed: Mutex<BTreeMap<SocketAddr, String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl UdpListeners {
    /// Addresses currently receiving.
    pub fn bound(&self) -> Vec<SocketAddr> {
        lock(&self.running).keys().copied().collect()
    }

    /// Wanted sockets that are not bound, with their bind error.
    pub fn failures(&self) -> BTreeMap<SocketAddr, String> {
        lock(&self.failed).clone()
    }

    /// Makes the set of receiving sockets equal to `wanted`: removed ones stop (ending their
    /// sessions), new ones and earlier failures are bound.
    pub fn sync(&self, shared: &Arc<Shared>, wanted: &[SocketAddr]) -> Vec<ListenerError> {
        let removed: Vec<Running> = {
            let mut running = lock(&self.running);
            let gone: Vec<SocketAddr> = running
                .keys()
                .filter(|a| !wanted.contains(a))
                .copied()
                .collect();
            gone.iter().filter_map(|a| running.remove(a)).collect()
        };
        for r in removed {
            let _ = r.stop.send(());
            r.task.abort();
        }
        lock(&self.failed).retain(|a, _| wanted.contains(a));
        let mut errors = Vec::new();
        for &addr in wanted {
            if lock(&self.running).contains_key(&addr) {
                continue;
            }
            match self.start(shared, addr) {
                Ok(()) => {
                    lock(&self.failed).remove(&addr);
                }
                Err(error) => {
                    tracing::warn!(%addr, %error, "cannot bind UDP listener");
                    lock(&self.failed).insert(addr, error.to_string());
                    errors.push(ListenerError { addr, error });
                }
            }
        }
        errors
    }

    /// Tries the failed sockets again; true when one of them bound.
    pub fn retry(&self, shared: &Arc<Shared>) -> bool {
        let failed: Vec<SocketAddr> = lock(&self.failed).keys().copied().collect();
        let mut changed = false;
        for addr in failed {
            if self.start(shared, addr).is_ok() {
                lock(&self.failed).remove(&addr);
                changed = true;
            }
        }
        changed
    }

    /// Stops every loop and its sessions.
    pub fn shutdown(&self) {
        for (_, r) in std::mem::take(&mut *lock(&self.running)) {
            let _ = r.stop.send(());
            r.task.abort();
        }
        lock(&self.failed).clear();
    }

    fn start(&self, shared: &Arc<Shared>, addr: SocketAddr) -> std::io::Result<()> {
        let socket = bind(addr)?;
        let (stop, stop_rx) = oneshot::channel();
        let task = tokio::spawn(receive_loop(
            Arc::new(socket),
            addr,
            shared.clone(),
            stop_rx,
        ));
        tracing::info!(%addr, "listening (UDP)");
        lock(&self.running).insert(addr, Running { stop, task });
        Ok(())
    }
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

/// One client's session: its upstream socket and when it last saw a datagram.
struct Session {
    upstream: Arc<UdpSocket>,
    /// Milliseconds since the loop started, at the last datagram either way.
    last: Arc<AtomicU64>,
    replies: JoinHandle<()>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.replies.abort();
    }
}

async fn receive_loop(
    socket: Arc<UdpSocket>,
    addr: SocketAddr,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
) {
    let epoch = Instant::now();
    let idle = shared.options.udp_idle_timeout;
    let mut sessions: HashMap<SocketAddr, Session> = HashMap::new();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut sweep = tokio::time::interval(idle.max(Duration::from_millis(10)));
    loop {
        let (n, peer) = tokio::select! {
            _ = &mut stop => break,
            _ = sweep.tick() => {
                sessions.retain(|_, s| !s.replies.is_finished());
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
            shared
                .metrics
                .l4_dropped
                .with_label_values(&["udp", "ip_denied"])
                .inc();
            continue;
        }
        if sessions.get(&peer).is_some_and(|s| s.replies.is_finished()) {
            sessions.remove(&peer);
        }
        // Every session holds a socket: a flood of new source addresses must not exhaust them.
        let at_limit = sessions.len() >= shared.options.max_connections;
        let session = match sessions.entry(peer) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(_) if at_limit => {
                shared
                    .metrics
                    .l4_dropped
                    .with_label_values(&["udp", "session_limit"])
                    .inc();
                continue;
            }
            Entry::Vacant(e) => match open_session(&socket, addr, peer, &shared, epoch).await {
                Ok(s) => e.insert(s),
                Err(error) => {
                    tracing::debug!(%addr, %peer, %error, "datagram dropped");
                    if let Some(reason) = error.dropped() {
                        shared
                            .metrics
                            .l4_dropped
                            .with_label_values(&["udp", reason])
                            .inc();
                    }
                    continue;
                }
            },
        };
        session.last.store(millis(epoch), Ordering::Relaxed);
        if let Err(error) = session.upstream.send(&buf[..n]).await {
            tracing::debug!(%peer, %error, "datagram not forwarded");
        }
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
    let route = {
        let table = shared.table.load();
        match table.udp.get(&addr).and_then(|l| l.l4.as_ref()) {
            Some(L4Routes::Udp { route: Some(r) }) => r.clone(),
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
    let replies = tokio::spawn(relay_replies(
        upstream.clone(),
        socket.clone(),
        peer,
        last.clone(),
        epoch,
        shared.options.udp_idle_timeout,
    ));
    Ok(Session {
        upstream,
        last,
        replies,
    })
}

/// Sends the backend's datagrams to the client until neither side has sent one for `idle`.
async fn relay_replies(
    upstream: Arc<UdpSocket>,
    client: Arc<UdpSocket>,
    peer: SocketAddr,
    last: Arc<AtomicU64>,
    epoch: Instant,
    idle: Duration,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let since = last.load(Ordering::Relaxed);
        let due = epoch + Duration::from_millis(since) + idle;
        match tokio::time::timeout_at(due, upstream.recv(&mut buf)).await {
            Ok(Ok(n)) => {
                last.store(millis(epoch), Ordering::Relaxed);
                if let Err(error) = client.send_to(&buf[..n], peer).await {
                    tracing::debug!(%peer, %error, "reply not sent");
                }
            }
            // A refused datagram (ICMP port unreachable) is reported on the next receive.
            Ok(Err(error)) => tracing::debug!(%peer, %error, "upstream receive failed"),
            Err(_) if last.load(Ordering::Relaxed) == since => break,
            Err(_) => {}
        }
    }
    tracing::debug!(%peer, "UDP session ended (idle)");
}
