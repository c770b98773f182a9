//! Prometheus metrics shared by the reconcile loop, the proxy and the admin server: the
//! registry and the families recorded by name here (each registered in `registry`); the
//! per-route, per-backend and control-plane families in `families`, their per-table label
//! handles in `series`, `rule_cells` and `handles`, the propagation marks in `propagation`.
//! docs/metrics.md lists every family.

mod control;
mod families;
mod handles;
mod propagation;
mod registry;
mod route_backends;
mod rule_cells;
mod series;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::table::{RouteTable, TlsListeners};

pub use families::{
    BackendFamilies, ControlFamilies, L4Families, RequestFamilies, L4_LABELS, REQUEST_LABELS,
    ROUTE_LABELS,
};
pub use handles::{method_index, BackendSeries, L4Series, RequestCells, METHODS};
pub use propagation::Received;
pub use rule_cells::route_label;
pub use series::{RuleSeries, SeriesIndex};

use prometheus::{
    Encoder, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry, TextEncoder,
};

/// The prefix of every metric name (the registry adds it at exposition).
const PREFIX: &str = "edgeplane";

/// All metrics of the process, registered in one registry served at `/metrics`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// What every registered family is: name, help and label names, whether or not it has a
    /// series yet (a labelled family is exposed only after its first event).
    catalog: Vec<prometheus::core::Desc>,
    /// `process_*` (CPU, memory, file descriptors; Linux), unprefixed as the convention is.
    process: Registry,
    /// The `process_*` families, for the catalogue.
    process_catalog: Vec<prometheus::core::Desc>,
    /// HTTP requests by Gateway listener, route, rule, backend, method and code.
    pub http: RequestFamilies,
    /// Upstream exchanges by backend.
    pub backend: BackendFamilies,
    /// TCP/TLS streams and UDP sessions by route.
    pub l4: L4Families,
    /// Reconciles, the table, objects, watches, status writes, leadership, propagation.
    pub control: ControlFamilies,
    /// The label handles of the live label sets (see `series`), shared with the indexes
    /// attached to tables, where a rule's first request makes its handles.
    live: Arc<Mutex<series::Live>>,
    /// When the live table was published.
    published_at: Mutex<Option<Instant>>,
    /// Receive times of snapshots on their way to the reconciler.
    pub received: Received,
    /// Generation of the live route table.
    pub table_generation: IntGauge,
    /// Number of rules in the live route table.
    pub table_rules: IntGauge,
    /// Time to translate a snapshot and publish the table.
    pub rebuild_seconds: HistogramVec,
    /// Configuration load failures (unparsable files, unreachable API), by source.
    pub config_errors: IntCounterVec,
    /// Expiry (Unix seconds) of the certificate each HTTPS listener serves, by Secret
    /// (`namespace`, `name`) and Gateway listener (`namespace/gateway/listener`): alert on
    /// `edgeplane_certificate_expiry_seconds - time() < 14 * 86400`.
    pub certificate_expiry: IntGaugeVec,
    /// Open client connections by listener socket.
    pub connections_open: IntGaugeVec,
    /// Connections refused because their listener had `--max-connections` open, by socket.
    pub connections_refused: IntCounterVec,
    /// Client connections accepted, by data-plane worker: how evenly the kernel spreads them.
    pub worker_connections: IntCounterVec,
    /// Connections the proxy closed on a timer, by reason (`handshake_timeout`, `idle`,
    /// `drain_timeout`: still open when a drain window ended, and cut).
    pub connections_closed: IntCounterVec,
    /// Requests the proxy answered itself with an error, by fault: `client` (malformed or
    /// refused requests, 400/501), `route` (404, 421, 500, and the 503 of a full basic-auth
    /// hashing pool) or `upstream` (502, 503, 504).
    pub request_errors: IntCounterVec,
    /// TCP and TLS connections closed and UDP datagrams dropped without reaching a backend, by
    /// protocol (`tcp`, `tls`, `udp`) and reason (`no_route`, `unknown_sni`, `not_tls`,
    /// `invalid_backend`, `no_endpoints`, `connect_error`, `handshake`, `session_limit`,
    /// `source_limit`).
    pub l4_dropped: IntCounterVec,
    /// TCP and TLS streams closed, and UDP sessions ended, after their idle timeout, by
    /// protocol (`tcp`, `tls`, `udp`): slots reclaimed from silent clients.
    pub l4_idle_closed: IntCounterVec,
    /// Endpoints ejected by outlier detection, by backend (`namespace/service:port`).
    pub outlier_ejections: IntCounterVec,
    /// Endpoints currently ejected by outlier detection.
    pub outlier_ejected: IntGauge,
    /// Requests refused by a circuit breaker, by backend (`namespace/service:port`) and limit (`max-requests`,
    /// `max-pending`, `max-connections`).
    pub overloaded: IntCounterVec,
    /// Upstream attempts tried again, by backend (`namespace/service:port`) and reason
    /// (`unsent`, `status`, `timeout`, `error`), and retries the budget refused
    /// (`budget_exhausted`).
    pub upstream_retries: IntCounterVec,
    /// Requests a TrafficPolicy refused before any backend saw them, by reason (`ip`,
    /// `rate_limit`, `concurrency_limit`, `duplicate_authorization`, `basic_auth`, `jwt`, `body`).
    pub policy_denied: IntCounterVec,
    /// Password hash verifications of basic auth, by hash kind (`bcrypt`, `sha1`): an unknown
    /// user is checked against a dummy hash, so it counts exactly like a wrong password.
    pub basic_auth_verifications: IntCounterVec,
    /// bcrypt verifications that may run at once (`--basic-auth-workers`).
    pub basic_auth_workers: IntGauge,
    /// bcrypt verifications that may wait for a worker (`--basic-auth-queue`).
    pub basic_auth_queue_limit: IntGauge,
    /// bcrypt verifications running now.
    pub basic_auth_busy: IntGauge,
    /// bcrypt verifications waiting for a worker now.
    pub basic_auth_queued: IntGauge,
    /// Requests answered 503 because every basic-auth worker and queue place was taken.
    pub basic_auth_rejected: IntCounter,
    /// Access log lines dropped because the writer's queue was full (the sink lags): a
    /// request never waits for its line.
    pub access_log_dropped: IntCounter,
    /// Spans of sampled requests dropped because the export queue was full (the collector
    /// lags or is unreachable).
    pub spans_dropped: IntCounter,
    /// Kubernetes mode: 1 when the API server serves a watched kind, 0 when it does not (its
    /// CRD is not installed; the kind counts as empty and is picked up once it is), by kind.
    pub watch_kind_available: IntGaugeVec,
    /// Conversion webhook connections closed and requests refused by a limit, by reason
    /// (`connections`, `handshake_timeout`, `idle_timeout`, `body_size`, `body_timeout`,
    /// `busy`).
    pub webhook_limited: IntCounterVec,
}

