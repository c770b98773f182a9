//! The data plane: a listener manager that keeps one socket per table listener, and the HTTP
//! service that routes each request with the live table. Never imports kube.
//!
//! Folders by phase, each importing only the ones below it: `inbound` (TCP accept loops, one
//! connection) -> `l4` (TLS passthrough and terminate, TCP and UDP forwarding) and `routing`
//! (one HTTP request through its phases) -> `shared` (what every connection task holds) ->
//! `policy` (TrafficPolicy checks) and `upstream` (the exchange, retries, balancing, pools,
//! mirrors, tunnels) -> `handshake` (TLS termination, protocol detection), `sockets` (the
//! listener manager of TCP and UDP sockets) and the shared bits at the bottom: `error`
//! (failures and the one status mapping; `decision`, the word the access log gives each), `body` (body types, the request body's timers),
//! `options` and `settings` (command line and per-listener settings), `trusted` (the trusted
//! proxies), `access_log` (one line per request), `workers` (one runtime per core and what each
//! worker owns).
/// `AsyncWrite` for a wrapper that only watches or replays what is read (`handshake::detect`'s
/// `Prefixed`, `l4::idle`'s `Activity`): every write call goes to its `inner` stream unchanged.
macro_rules! write_through {
    ($param:ident, $ty:ty) => {
        impl<$param: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for $ty {
            fn poll_write(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
            }

            fn poll_flush(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.inner).poll_flush(cx)
            }

            fn poll_shutdown(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
            }

            fn poll_write_vectored(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.inner.is_write_vectored()
            }
        }
    };
}

mod access_log;
mod body;
mod decision;
mod error;
mod h1wire;
mod handshake;
mod inbound;
mod l4;
mod options;
mod policy;
mod request_id;
mod routing;
mod settings;
mod shared;
mod sockets;
mod tap;
mod text;
mod trace;
mod trusted;
mod upgraded;
mod upstream;
mod wake_horizon;
mod workers;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;

use crate::metrics::Metrics;
use crate::table::RouteTable;
use shared::Shared;
use sockets::{Bind, Running, SocketKey, Sockets, Transport};

pub use access_log::{AccessSink, LogSpec, DEFAULT_QUEUE as DEFAULT_ACCESS_LOG_QUEUE};
pub use body::{BoxError, MinRate, ProxyBody};
pub use error::{Fault, ListenerError, Overload, ProxyError, OVERLOADED};
pub use inbound::h1::decode::read_request;
pub use l4::{parse_client_hello, Hello};
pub use options::ProxyOptions;
pub use policy::{validate_jwt, HashLimits};
pub use routing::headers::{set_forwarded, strip_hop_by_hop};
pub use sockets::{BIND_RETRY_FIRST, BIND_RETRY_MAX};
pub use tap::{Subscription, Tap, TapBackend, TapFilter, TapRecord};
pub use trace::{TraceExport, TraceExportError};
pub use trusted::{TrustedProxies, TrustedProxiesError};
pub use upstream::balance::{BreakerLimits, OutlierOptions};
pub use upstream::retry::{BudgetLimits, MAX_REPLAY_BODY};
pub use upstream::trail::Attempt as TapAttempt;
pub use workers::count_from_env as workers_from_env;

/// The proxy: owns the bound sockets and the upstream connection pools.
pub struct Proxy {
    shared: Arc<Shared>,
    sockets: Sockets<Binder>,
}

/// Binds the table's sockets: TCP ones get a socket and an accept loop per worker (`inbound`),
/// UDP ones a receive loop (`l4::udp`) on the first worker: a UDP session is the state of one
/// loop, and a second socket could receive a client's next datagram elsewhere.
struct Binder {
    shared: Arc<Shared>,
    workers: workers::Workers,
}

impl Bind for Binder {
    fn start(&self, key: SocketKey) -> std::io::Result<Running> {
        match key.transport {
            Transport::Tcp => inbound::listener::start(&self.shared, &self.workers, key.addr),
            Transport::Udp => {
                let _runtime = self.workers.handle(0).map(tokio::runtime::Handle::enter);
                l4::udp::start(&self.shared, key.addr)
            }
        }
    }
}

