//! The state every connection task shares: the live table, the metrics, the options, and what
//! outlives tables (upstream pools, endpoint state, tunnels, policy state). Sits above the
//! phases it hands out (upstream, policy) and below the ones that hold it (inbound, routing, l4).

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::metrics::Metrics;
use crate::proxy::access_log::AccessLogger;
use crate::proxy::options::ProxyOptions;
use crate::proxy::settings::ConnSettings;
use crate::proxy::{policy, upstream};
use crate::table::RouteTable;

/// What every connection task needs: the live table, metrics, options and the upstream pools.
pub(crate) struct Shared {
    pub table: Arc<ArcSwap<RouteTable>>,
    pub metrics: Arc<Metrics>,
    pub options: ProxyOptions,
    pub upstreams: upstream::client::Upstreams,
    /// Endpoint state (in-flight requests, health), shared across tables.
    pub backends: upstream::balance::Backends,
    pub tunnels: Arc<upstream::upgrade::Tunnels>,
    /// Rate-limit buckets and remembered credentials, shared across tables.
    pub policies: policy::PolicyState,
    /// Connection settings of listeners without a ProxyConfig.
    pub conn_defaults: Arc<ConnSettings>,
    /// The request tracer's subscriptions.
    pub tap: Arc<crate::proxy::tap::Tap>,
    /// Where finished access log lines are queued.
    pub access: AccessLogger,
    /// Where the spans of sampled requests are queued (`--otlp-endpoint`; none without).
    pub spans: Option<crate::proxy::trace::SpanSink>,
}
