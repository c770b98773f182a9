//! One listener manager for every socket of the table, keyed by address and transport. Binding
//! is synchronous with the table sync; removing a socket closes it at once (its serving task
//! acknowledges once the socket is closed, then drains in the background, bounded by its own
//! drain timeout). A socket that cannot be bound is remembered with its error and retried with
//! a doubling back-off until it binds or leaves the table; the failures are what the status
//! reports as not programmed.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::proxy::error::ListenerError;

/// Wait before the first retry of a socket that could not be bound; it doubles with every
/// failed retry up to [`BIND_RETRY_MAX`].
pub const BIND_RETRY_FIRST: Duration = Duration::from_secs(1);
/// Longest wait between two retries of a socket that could not be bound.
pub const BIND_RETRY_MAX: Duration = Duration::from_secs(30);

/// The transport a socket serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Transport {
    /// Streams: HTTP, HTTPS, TLS and TCP routes.
    Tcp,
    /// Datagrams: UDP routes.
    Udp,
}

impl Transport {
    /// The name in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tcp => "TCP",
            Self::Udp => "UDP",
        }
    }
}

/// A socket of the table: the same address may carry a TCP and a UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SocketKey {
    pub addr: SocketAddr,
    pub transport: Transport,
}

/// How a transport binds one socket and starts serving it.
pub trait Bind: Send + Sync {
    /// Binds `key` and starts the task that serves it.
    fn start(&self, key: SocketKey) -> std::io::Result<Running>;
}

/// A socket being served. Sending on `stop` asks its task to close the socket; the task answers
/// on the enclosed sender once the socket is closed, then drains (or ends).
pub struct Running {
    pub stop: oneshot::Sender<oneshot::Sender<()>>,
    pub task: JoinHandle<()>,
}

impl Running {
    /// One socket served as several (one per data-plane worker): asked to stop, it asks every
    /// part, acknowledges once all of them closed their socket, and ends when all have drained.
    /// A single part is returned as it is.
    pub fn all(mut parts: Vec<Running>) -> Running {
        if parts.len() == 1 {
            if let Some(one) = parts.pop() {
                return one;
            }
        }
        let (stop, stopped) = oneshot::channel::<oneshot::Sender<()>>();
        let task = tokio::spawn(async move {
            // A dropped sender stops the parts too, without an acknowledgement.
            let ack = stopped.await.ok();
            let mut closed = Vec::with_capacity(parts.len());
            let mut tasks = Vec::with_capacity(parts.len());
            for Running { stop, task } in parts {
                let (part_ack, part_closed) = oneshot::channel();
                if stop.send(part_ack).is_ok() {
                    closed.push(part_closed);
                }
                tasks.push(task);
            }
            for part in closed {
                // An error means the part already ended, so its socket is closed too.
                let _ = part.await;
            }
            if let Some(ack) = ack {
                let _ = ack.send(());
            }
            for task in tasks {
                let _ = task.await;
            }
        });
        Running { stop, task }
    }
}

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

