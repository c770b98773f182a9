//! Listener manager: one accept loop per bound socket (SO_REUSEPORT, so a new process can take
//! over a port during a rollout), with a cap on open connections. Binding is synchronous with
//! the table sync; removing a listener closes its socket at once and drains its open
//! connections in the background (idle ones closed at once, busy ones after their request,
//! bounded by the drain timeout, then the rest are cut). Connections are served by `conn`. A
//! socket that cannot be
//! bound is remembered with its error and retried with a doubling back-off until it binds or
//! leaves the table; the failures are what the status reports as not programmed.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::proxy::error::ListenerError;
use crate::proxy::inbound::conn::{builder, handle, Accepted, OpenConns};
use crate::proxy::shared::Shared;

/// Pending connections the kernel queues per listener.
const BACKLOG: u32 = 1024;
/// Pause after an accept error (such as too many open files) before accepting again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);
/// Wait before the first retry of a socket that could not be bound; it doubles with every
/// failed retry up to [`BIND_RETRY_MAX`].
pub const BIND_RETRY_FIRST: Duration = Duration::from_secs(1);
/// Longest wait between two retries of a socket that could not be bound.
pub const BIND_RETRY_MAX: Duration = Duration::from_secs(30);

/// A wanted socket that is not bound: the last error and when to try again.
struct Failed {
    error: String,
    wait: Duration,
    next: Instant,
}

impl Failed {
    fn new(error: String) -> Self {
        Self {
            error,
            wait: BIND_RETRY_FIRST,
            next: Instant::now() + BIND_RETRY_FIRST,
        }
    }

    /// Another failed attempt: the next one waits twice as long, up to the cap.
    fn again(&mut self, error: String) {
        self.error = error;
        self.wait = (self.wait * 2).min(BIND_RETRY_MAX);
        self.next = Instant::now() + self.wait;
    }
}

