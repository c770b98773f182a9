//! The data plane: a listener manager that keeps one accept loop per table listener, and the HTTP
//! service that routes each request with the live table. Never imports kube.
//!
//! Modules: `listener` (bind, accept, drain), `conn` (one connection: handshake, idle, drain),
//! `detect` (HTTP/1 or HTTP/2 preface), `options` (timeouts and limits), `gate` (host, framing
//! and path checks before routing), `service` (per-request phases), `answers` (responses
//! without a backend), `forward` (the upstream exchange and its retries), `retry` (retry
//! budgets, kept bodies, backoff), `session` (session persistence tokens), `balance` (endpoint
//! choice, outlier detection, circuit breaking), `body` (request body idle timer, in-flight
//! tracking), `upstream` (pooled clients), `pool` and `h1` (pooled HTTP/1.1 connections and
//! their codec), `tls` (TLS termination, certificates by SNI),
//! `mirror` (request mirroring), `upgrade` (WebSocket tunnels), `headers` (hop-by-hop and
//! forwarded headers), `trusted` (the trusted proxies), `error` (the status mapping), `l4` (TLS
//! passthrough and terminate, TCP and UDP forwarding), `policy` (TrafficPolicy checks),
//! `settings` (per-connection settings from ProxyConfig), `access_log` (one line per request).
mod access_log;
mod body;
mod error;
mod handshake;
mod inbound;
mod l4;
mod options;
mod policy;
mod routing;
mod settings;
mod trusted;
mod upstream;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use bytes::Bytes;

use crate::metrics::Metrics;
use crate::table::RouteTable;

pub use access_log::{AccessSink, LogSpec};
pub use body::MinRate;
pub use error::{Fault, ProxyError, OVERLOADED};
pub use inbound::listener::{BIND_RETRY_FIRST, BIND_RETRY_MAX};
pub use l4::{parse_client_hello, Hello};
pub use options::ProxyOptions;
pub use policy::{validate_jwt, HashLimits};
pub use routing::headers::{set_forwarded, strip_hop_by_hop};
pub use trusted::{TrustedProxies, TrustedProxiesError};
pub use upstream::balance::{BreakerLimits, OutlierOptions, Overload};
pub use upstream::retry::{BudgetLimits, MAX_REPLAY_BODY};

/// Boxed error of a streamed body.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Body of every response the proxy sends: upstream bodies stream through, own answers are short.
pub type ProxyBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// A listener the proxy could not bind.
#[derive(Debug)]
pub struct ListenerError {
    pub addr: SocketAddr,
    pub error: std::io::Error,
}

impl std::fmt::Display for ListenerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot listen on {}: {}", self.addr, self.error)
    }
}

impl std::error::Error for ListenerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// What every connection task needs: the live table, metrics, options and the upstream pools.
pub(crate) struct Shared {
    table: Arc<ArcSwap<RouteTable>>,
    metrics: Arc<Metrics>,
    options: ProxyOptions,
    upstreams: upstream::client::Upstreams,
    /// Endpoint state (in-flight requests, health), shared across tables.
    backends: upstream::balance::Backends,
    tunnels: Arc<upstream::upgrade::Tunnels>,
    /// Rate-limit buckets and remembered credentials, shared across tables.
    policies: policy::PolicyState,
    /// Connection settings of listeners without a ProxyConfig.
    conn_defaults: Arc<settings::ConnSettings>,
}

/// The proxy: owns the bound sockets and the upstream connection pools.
pub struct Proxy {
    shared: Arc<Shared>,
    listeners: inbound::listener::Listeners,
    udp: l4::udp::UdpListeners,
}

impl Proxy {
    /// Creates a proxy that routes with whatever table `table` holds at each request.
    pub fn new(
        table: Arc<ArcSwap<RouteTable>>,
        metrics: Arc<Metrics>,
        options: ProxyOptions,
    ) -> Arc<Self> {
        let upstreams = upstream::client::Upstreams::new(&options);
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
        Arc::new(Self {
            shared: Arc::new(Shared {
                policies: policy::PolicyState::new(options.basic_auth, metrics.clone()),
                conn_defaults,
                table,
                metrics,
                options,
                upstreams,
                backends,
                tunnels: Arc::default(),
            }),
            listeners: inbound::listener::Listeners::default(),
            udp: l4::udp::UdpListeners::default(),
        })
    }

    /// Binds a socket for every listener of `table` not yet bound, and drains the sockets of
    /// listeners it no longer has. Returns the listeners that could not be bound; they are
    /// retried by [`Proxy::retry_failed_binds`] until they bind or leave the table.
    pub async fn sync_listeners(self: &Arc<Self>, table: &RouteTable) -> Vec<ListenerError> {
        let wanted: Vec<SocketAddr> = table.listeners.keys().copied().collect();
        let mut errors = self.listeners.sync(&self.shared, &wanted).await;
        let udp: Vec<SocketAddr> = table.udp.keys().copied().collect();
        errors.extend(self.udp.sync(&self.shared, &udp));
        errors
    }

    /// UDP sockets of the current table that are not bound, with their bind error (retried
    /// with every table and every [`Proxy::retry_failed_binds`]).
    pub fn udp_bind_failures(&self) -> BTreeMap<SocketAddr, String> {
        self.udp.failures()
    }

    /// UDP addresses currently receiving datagrams.
    pub fn bound_udp(&self) -> Vec<SocketAddr> {
        self.udp.bound()
    }

    /// Sockets of the current table that are not bound, with the last bind error of each: the
    /// data plane's side of the `Programmed` conditions.
    pub fn bind_failures(&self) -> BTreeMap<SocketAddr, String> {
        self.listeners.failures()
    }

    /// When [`Proxy::retry_failed_binds`] next has something to do (`None`: nothing failed).
    /// The wait after a failure starts at [`BIND_RETRY_FIRST`] and doubles up to
    /// [`BIND_RETRY_MAX`].
    pub fn next_bind_retry(&self) -> Option<Instant> {
        let udp = (!self.udp.failures().is_empty()).then(|| Instant::now() + BIND_RETRY_FIRST);
        match (self.listeners.next_retry(), udp) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Retries the failed sockets that are due. True when the failures changed (a socket bound,
    /// or its error is a different one), so the status must be recomputed.
    pub async fn retry_failed_binds(self: &Arc<Self>) -> bool {
        let tcp = self.listeners.retry(&self.shared).await;
        self.udp.retry(&self.shared) || tcp
    }

    /// Addresses currently accepting connections.
    pub fn bound(&self) -> Vec<SocketAddr> {
        self.listeners.bound()
    }

    /// Stops accepting everywhere and waits up to the drain timeout for in-flight requests and
    /// upgraded (WebSocket) connections; upgraded connections still open then are closed.
    pub async fn shutdown(&self) {
        let started = std::time::Instant::now();
        let window = self.shared.options.drain_timeout;
        self.udp.shutdown();
        self.listeners.shutdown(window).await;
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
