//! The metric families of issue 28's per-route, per-backend and control-plane series: their
//! names, help and label names in one place, grouped by who records them. Registered by
//! [`super::Metrics::new`]; the label handles of the route families are resolved per table
//! in [`super::series`].

use prometheus::core::Collector;

use super::route_backends::RouteBackends;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts};

/// Labels of one HTTP rule's backendRef on one Gateway listener.
pub const ROUTE_LABELS: [&str; 5] = ["gateway", "listener", "route", "rule", "backend"];
/// [`ROUTE_LABELS`] with the request's method and status code.
pub const REQUEST_LABELS: [&str; 7] = [
    "gateway", "listener", "route", "rule", "backend", "method", "code",
];
/// Labels of an L4 route on one Gateway listener.
pub const L4_LABELS: [&str; 3] = ["gateway", "listener", "route"];

/// Buckets of request and stream durations (seconds).
const DURATION_BUCKETS: [f64; 13] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];
/// Buckets of upstream connect and first-byte times (seconds).
const UPSTREAM_BUCKETS: [f64; 10] = [
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5,
];
/// Buckets of L4 stream and session lengths (seconds).
const STREAM_BUCKETS: [f64; 9] = [0.01, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 3600.0];
/// Buckets of the propagation lag (seconds).
const PROPAGATION_BUCKETS: [f64; 11] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