/// The bound sockets by key, the wanted ones that could not be bound, and the tasks still
/// draining removed ones.
pub struct Sockets<B> {
    bind: B,
    running: Mutex<BTreeMap<SocketKey, Running>>,
    failed: Mutex<BTreeMap<SocketKey, Failed>>,
    draining: Mutex<Vec<JoinHandle<()>>>,
    /// Serializes `sync`, `retry` and `shutdown` so two reconciles never race on one socket.
    serial: tokio::sync::Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<B: Bind> Sockets<B> {
    pub fn new(bind: B) -> Self {
        Self {
            bind,
            running: Mutex::default(),
            failed: Mutex::default(),
            draining: Mutex::default(),
            serial: tokio::sync::Mutex::new(()),
        }
    }

    /// Addresses of `transport` currently served.
    pub fn bound(&self, transport: Transport) -> Vec<SocketAddr> {
        lock(&self.running)
            .keys()
            .filter(|k| k.transport == transport)
            .map(|k| k.addr)
            .collect()
    }

    /// Wanted sockets of `transport` that are not bound, with the last bind error of each.
    pub fn failures(&self, transport: Transport) -> BTreeMap<SocketAddr, String> {
        lock(&self.failed)
            .iter()
            .filter(|(k, _)| k.transport == transport)
            .map(|(k, f)| (k.addr, f.error.clone()))
            .collect()
    }

    /// When the next failed socket is due for a retry, if any failed.
    pub fn next_retry(&self) -> Option<Instant> {
        lock(&self.failed).values().map(|f| f.next).min()
    }

    /// Makes the set of served sockets equal to `wanted`: stops removed ones first (so an
    /// address can be rebound), then binds new ones. Sockets that failed before are tried again
    /// at once (a new table is a new chance) without resetting their back-off.
    pub async fn sync(&self, wanted: &[SocketKey]) -> Vec<ListenerError> {
        let _serial = self.serial.lock().await;
        let removed: Vec<Running> = {
            let mut running = lock(&self.running);
            let gone: Vec<SocketKey> = running
                .keys()
                .filter(|k| !wanted.contains(k))
                .copied()
                .collect();
            gone.iter().filter_map(|k| running.remove(k)).collect()
        };
        lock(&self.failed).retain(|k, _| wanted.contains(k));
        self.stop_all(removed).await;
        let mut errors = Vec::new();
        for &key in wanted {
            if lock(&self.running).contains_key(&key) {
                continue;
            }
            let Err(error) = self.start(key) else {
                lock(&self.failed).remove(&key);
                continue;
            };
            tracing::warn!(addr = %key.addr, transport = key.transport.as_str(), %error, "cannot bind listener");
            match lock(&self.failed).entry(key) {
                Entry::Occupied(mut f) => f.get_mut().error = error.to_string(),
                Entry::Vacant(v) => {
                    v.insert(Failed::new(error.to_string()));
                }
            }
            errors.push(ListenerError {
                addr: key.addr,
                error,
            });
        }
        lock(&self.draining).retain(|t| !t.is_finished());
        errors
    }

    /// Tries again every failed socket whose back-off has passed. True when the set of failures
    /// or one of their errors changed, so the status must be recomputed.
    pub async fn retry(&self) -> bool {
        let _serial = self.serial.lock().await;
        let now = Instant::now();
        let due: Vec<SocketKey> = lock(&self.failed)
            .iter()
            .filter(|(_, f)| f.next <= now)
            .map(|(k, _)| *k)
            .collect();
        let mut changed = false;
        for key in due {
            if lock(&self.running).contains_key(&key) {
                lock(&self.failed).remove(&key);
                changed = true;
                continue;
            }
            match self.start(key) {
                Ok(()) => {
                    lock(&self.failed).remove(&key);
                    changed = true;
                }
                Err(error) => {
                    let error = error.to_string();
                    if let Some(f) = lock(&self.failed).get_mut(&key) {
                        changed |= f.error != error;
                        f.again(error);
                        tracing::debug!(addr = %key.addr, transport = key.transport.as_str(), error = %f.error, retry_in = ?f.wait, "still cannot bind listener");
                    }
                }
            }
        }
        changed
    }

    /// Binds `key` and starts serving it.
    fn start(&self, key: SocketKey) -> std::io::Result<()> {
        let running = self.bind.start(key)?;
        tracing::info!(addr = %key.addr, transport = key.transport.as_str(), "listening");
        lock(&self.running).insert(key, running);
        Ok(())
    }

    /// Closes every socket, then waits for all drains (each bounded by its drain timeout;
    /// `drain_timeout` plus a margin bounds the wait for them all).
    pub async fn shutdown(&self, drain_timeout: Duration) {
        let _serial = self.serial.lock().await;
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

    /// Asks each task to close its socket and waits until it has; their drains go on.
    async fn stop_all(&self, stopping: Vec<Running>) {
        for Running { stop, task } in stopping {
            let (ack, closed) = oneshot::channel();
            if stop.send(ack).is_ok() {
                // An error means the task already ended, so its socket is closed too.
                let _ = closed.await;
            }
            lock(&self.draining).push(task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Binds real loopback sockets of either transport; serves nothing but the stop.
    struct Loopback {
        refuse: Arc<AtomicBool>,
    }

    impl Bind for Loopback {
        fn start(&self, key: SocketKey) -> std::io::Result<Running> {
            if self.refuse.load(Ordering::Relaxed) {
                return Err(std::io::Error::other("refused"));
            }
            let (stop, stop_rx) = oneshot::channel::<oneshot::Sender<()>>();
            let task = match key.transport {
                Transport::Tcp => {
                    let socket = std::net::TcpListener::bind(key.addr)?;
                    tokio::spawn(async move {
                        if let Ok(ack) = stop_rx.await {
                            drop(socket);
                            let _ = ack.send(());
                        }
                    })
                }
                Transport::Udp => {
                    let socket = std::net::UdpSocket::bind(key.addr)?;
                    tokio::spawn(async move {
                        if let Ok(ack) = stop_rx.await {
                            drop(socket);
                            let _ = ack.send(());
                        }
                    })
                }
            };
            Ok(Running { stop, task })
        }
    }

    #[tokio::test]
    async fn a_socket_served_by_several_parts_is_closed_when_all_are_and_ends_with_the_last() {
        // Each part closes its "socket" when asked, then drains until its `release` fires.
        let mut parts = Vec::new();
        let mut releases = Vec::new();
        let closed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for _ in 0..2 {
            let (stop, stop_rx) = oneshot::channel::<oneshot::Sender<()>>();
            let (release, released) = oneshot::channel::<()>();
            let closed = closed.clone();
            let task = tokio::spawn(async move {
                if let Ok(ack) = stop_rx.await {
                    closed.fetch_add(1, Ordering::AcqRel);
                    let _ = ack.send(());
                }
                let _ = released.await;
            });
            parts.push(Running { stop, task });
            releases.push(release);
        }
        let Running { stop, task } = Running::all(parts);
        let (ack, acked) = oneshot::channel();
        assert!(stop.send(ack).is_ok());
        acked.await.expect("acknowledged");
        assert_eq!(closed.load(Ordering::Acquire), 2, "every part closed first");
        let mut releases = releases.into_iter();
        if let Some(first) = releases.next() {
            let _ = first.send(());
        }
        tokio::task::yield_now().await;
        assert!(!task.is_finished(), "one part still drains");
        for release in releases {
            let _ = release.send(());
        }
        task.await.expect("ends once every part has drained");
    }

    fn free_port() -> SocketAddr {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("address")
    }

    #[tokio::test]
    async fn tcp_and_udp_on_one_address_are_two_sockets_kept_in_step_with_the_table() {
        let refuse = Arc::new(AtomicBool::new(false));
        let sockets = Sockets::new(Loopback {
            refuse: refuse.clone(),
        });
        let addr = free_port();
        let tcp = SocketKey {
            addr,
            transport: Transport::Tcp,
        };
        let udp = SocketKey {
            addr,
            transport: Transport::Udp,
        };
        assert!(sockets.sync(&[tcp, udp]).await.is_empty());
        assert_eq!(sockets.bound(Transport::Tcp), vec![addr]);
        assert_eq!(sockets.bound(Transport::Udp), vec![addr]);
        // The UDP socket leaves the table: it is closed (its port is free again), TCP stays.
        assert!(sockets.sync(&[tcp]).await.is_empty());
        assert!(sockets.bound(Transport::Udp).is_empty());
        assert_eq!(sockets.bound(Transport::Tcp), vec![addr]);
        std::net::UdpSocket::bind(addr).expect("the UDP port was released");
        // A socket that cannot be bound is reported, retried, and cleared once it binds.
        refuse.store(true, Ordering::Relaxed);
        let errors = sockets.sync(&[tcp, udp]).await;
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].addr, addr);
        assert_eq!(
            sockets
                .failures(Transport::Udp)
                .get(&addr)
                .map(String::as_str),
            Some("refused")
        );
        assert!(sockets.failures(Transport::Tcp).is_empty());
        assert!(sockets.next_retry().is_some());
        assert!(!sockets.retry().await, "not due yet");
        refuse.store(false, Ordering::Relaxed);
        assert!(
            sockets.sync(&[tcp, udp]).await.is_empty(),
            "a new table retries at once"
        );
        assert!(sockets.failures(Transport::Udp).is_empty());
        assert_eq!(sockets.next_retry(), None);
        sockets.shutdown(Duration::from_secs(1)).await;
        assert!(sockets.bound(Transport::Tcp).is_empty());
        std::net::TcpListener::bind(addr).expect("the TCP port was released");
    }
}
