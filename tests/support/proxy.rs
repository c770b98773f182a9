//! A running proxy for tests: the live table in an `ArcSwap`, metrics, and helpers to swap the
//! table and wait until a listener accepts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use edgeplane::metrics::Metrics;
use edgeplane::proxy::{Proxy, ProxyOptions};
use edgeplane::table::RouteTable;

/// The proxy under test and the table handle it reads.
pub struct Running {
    pub proxy: Arc<Proxy>,
    pub table: Arc<ArcSwap<RouteTable>>,
    pub metrics: Arc<Metrics>,
}

/// Options with short timeouts so failing tests end quickly.
pub fn test_options() -> ProxyOptions {
    ProxyOptions {
        header_read_timeout: Duration::from_secs(5),
        drain_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        ..ProxyOptions::default()
    }
}

/// Starts a proxy on `table` with [`test_options`] and binds its listeners; panics if one
/// cannot be bound.
pub async fn start(table: RouteTable) -> Running {
    start_with(table, test_options()).await
}

/// Starts a proxy on `table` with `options` and binds its listeners.
pub async fn start_with(table: RouteTable, options: ProxyOptions) -> Running {
    let metrics = Metrics::new();
    // Label handles resolved as the reconciler's publication does.
    metrics.attach(&table);
    let table = Arc::new(ArcSwap::from_pointee(table));
    let proxy = Proxy::new(table.clone(), metrics.clone(), options);
    let errors = proxy.sync_listeners(&table.load()).await;
    assert!(errors.is_empty(), "listeners failed to bind: {errors:?}");
    Running {
        proxy,
        table,
        metrics,
    }
}

impl Running {
    /// Publishes `table` and reconciles the listeners, as the reconcile loop does.
    pub async fn publish(&self, table: RouteTable) {
        self.metrics.attach(&table);
        let table = Arc::new(table);
        self.table.store(table.clone());
        let errors = self.proxy.sync_listeners(&table).await;
        assert!(errors.is_empty(), "listeners failed to bind: {errors:?}");
    }
}

/// True when a TCP connection to `addr` is accepted within a second.
pub async fn accepts(addr: SocketAddr) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr)).await,
        Ok(Ok(_))
    )
}

/// The sum of the series of `family` in a metrics text whose labels include every one of
/// `labels` (`name="value"` pairs as exposed).
pub fn metric_sum(text: &str, family: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
