//! Listener manager: one accept loop per bound socket. Binding is synchronous with the table
//! sync; removing a listener closes its socket at once and drains its open connections in the
//! background (graceful shutdown, bounded by the drain timeout, then the rest are cut). Each
//! accepted connection looks at the live table: on an HTTPS socket it completes a TLS handshake
//! first, so a socket follows its listener's protocol without rebinding. A socket that cannot be
//! bound is remembered with its error and retried with a doubling back-off until it binds or
//! leaves the table; the failures are what the status reports as not programmed.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hyper::rt::{Read, Write};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use super::service::Handler;
use super::tls::{acceptor, TlsInfo};
use super::{ListenerError, Shared};

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

/// Binds `addr` with SO_REUSEADDR so a restarted process can rebind at once.
fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_nodelay(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// The connection builder: HTTP/1.1 and h2c prior knowledge on one port, with a header read
/// timeout against slow clients.
fn builder(shared: &Shared) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(shared.options.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    builder
}

/// Serves one connection (plain or TLS) until it closes or the drain cuts it.
async fn serve<I>(
    builder: &auto::Builder<TokioExecutor>,
    watcher: hyper_util::server::graceful::Watcher,
    io: I,
    handler: Handler,
) where
    I: Read + Write + Unpin + Send + 'static,
{
    let peer = handler.peer;
    let service = service_fn(move |req| {
        let handler = handler.clone();
        async move { Ok::<_, Infallible>(handler.handle(req).await) }
    });
    let conn = builder
        .serve_connection_with_upgrades(io, service)
        .into_owned();
    if let Err(error) = watcher.watch(conn).await {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

/// Accepts until asked to stop, serving each connection on its own task; then closes the socket,
/// acknowledges, and drains.
async fn accept_loop(
    listener: TcpListener,
    key: SocketAddr,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<oneshot::Sender<()>>,
) {
    let builder = builder(&shared);
    let tls = match acceptor(shared.table.clone(), key) {
        Ok(a) => Some(a),
        Err(error) => {
            tracing::error!(addr = %key, %error, "cannot configure TLS; HTTPS connections will be closed");
            None
        }
    };
    let graceful = GracefulShutdown::new();
    let mut conns: JoinSet<()> = JoinSet::new();
    let ack = loop {
        tokio::select! {
            ack = &mut stop => break ack.ok(),
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let shared = shared.clone();
                    let tls = tls.clone();
                    let builder = builder.clone();
                    let watcher = graceful.watcher();
                    let first_byte = shared.options.header_read_timeout;
                    conns.spawn(async move {
                        // The protocol sniff waits for bytes with no timer of its own: a client
                        // that connects and stays silent is closed after the header timeout.
                        let mut probe = [0u8; 1];
                        if !matches!(
                            tokio::time::timeout(first_byte, stream.peek(&mut probe)).await,
                            Ok(Ok(1..))
                        ) {
                            return;
                        }
                        let is_tls = shared
                            .table
                            .load()
                            .listener(&key)
                            .is_some_and(|l| l.tls.is_some());
                        let mut handler = Handler { shared, listener: key, peer, tls: None };
                        if !is_tls {
                            serve(&builder, watcher, TokioIo::new(stream), handler).await;
                            return;
                        }
                        let Some(tls) = tls else { return };
                        let stream = match tokio::time::timeout(first_byte, tls.accept(stream)).await {
                            Ok(Ok(s)) => s,
                            Ok(Err(error)) => {
                                tracing::debug!(%peer, %error, "TLS handshake failed");
                                return;
                            }
                            Err(_) => return,
                        };
                        let sni = stream.get_ref().1.server_name().map(str::to_ascii_lowercase);
                        handler.tls = Some(TlsInfo { sni });
                        serve(&builder, watcher, TokioIo::new(stream), handler).await;
                    });
                }
                Err(error) => {
                    tracing::warn!(addr = %key, %error, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
        }
    };
    drop(listener);
    if let Some(ack) = ack {
        let _ = ack.send(());
    }
    let open = conns.len();
    if open > 0 {
        tracing::info!(addr = %key, open, "draining connections");
    }
    let drain = shared.options.drain_timeout;
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(addr = %key, remaining = conns.len(), "drain timeout, closing connections");
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}