fn counters(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

fn gauges(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

fn histograms(name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> HistogramVec {
    HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
    .expect("valid metric")
}

/// HTTP (and gRPC) requests by Gateway listener, route, rule and backend.
#[derive(Debug, Clone)]
pub struct RequestFamilies {
    /// Requests by [`REQUEST_LABELS`]: appears with a request's first method and code.
    pub requests: IntCounterVec,
    /// Time to response head by [`REQUEST_LABELS`].
    pub duration: HistogramVec,
    /// 1 for every backendRef (or self-answering rule) the live table serves, by
    /// [`ROUTE_LABELS`]: the route's series that exist before any request.
    pub routes: RouteBackends,
}

impl RequestFamilies {
    fn new() -> Self {
        Self {
            requests: counters(
                "requests_total",
                "HTTP requests by Gateway listener, route, rule, backend, method and status code",
                &REQUEST_LABELS,
            ),
            duration: histograms(
                "request_duration_seconds",
                "Time from request head to response head, by the labels of requests_total",
                &REQUEST_LABELS,
                &DURATION_BUCKETS,
            ),
            routes: RouteBackends::new(),
        }
    }
}

/// Upstream exchanges by backend (`namespace/service:port`).
#[derive(Debug, Clone)]
pub struct BackendFamilies {
    /// Time to open an upstream connection (TCP, and TLS when the backend speaks it).
    pub connect: HistogramVec,
    /// Time from an attempt's start to its response head (connect time included).
    pub first_byte: HistogramVec,
    /// Request body bytes received from clients for the backend.
    pub request_bytes: IntCounterVec,
    /// Response body bytes sent to clients from the backend.
    pub response_bytes: IntCounterVec,
    /// Requests that ran out of time waiting for the backend.
    pub timeouts: IntCounterVec,
    /// External authorization checks by authorizer and result (`allowed`, `denied`,
    /// `error`, `timeout`).
    pub external_auth: IntCounterVec,
    /// Time an external authorization check took, by authorizer.
    pub external_auth_duration: HistogramVec,
}

impl BackendFamilies {
    fn new() -> Self {
        let b = &["backend"];
        Self {
            connect: histograms(
                "upstream_connect_seconds",
                "Time to open a connection to an endpoint of the backend",
                b,
                &UPSTREAM_BUCKETS,
            ),
            first_byte: histograms(
                "upstream_first_byte_seconds",
                "Time from sending an attempt to the backend to its response head",
                b,
                &UPSTREAM_BUCKETS,
            ),
            request_bytes: counters(
                "upstream_request_bytes_total",
                "Request body bytes received from clients for the backend",
                b,
            ),
            response_bytes: counters(
                "upstream_response_bytes_total",
                "Response body bytes sent to clients from the backend",
                b,
            ),
            timeouts: counters(
                "upstream_timeouts_total",
                "Upstream attempts that ran out of time waiting for the backend",
                b,
            ),
            external_auth: counters(
                "external_auth_total",
                "External authorization checks by authorizer and result (allowed, denied, error, timeout)",
                &["backend", "result"],
            ),
            external_auth_duration: histograms(
                "external_auth_duration_seconds",
                "Time an external authorization check took (answer read), by authorizer",
                b,
                &UPSTREAM_BUCKETS,
            ),
        }
    }
}

/// TCP and TLS streams and UDP sessions by Gateway listener and route.
#[derive(Debug, Clone)]
pub struct L4Families {
    /// Streams and sessions a route forwarded.
    pub connections: IntCounterVec,
    /// Bytes by direction (`received` from clients, `sent` to clients).
    pub bytes: IntCounterVec,
    /// Length of ended streams and sessions.
    pub duration: HistogramVec,
}

impl L4Families {
    fn new() -> Self {
        let mut with_direction = L4_LABELS.to_vec();
        with_direction.push("direction");
        Self {
            connections: counters(
                "l4_connections_total",
                "TCP/TLS streams and UDP sessions a route forwarded to a backend",
                &L4_LABELS,
            ),
            bytes: counters(
                "l4_bytes_total",
                "Bytes of TCP/TLS streams and UDP sessions by direction (received from, sent to clients)",
                &with_direction,
            ),
            duration: histograms(
                "l4_connection_duration_seconds",
                "Length of ended TCP/TLS streams and UDP sessions",
                &L4_LABELS,
                &STREAM_BUCKETS,
            ),
        }
    }
}

/// The control plane: reconciles, the table, objects, watches, status writes, leadership.
#[derive(Debug, Clone)]
pub struct ControlFamilies {
    /// Rebuilds by result (`ok`, `error`).
    pub reconciles: IntCounterVec,
    /// Seconds since the live table was published, set at each scrape.
    pub table_age: prometheus::Gauge,
    /// Objects of the last snapshot by kind.
    pub objects: IntGaugeVec,
    /// Watch events received by kind (Kubernetes mode).
    pub watch_events: IntCounterVec,
    /// Watches restarted after an error by kind (Kubernetes mode).
    pub watch_restarts: IntCounterVec,
    /// Status writes by result (`ok`, `conflict`, `error`).
    pub status_writes: IntCounterVec,
    /// 1 while this replica leads (writes status), else 0.
    pub leader: IntGauge,
    /// From a change being received to the table serving it.
    pub propagation: prometheus::Histogram,
    /// 1, labelled with the version and the commit built.
    pub build_info: IntGaugeVec,
}

impl ControlFamilies {
    fn new() -> Self {
        let propagation = prometheus::Histogram::with_opts(
            HistogramOpts::new(
                "propagation_seconds",
                "Time from a change being received (file change seen, watch event received) to the route table serving it",
            )
            .buckets(PROPAGATION_BUCKETS.to_vec()),
        )
        .expect("valid metric");
        Self {
            reconciles: counters(
                "reconciles_total",
                "Snapshot translations by result (ok: a table was published)",
                &["result"],
            ),
            table_age: prometheus::Gauge::new(
                "table_age_seconds",
                "Seconds since the live route table was published",
            )
            .expect("valid metric"),
            objects: gauges(
                "objects",
                "Objects of the last configuration snapshot, by kind",
                &["kind"],
            ),
            watch_events: counters(
                "watch_events_total",
                "Kubernetes watch events received, by kind",
                &["kind"],
            ),
            watch_restarts: counters(
                "watch_restarts_total",
                "Kubernetes watches that failed and were restarted with backoff, by kind",
                &["kind"],
            ),
            status_writes: counters(
                "status_writes_total",
                "Status subresource writes by result (ok, conflict, error)",
                &["result"],
            ),
            leader: IntGauge::new(
                "leader",
                "1 while this replica holds the leader lease (writes status), else 0",
            )
            .expect("valid metric"),
            propagation,
            build_info: gauges(
                "build_info",
                "1, labelled with the version and the git commit of the build",
                &["version", "commit"],
            ),
        }
    }
}

/// Every family of this module, built.
#[derive(Debug, Clone)]
pub struct Families {
    pub http: RequestFamilies,
    pub backend: BackendFamilies,
    pub l4: L4Families,
    pub control: ControlFamilies,
}

impl Families {
    /// Builds every family (registered by the caller) and sets what is known at start:
    /// the build info and the result labels of the control-plane counters.
    pub fn new() -> Self {
        let f = Self {
            http: RequestFamilies::new(),
            backend: BackendFamilies::new(),
            l4: L4Families::new(),
            control: ControlFamilies::new(),
        };
        f.control
            .build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION"), env!("EDGEPLANE_COMMIT")])
            .set(1);
        for result in ["ok", "error"] {
            f.control.reconciles.with_label_values(&[result]);
        }
        for result in ["ok", "conflict", "error"] {
            f.control.status_writes.with_label_values(&[result]);
        }
        f
    }

    /// The collectors to register.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        let c = &self.control;
        vec![
            Box::new(self.http.requests.clone()),
            Box::new(self.http.duration.clone()),
            Box::new(self.http.routes.clone()),
            Box::new(self.backend.connect.clone()),
            Box::new(self.backend.first_byte.clone()),
            Box::new(self.backend.request_bytes.clone()),
            Box::new(self.backend.response_bytes.clone()),
            Box::new(self.backend.timeouts.clone()),
            Box::new(self.backend.external_auth.clone()),
            Box::new(self.backend.external_auth_duration.clone()),
            Box::new(self.l4.connections.clone()),
            Box::new(self.l4.bytes.clone()),
            Box::new(self.l4.duration.clone()),
            Box::new(c.reconciles.clone()),
            Box::new(c.table_age.clone()),
            Box::new(c.objects.clone()),
            Box::new(c.watch_events.clone()),
            Box::new(c.watch_restarts.clone()),
            Box::new(c.status_writes.clone()),
            Box::new(c.leader.clone()),
            Box::new(c.propagation.clone()),
            Box::new(c.build_info.clone()),
        ]
    }
}