impl Proxy {
    /// Creates a proxy that routes with whatever table `table` holds at each request.
    pub fn new(
        table: Arc<ArcSwap<RouteTable>>,
        metrics: Arc<Metrics>,
        options: ProxyOptions,
    ) -> Arc<Self> {
        let workers = workers::Workers::start(options.workers);
        let upstreams = upstream::client::Upstreams::new(upstream::client::PoolLimits {
            workers: workers.len(),
            connect_timeout: options.connect_timeout,
            idle_timeout: options.upstream_idle_timeout,
            max_idle_per_endpoint: options.upstream_max_idle_per_endpoint,
        });
        let backends = upstream::balance::Backends::new(
            options.outlier.clone(),
            options.breaker.clone(),
            metrics.clone(),
            upstreams.endpoints(),
        )
        .with_retry_budget(options.retry_budget);
        let conn_defaults = Arc::new(settings::ConnSettings::from_options(
            &options,
            options.access_log.clone(),
        ));
        let otlp_lines = options.trace_export.as_ref().and_then(|export| {
            access_log::OtlpLines::start(&export.endpoint, metrics.access_log_dropped.clone())
                .inspect_err(|error| tracing::error!(%error, "access log records are not exported"))
                .ok()
        });
        let access = access_log::AccessLogger::start(
            options.access_sink.clone(),
            options.access_log_queue,
            metrics.access_log_dropped.clone(),
            otlp_lines,
        );
        let spans = options.trace_export.as_ref().and_then(|export| {
            trace::SpanSink::start(export, metrics.spans_dropped.clone())
                .inspect_err(|error| tracing::error!(%error, "spans are not exported"))
                .ok()
        });
        let shared = Arc::new(Shared {
            tap: Arc::default(),
            access,
            spans,
            policies: policy::PolicyState::new(options.basic_auth, metrics.clone()),
            conn_defaults,
            table,
            metrics,
            options,
            upstreams,
            backends,
            tunnels: Arc::default(),
        });
        for index in 0..workers.len() {
            let runtime = workers.handle(index).cloned();
            wake_horizon::start(runtime, Arc::downgrade(&shared));
        }
        Arc::new(Self {
            sockets: Sockets::new(Binder {
                shared: shared.clone(),
                workers,
            }),
            shared,
        })
    }

    /// Binds a socket for every listener of `table` not yet bound, and drains the sockets of
    /// listeners it no longer has. Returns the listeners that could not be bound; they are
    /// retried by [`Proxy::retry_failed_binds`] until they bind or leave the table.
    pub async fn sync_listeners(self: &Arc<Self>, table: &RouteTable) -> Vec<ListenerError> {
        let tcp = table.listeners.keys().map(|&addr| SocketKey {
            addr,
            transport: Transport::Tcp,
        });
        let udp = table.udp.keys().map(|&addr| SocketKey {
            addr,
            transport: Transport::Udp,
        });
        let wanted: Vec<SocketKey> = tcp.chain(udp).collect();
        self.sockets.sync(&wanted).await
    }

    /// The request tracer's tap: subscriptions to the next requests matching a filter.
    pub fn tap(&self) -> Arc<Tap> {
        self.shared.tap.clone()
    }

    /// Makes a file access log reopen its path before its next line: the answer to SIGHUP
    /// after a log rotator moved the file.
    pub fn reopen_access_log(&self) {
        self.shared.access.reopen();
    }

    /// UDP sockets of the current table that are not bound, with the last bind error of each.
    pub fn udp_bind_failures(&self) -> BTreeMap<SocketAddr, String> {
        self.sockets.failures(Transport::Udp)
    }

    /// UDP addresses currently receiving datagrams.
    pub fn bound_udp(&self) -> Vec<SocketAddr> {
        self.sockets.bound(Transport::Udp)
    }

    /// TCP sockets of the current table that are not bound, with the last bind error of each:
    /// the data plane's side of the `Programmed` conditions.
    pub fn bind_failures(&self) -> BTreeMap<SocketAddr, String> {
        self.sockets.failures(Transport::Tcp)
    }

    /// When [`Proxy::retry_failed_binds`] next has something to do (`None`: nothing failed).
    /// The wait after a failure starts at [`BIND_RETRY_FIRST`] and doubles up to
    /// [`BIND_RETRY_MAX`].
    pub fn next_bind_retry(&self) -> Option<Instant> {
        self.sockets.next_retry()
    }

    /// Retries the failed sockets that are due. True when the failures changed (a socket bound,
    /// or its error is a different one), so the status must be recomputed.
    pub async fn retry_failed_binds(self: &Arc<Self>) -> bool {
        self.sockets.retry().await
    }

    /// Endpoints outlier detection ejected from balancing at this moment, sorted (what the
    /// dashboard and `edgeplane routes` mark as ejected).
    pub fn ejected_endpoints(&self) -> Vec<SocketAddr> {
        self.shared.backends.ejected()
    }

    /// TCP addresses currently accepting connections.
    pub fn bound(&self) -> Vec<SocketAddr> {
        self.sockets.bound(Transport::Tcp)
    }

    /// Stops accepting everywhere and waits up to the drain timeout for in-flight requests and
    /// upgraded (WebSocket) connections; upgraded connections still open then are closed.
    pub async fn shutdown(&self) {
        let started = std::time::Instant::now();
        let window = self.shared.options.drain_timeout;
        self.sockets.shutdown(window).await;
        let left = window.saturating_sub(started.elapsed());
        let cut = self.shared.tunnels.drain(left).await;
        self.shared
            .metrics
            .connections_closed
            .with_label_values(&["drain_timeout"])
            .inc_by(cut as u64);
    }

    /// Upgraded (WebSocket) connections currently open.
    pub fn open_tunnels(&self) -> usize {
        self.shared.tunnels.open()
    }
}