/// A running accept loop. Sending on `stop` asks it to close its socket; it answers on the
/// enclosed sender once the socket is closed, then drains.
struct Running {
    stop: oneshot::Sender<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

/// Bound listeners by table key, and the tasks still draining removed ones.
#[derive(Default)]
pub(crate) struct Listeners {
    running: Mutex<BTreeMap<SocketAddr, Running>>,
    /// Wanted sockets that could not be bound, retried until they bind or are no longer wanted.
    failed: Mutex<BTreeMap<SocketAddr, Failed>>,
    draining: Mutex<Vec<JoinHandle<()>>>,
    /// Serializes `sync` and `shutdown` so two reconciles never race on one address.
    sync: tokio::sync::Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Listeners {
    /// Addresses currently accepting.
    pub fn bound(&self) -> Vec<SocketAddr> {
        lock(&self.running).keys().copied().collect()
    }

    /// Wanted sockets that are not bound, with the last bind error of each.
    pub fn failures(&self) -> BTreeMap<SocketAddr, String> {
        lock(&self.failed)
            .iter()
            .map(|(a, f)| (*a, f.error.clone()))
            .collect()
    }

    /// When the next failed socket is due for a retry, if any failed.
    pub fn next_retry(&self) -> Option<Instant> {
        lock(&self.failed).values().map(|f| f.next).min()
    }

    /// Makes the set of accepting sockets equal to `wanted`: stops removed ones first (so an
    /// address can be rebound), then binds new ones. Sockets that failed before are tried again
    /// at once (a new table is a new chance) without resetting their back-off.
    pub async fn sync(&self, shared: &Arc<Shared>, wanted: &[SocketAddr]) -> Vec<ListenerError> {
        let _serial = self.sync.lock().await;
        let removed: Vec<Running> = {
            let mut running = lock(&self.running);
            let gone: Vec<SocketAddr> = running
                .keys()
                .filter(|a| !wanted.contains(a))
                .copied()
                .collect();
            gone.iter().filter_map(|a| running.remove(a)).collect()
        };
        lock(&self.failed).retain(|a, _| wanted.contains(a));
        self.stop_all(removed).await;
        let mut errors = Vec::new();
        for &addr in wanted {
            if lock(&self.running).contains_key(&addr) {
                continue;
            }
            let Err(error) = self.start(shared, addr) else {
                lock(&self.failed).remove(&addr);
                continue;
            };
            tracing::warn!(%addr, %error, "cannot bind listener");
            match lock(&self.failed).entry(addr) {
                Entry::Occupied(mut f) => f.get_mut().error = error.to_string(),
                Entry::Vacant(v) => {
                    v.insert(Failed::new(error.to_string()));
                }
            }
            errors.push(ListenerError { addr, error });
        }
        lock(&self.draining).retain(|t| !t.is_finished());
        errors
    }

    /// Tries again every failed socket whose back-off has passed. True when the set of failures
    /// or one of their errors changed, so the status must be recomputed.
    pub async fn retry(&self, shared: &Arc<Shared>) -> bool {
        let _serial = self.sync.lock().await;
        let now = Instant::now();
        let due: Vec<SocketAddr> = lock(&self.failed)
            .iter()
            .filter(|(_, f)| f.next <= now)
            .map(|(a, _)| *a)
            .collect();
        let mut changed = false;
        for addr in due {
            if lock(&self.running).contains_key(&addr) {
                lock(&self.failed).remove(&addr);
                changed = true;
                continue;
            }
            match self.start(shared, addr) {
                Ok(()) => {
                    lock(&self.failed).remove(&addr);
                    changed = true;
                }
                Err(error) => {
                    let error = error.to_string();
                    if let Some(f) = lock(&self.failed).get_mut(&addr) {
                        changed |= f.error != error;
                        f.again(error);
                        tracing::debug!(%addr, error = %f.error, retry_in = ?f.wait, "still cannot bind listener");
                    }
                }
            }
        }
        changed
    }

    /// Binds `addr` and starts its accept loop.
    fn start(&self, shared: &Arc<Shared>, addr: SocketAddr) -> std::io::Result<()> {
        let listener = bind(addr)?;
        let (stop, stop_rx) = oneshot::channel();
        let task = tokio::spawn(accept_loop(listener, addr, shared.clone(), stop_rx));
        tracing::info!(%addr, "listening");
        lock(&self.running).insert(addr, Running { stop, task });
        Ok(())
    }

    /// Closes every socket, then waits for all drains (each bounded by the drain timeout).
    pub async fn shutdown(&self, drain_timeout: Duration) {
        let _serial = self.sync.lock().await;
        lock(&self.failed).clear();
        let all: Vec<Running> = std::mem::take(&mut *lock(&self.running))
            .into_values()
            .collect();
        self.stop_all(all).await;
        let tasks: Vec<JoinHandle<()>> = std::mem::take(&mut *lock(&self.draining));
        let wait = async {
            for t in tasks {
                let _ = t.await;
            }
        };
        // Each drain stops itself at the drain timeout; the margin only guards against a bug.
        if tokio::time::timeout(drain_timeout + Duration::from_secs(1), wait)
            .await
            .is_err()
        {
            tracing::warn!("listeners did not drain in time");
        }
    }

    /// Asks each loop to close its socket and waits until it has; their drains go on.
    async fn stop_all(&self, stopping: Vec<Running>) {
        for Running { stop, task } in stopping {
            let (ack, closed) = oneshot::channel();
            if stop.send(ack).is_ok() {
                // An error means the loop already ended, so its socket is closed too.
                let _ = closed.await;
            }
            lock(&self.draining).push(task);
        }
    }
}

/// Binds `addr` with SO_REUSEADDR (rebind at once after a restart) and, on Linux, SO_REUSEPORT:
/// a second process of the same user can bind the same port during a rollout and serve new
/// connections while this one drains. The kernel only lets processes of the same effective user
/// share the port, and a socket bound without SO_REUSEPORT still makes the bind fail.
fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    #[cfg(target_os = "linux")]
    socket.set_reuse_port(true)?;
    socket.set_tcp_nodelay(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG as i32)?;
    TcpListener::from_std(socket.into())
}

/// Accepts until asked to stop, serving each connection on its own task; a connection over the
/// listener's limit is closed at once. On stop: accepts what the kernel already queued, closes
/// the socket, acknowledges, and drains.
async fn accept_loop(
    listener: TcpListener,
    key: SocketAddr,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<oneshot::Sender<()>>,
) {
    let builder = builder(&shared.conn_defaults);
    let label = key.to_string();
    let open = OpenConns::new(
        shared
            .metrics
            .connections_open
            .with_label_values(&[label.as_str()]),
    );
    let refused = shared
        .metrics
        .connections_refused
        .with_label_values(&[label.as_str()]);
    let (drain, drain_rx) = watch::channel(false);
    let mut conns: JoinSet<()> = JoinSet::new();
    let spawn = |conns: &mut JoinSet<()>, stream, peer| {
        if open.count() >= shared.options.max_connections {
            refused.inc();
            drop(stream);
            return;
        }
        conns.spawn(handle(Accepted {
            stream,
            peer,
            listener: key,
            shared: shared.clone(),
            builder: builder.clone(),
            drain: drain_rx.clone(),
            open: open.add(),
        }));
    };
    // The drain window of the listener's ProxyConfig as last seen: when the listener leaves
    // the table its settings are gone with it.
    let drain_of = || {
        shared
            .table
            .load()
            .listener(&key)
            .and_then(|l| l.settings.as_ref().and_then(|s| s.drain))
    };
    let mut drain_timeout = drain_of().unwrap_or(shared.options.drain_timeout);
    let ack = loop {
        tokio::select! {
            ack = &mut stop => break ack.ok(),
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    drain_timeout = drain_of().unwrap_or(shared.options.drain_timeout);
                    spawn(&mut conns, stream, peer)
                }
                Err(error) => {
                    tracing::warn!(addr = %key, %error, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
        }
    };
    // Connections the kernel completed before the socket closes would be reset with it: serve
    // them (they are told to close after their request, as the drain has begun).
    drain.send_replace(true);
    while let Some(Ok((stream, peer))) = listener.accept().now_or_never() {
        spawn(&mut conns, stream, peer);
    }
    drop(listener);
    if let Some(ack) = ack {
        let _ = ack.send(());
    }
    let remaining = open.count();
    if remaining > 0 {
        tracing::info!(addr = %key, open = remaining, "draining connections");
    }
    let reap = async { while conns.join_next().await.is_some() {} };
    tokio::select! {
        _ = open.all_closed() => {}
        _ = reap => {}
        _ = tokio::time::sleep(drain_timeout) => {
            let cut = open.count();
            shared
                .metrics
                .connections_closed
                .with_label_values(&["drain_timeout"])
                .inc_by(cut as u64);
            tracing::warn!(addr = %key, cut, timeout = ?drain_timeout, "drain timeout: closing the connections still open");
        }
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}
