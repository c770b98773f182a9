//! The data plane: a listener manager that keeps one accept loop per table listener, and the HTTP
//! service that routes each request with the live table. Never imports kube.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::metrics::Metrics;
use crate::table::RouteTable;

/// Timeouts and limits of the data plane.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// Time a client has to send a complete request head (slowloris guard).
    pub header_read_timeout: Duration,
    /// Time in-flight requests get to finish at shutdown or when their listener is removed.
    pub drain_timeout: Duration,
    /// Time to establish an upstream TCP connection before answering 502.
    pub connect_timeout: Duration,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// A listener the proxy could not bind.
#[derive(Debug)]
pub struct ListenerError {
    pub addr: SocketAddr,
    pub error: std::io::Error,
}

/// The proxy: owns the bound sockets and the upstream connection pools.
pub struct Proxy {
    _private: (),
}

impl Proxy {
    /// Creates a proxy that routes with whatever table `table` holds at each request.
    pub fn new(
        table: Arc<ArcSwap<RouteTable>>,
        metrics: Arc<Metrics>,
        options: ProxyOptions,
    ) -> Arc<Self> {
        let _ = (table, metrics, options);
        todo!("proxy")
    }

    /// Binds a socket for every listener of `table` not yet bound, and drains the sockets of
    /// listeners it no longer has. Returns the listeners that could not be bound.
    pub async fn sync_listeners(self: &Arc<Self>, table: &RouteTable) -> Vec<ListenerError> {
        let _ = table;
        todo!("proxy")
    }

    /// Addresses currently accepting connections.
    pub fn bound(&self) -> Vec<SocketAddr> {
        todo!("proxy")
    }

    /// Stops accepting everywhere and waits up to the drain timeout for in-flight requests.
    pub async fn shutdown(&self) {
        todo!("proxy")
    }
}
