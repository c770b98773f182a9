//! The webhook's accept loop and each connection's life: at most `max_connections` open (one
//! more is closed at accept), the TLS handshake and protocol detection within
//! `handshake_timeout` of the accept, and no more than `idle_timeout` without a request in
//! progress; a connection past either timer is shut down (HTTP/2: GOAWAY) and dropped soon
//! after. Shutdown stops accepting and drains.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::RootCertStore;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::handler::{handle, Shared};
use super::{server_config, WebhookCerts, WebhookError, WebhookLimits};
use crate::metrics::Metrics;

/// Time open connections get to finish after shutdown is asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Concurrent HTTP/2 streams per connection.
const MAX_STREAMS: u32 = 8;
/// Time a connection told to shut down (by a timer) gets before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// [`serve_with`] with the default limits and metrics of its own.
pub async fn serve(
    listener: TcpListener,
    certs: Arc<WebhookCerts>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WebhookError> {
    serve_with(
        listener,
        certs,
        WebhookLimits::default(),
        None,
        Metrics::new(),
        shutdown,
    )
    .await
}

/// Serves the webhook on `listener` within `limits` until `shutdown` resolves; then stops
/// accepting and gives open connections `DRAIN_TIMEOUT` to finish. With `client_ca`, a
/// client must present a certificate chaining to it (the API server's webhook client
/// certificate). Connections and requests a limit stops are counted in
/// `edgeplane_webhook_limited_total`. Fails only when TLS cannot be set up.
pub async fn serve_with(
    listener: TcpListener,
    certs: Arc<WebhookCerts>,
    limits: WebhookLimits,
    client_ca: Option<Arc<RootCertStore>>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WebhookError> {
    let acceptor = TlsAcceptor::from(server_config(certs, client_ca)?);
    let shared = Arc::new(Shared::new(limits, metrics));
    let max_connections = limits.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max_connections));
    let (stop, stopping) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "webhook accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    shared.limited("connections");
                    tracing::debug!(%peer, "webhook connection limit reached: closed");
                    drop(stream);
                    continue;
                };
                let conn = Connection {
                    acceptor: acceptor.clone(),
                    shared: shared.clone(),
                    stopping: stopping.clone(),
                    _slot: slot,
                };
                tokio::spawn(conn.run(stream, peer));
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    let drained = slots.acquire_many(max_connections as u32);
    if tokio::time::timeout(DRAIN_TIMEOUT, drained).await.is_err() {
        tracing::warn!("webhook connections still open after the drain time");
    }
    Ok(())
}

/// One accepted connection; its slot is given back when it ends.
struct Connection {
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
    stopping: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
}

/// Requests in progress on a connection, and a wake-up when that changes.
#[derive(Default)]
struct Activity {
    in_flight: AtomicUsize,
    changed: Notify,
}

/// Marks a request in progress until dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(a: &Arc<Activity>) -> Self {
        a.in_flight.fetch_add(1, Ordering::SeqCst);
        a.changed.notify_one();
        Self(a.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_one();
    }
}

impl Connection {
    async fn run(mut self, stream: TcpStream, peer: std::net::SocketAddr) {
        let limits = self.shared.limits;
        let mut deadline = Instant::now() + limits.handshake_timeout;
        let tls = match tokio::time::timeout_at(deadline, self.acceptor.accept(stream)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "webhook handshake failed");
                return;
            }
            Err(_) => {
                self.shared.limited("handshake_timeout");
                tracing::debug!(%peer, "webhook handshake timed out");
                return;
            }
        };
        let activity = Arc::new(Activity::default());
        let (shared, a) = (self.shared.clone(), activity.clone());
        let service = service_fn(move |req| {
            let (shared, guard) = (shared.clone(), InFlight::start(&a));
            async move {
                let resp = handle(req, &shared).await;
                drop(guard);
                Ok::<_, std::convert::Infallible>(resp)
            }
        });
        let mut builder = auto::Builder::new(TokioExecutor::new());
        // The API server sends one review at a time per stream; a few streams per connection
        // keep what one HTTP/2 client can have buffered small.
        builder
            .http2()
            .max_concurrent_streams(MAX_STREAMS)
            .timer(TokioTimer::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            // Hyper starts this timer whenever it waits for a head, keep-alive included: a
            // backstop behind the deadlines below, which are the ones that fire.
            .header_read_timeout(limits.handshake_timeout.max(limits.idle_timeout) + CLOSE_GRACE);
        let conn = builder.serve_connection(TokioIo::new(tls), service);
        tokio::pin!(conn);
        // Until the first request: the handshake deadline; then the idle deadline.
        let mut reason = "handshake_timeout";
        let ended = loop {
            let idle = activity.in_flight.load(Ordering::SeqCst) == 0;
            tokio::select! {
                r = conn.as_mut() => break Some(r),
                _ = self.stopping.changed() => break None,
                () = activity.changed.notified() => {
                    if activity.in_flight.load(Ordering::SeqCst) == 0 {
                        reason = "idle_timeout";
                        deadline = Instant::now() + limits.idle_timeout;
                    }
                }
                () = tokio::time::sleep_until(deadline), if idle => {
                    self.shared.limited(reason);
                    tracing::debug!(%peer, reason, "webhook connection closed");
                    break None;
                }
            }
        };
        if let Some(r) = ended {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "webhook connection ended");
            }
            return;
        }
        conn.as_mut().graceful_shutdown();
        let _ = tokio::time::timeout(CLOSE_GRACE, conn).await;
    }
}
