//! The registration of every metric family: [`Metrics::new`], one registration per family in
//! the catalogue's order, long by design so that every family's name, help and labels read in
//! one place.

use std::sync::{Arc, Mutex};

use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use super::{families, Metrics, Received, PREFIX};

impl Metrics {
    /// Creates and registers every metric. One registration per family, in the catalogue's
    /// order: long by design, so that every family's name, help and labels read in one place.
    pub fn new() -> Arc<Self> {
        let registry =
            Registry::new_custom(Some(PREFIX.into()), None).expect("metric prefix is valid");
        let table_generation =
            IntGauge::new("table_generation", "Generation of the live route table")
                .expect("valid metric");
        let table_rules = IntGauge::new("table_rules", "Route rules in the live route table")
            .expect("valid metric");
        let rebuild_seconds = HistogramVec::new(
            HistogramOpts::new(
                "rebuild_duration_seconds",
                "Snapshot translation and table publication time",
            )
            .buckets(vec![
                0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
            ]),
            &["result"],
        )
        .expect("valid metric");
        let config_errors = IntCounterVec::new(
            Opts::new(
                "config_errors_total",
                "Configuration load failures by source",
            ),
            &["source"],
        )
        .expect("valid metric");
        let certificate_expiry = IntGaugeVec::new(
            Opts::new(
                "certificate_expiry_seconds",
                "Expiry (notAfter, Unix seconds) of the certificate served by each HTTPS listener",
            ),
            &["namespace", "name", "listener"],
        )
        .expect("valid metric");
        let connections_open = IntGaugeVec::new(
            Opts::new("connections_open", "Open client connections by listener"),
            &["listener"],
        )
        .expect("valid metric");
        let connections_refused = IntCounterVec::new(
            Opts::new(
                "connections_refused_total",
                "Connections closed at accept because the listener was at its connection limit",
            ),
            &["listener"],
        )
        .expect("valid metric");
        let worker_connections = IntCounterVec::new(
            Opts::new(
                "worker_connections_total",
                "Client connections accepted, by data-plane worker",
            ),
            &["worker"],
        )
        .expect("valid metric");
        let connections_closed = IntCounterVec::new(
            Opts::new(
                "connections_closed_total",
                "Client connections closed by a timer, by reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        let request_errors = IntCounterVec::new(
            Opts::new(
                "request_errors_total",
                "Requests answered with an error by the proxy, by who is at fault",
            ),
            &["fault"],
        )
        .expect("valid metric");
        let l4_dropped = IntCounterVec::new(
            Opts::new(
                "l4_dropped_total",
                "TCP/TLS connections closed and UDP datagrams dropped before a backend, by reason",
            ),
            &["protocol", "reason"],
        )
        .expect("valid metric");
        let l4_idle_closed = IntCounterVec::new(
            Opts::new(
                "l4_idle_closed_total",
                "TCP/TLS streams closed and UDP sessions ended after their idle timeout",
            ),
            &["protocol"],
        )
        .expect("valid metric");
        let outlier_ejections = IntCounterVec::new(
            Opts::new(
                "outlier_ejections_total",
                "Endpoints ejected by outlier detection, by backend",
            ),
            &["backend"],
        )
        .expect("valid metric");
        let outlier_ejected = IntGauge::new(
            "outlier_ejected_endpoints",
            "Endpoints currently ejected by outlier detection",
        )
        .expect("valid metric");
        let overloaded = IntCounterVec::new(
            Opts::new(
                "overloaded_total",
                "Requests refused by a backend's circuit breaker, by limit",
            ),
            &["backend", "limit"],
        )
        .expect("valid metric");
        let upstream_retries = IntCounterVec::new(
            Opts::new(
                "upstream_retries_total",
                "Upstream attempts tried again, and retries the budget refused, by backend and reason",
            ),
            &["backend", "reason"],
        )
        .expect("valid metric");
        let policy_denied = IntCounterVec::new(
            Opts::new(
                "policy_denied_total",
                "Requests refused by a TrafficPolicy, by reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        let basic_auth_verifications = IntCounterVec::new(
            Opts::new(
                "basic_auth_verifications_total",
                "Basic-auth password hash verifications (unknown users against a dummy hash), by hash kind",
            ),
            &["hash"],
        )
        .expect("valid metric");
        let basic_auth_workers = IntGauge::new(
            "basic_auth_workers",
            "bcrypt verifications of basic auth that may run at once",
        )
        .expect("valid metric");
        let basic_auth_queue_limit = IntGauge::new(
            "basic_auth_queue_limit",
            "bcrypt verifications of basic auth that may wait for a worker",
        )
        .expect("valid metric");
        let basic_auth_busy = IntGauge::new(
            "basic_auth_busy",
            "bcrypt verifications of basic auth running now",
        )
        .expect("valid metric");
        let basic_auth_queued = IntGauge::new(
            "basic_auth_queued",
            "bcrypt verifications of basic auth waiting for a worker now",
        )
        .expect("valid metric");
        let basic_auth_rejected = IntCounter::new(
            "basic_auth_rejected_total",
            "Requests answered 503 because the basic-auth workers and queue were full",
        )
        .expect("valid metric");
        let access_log_dropped = IntCounter::new(
            "access_log_dropped_total",
            "Access log lines dropped because the writer's queue was full",
        )
        .expect("valid metric");
        let spans_dropped = IntCounter::new(
            "spans_dropped_total",
            "Spans not exported because the export queue was full",
        )
        .expect("valid metric");
        let watch_kind_available = IntGaugeVec::new(
            Opts::new(
                "watch_kind_available",
                "1 when the API server serves a watched kind, 0 when its CRD is not installed",
            ),
            &["kind"],
        )
        .expect("valid metric");
        let webhook_limited = IntCounterVec::new(
            Opts::new(
                "webhook_limited_total",
                "Conversion webhook connections closed and requests refused by a limit, by reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        let families = families::Families::new();
        let mut catalog = Vec::new();
        for c in families.collectors().into_iter().chain([
            Box::new(watch_kind_available.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(policy_denied.clone()),
            Box::new(basic_auth_verifications.clone()),
            Box::new(basic_auth_workers.clone()),
            Box::new(basic_auth_queue_limit.clone()),
            Box::new(basic_auth_busy.clone()),
            Box::new(basic_auth_queued.clone()),
            Box::new(basic_auth_rejected.clone()),
            Box::new(access_log_dropped.clone()),
            Box::new(spans_dropped.clone()),
            Box::new(outlier_ejections.clone()),
            Box::new(outlier_ejected.clone()),
            Box::new(overloaded.clone()),
            Box::new(upstream_retries.clone()),
            Box::new(l4_dropped.clone()),
            Box::new(l4_idle_closed.clone()),
            Box::new(certificate_expiry.clone()),
            Box::new(table_generation.clone()),
            Box::new(table_rules.clone()),
            Box::new(rebuild_seconds.clone()),
            Box::new(config_errors.clone()),
            Box::new(connections_open.clone()),
            Box::new(connections_refused.clone()),
            Box::new(worker_connections.clone()),
            Box::new(connections_closed.clone()),
            Box::new(request_errors.clone()),
            Box::new(webhook_limited.clone()),
        ]) {
            catalog.extend(c.desc().into_iter().cloned());
            registry.register(c).expect("metric names are unique");
        }
        catalog.sort_by(|a, b| a.fq_name.cmp(&b.fq_name));
        let process = Registry::new();
        let mut process_catalog = Vec::new();
        #[cfg(target_os = "linux")]
        {
            use prometheus::core::Collector;
            let collector = prometheus::process_collector::ProcessCollector::for_self();
            process_catalog.extend(collector.desc().into_iter().cloned());
            process
                .register(Box::new(collector))
                .expect("process metrics register once");
        }
        process_catalog.sort_by(|a, b| a.fq_name.cmp(&b.fq_name));
        let families::Families {
            http,
            backend,
            l4,
            control,
        } = families;
        Arc::new(Self {
            registry,
            catalog,
            process,
            process_catalog,
            http,
            backend,
            l4,
            control,
            live: Arc::default(),
            published_at: Mutex::default(),
            received: Received::default(),
            table_generation,
            table_rules,
            rebuild_seconds,
            config_errors,
            certificate_expiry,
            connections_open,
            connections_refused,
            worker_connections,
            connections_closed,
            request_errors,
            l4_dropped,
            l4_idle_closed,
            outlier_ejections,
            outlier_ejected,
            overloaded,
            upstream_retries,
            policy_denied,
            basic_auth_verifications,
            basic_auth_workers,
            basic_auth_queue_limit,
            basic_auth_busy,
            basic_auth_queued,
            basic_auth_rejected,
            access_log_dropped,
            spans_dropped,
            watch_kind_available,
            webhook_limited,
        })
    }
}