impl Metrics {
    /// Indexes the label handles of `table` and attaches the index to it (the proxy finds
    /// them there; a rule's own are made at its first request), creating the series of its
    /// new backends and removing those of the routes and backends the previous table had and
    /// this one has not. Called once per table, before it is
    /// published; a table already given handles keeps them.
    pub fn attach(&self, table: &RouteTable) {
        if SeriesIndex::of(table).is_some() {
            return;
        }
        let index = SeriesIndex::build(table, self, &self.live);
        table.attached.set(index);
    }

    /// The reconciler read `snapshot`: its objects by kind are counted, and the receive time
    /// of the changes it carries is kept for the publication of its table.
    pub fn snapshot_read<S: crate::kinds::KindSet>(&self, snapshot: &S) {
        self.record_objects(snapshot);
        self.received.read(snapshot);
    }

    /// A rebuild ended with `result` (`ok`: published, `error`), started at `started`.
    pub fn reconciled(&self, result: &str, started: Instant) {
        self.rebuild_seconds
            .with_label_values(&[result])
            .observe(started.elapsed().as_secs_f64());
        self.control.reconciles.with_label_values(&[result]).inc();
    }

    /// A table was published now: `table_age_seconds` counts from here, and the propagation
    /// lag of the changes of the snapshots read since the last publication is observed.
    pub fn table_published(&self) {
        let now = Instant::now();
        *self.published_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
        if let Some(at) = self.received.published() {
            self.control
                .propagation
                .observe(now.saturating_duration_since(at).as_secs_f64());
        }
    }

    /// Sets the certificate expiry gauge to what `table` serves, dropping listeners it no
    /// longer has.
    pub fn record_certificates(&self, table: &RouteTable) {
        self.certificate_expiry.reset();
        let served = table
            .listeners
            .values()
            .filter_map(|l| l.tls.as_ref())
            .flat_map(TlsListeners::iter);
        for l in served {
            let c = &l.certificate;
            let (Some(not_after), Some((ns, name))) = (c.not_after, c.secret.split_once('/'))
            else {
                continue;
            };
            self.certificate_expiry
                .with_label_values(&[ns, name, l.source.as_str()])
                .set(not_after);
        }
    }

    /// Every metric family the process registers, by name: `(name, label names, help)`, the
    /// `process_*` families last. What docs/metrics.md is checked against.
    pub fn catalog(&self) -> impl Iterator<Item = (String, &[String], &str)> {
        let ours = self.catalog.iter().map(|d| {
            let name = format!("{PREFIX}_{}", d.fq_name);
            (name, d.variable_labels.as_slice(), d.help.as_str())
        });
        let process = self.process_catalog.iter().map(|d| {
            (
                d.fq_name.clone(),
                d.variable_labels.as_slice(),
                d.help.as_str(),
            )
        });
        ours.chain(process)
    }

    /// Every metric family with its series as they are now (the dashboard computes request
    /// rates, error rates and quantiles from them).
    pub fn gather(&self) -> Vec<prometheus::proto::MetricFamily> {
        self.registry.gather()
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        if let Some(at) = *self.published_at.lock().unwrap_or_else(|p| p.into_inner()) {
            self.control.table_age.set(at.elapsed().as_secs_f64());
        }
        let mut families = self.registry.gather();
        families.extend(self.process.gather());
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&families, &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}
