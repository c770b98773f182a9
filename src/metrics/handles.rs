//! Label handles: the counters and histograms of one route rule's backendRef, one backend and
//! one L4 route, obtained once (by [`super::series`]: a rule's at its first request, a
//! backend's and an L4 route's when a table is published) so that a request only increments
//! atomics. `method` and `code` are not known ahead: a request's
//! first method and common code get their pair of series once, in a fixed slot; rare codes
//! go through `with_label_values` every time (and are remembered, to be removed with the
//! route).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use http::{Method, StatusCode};
use prometheus::{Histogram, IntCounter};

use super::families::{L4Families, RequestFamilies};

/// Every `reason` of `upstream_retries_total`.
const RETRY_REASONS: [&str; 5] = ["unsent", "status", "timeout", "error", "budget_exhausted"];
/// Every `limit` of `overloaded_total`.
const BREAKER_LIMITS: [&str; 3] = ["max-requests", "max-pending", "max-connections"];

/// The `method` label: the standard methods, everything else `other` (a bounded set).
pub const METHODS: [&str; 10] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "other",
];

/// Codes given a fixed slot per method; others take the slow path.
const CODES: [u16; 24] = [
    200, 201, 202, 204, 206, 301, 302, 304, 307, 308, 400, 401, 403, 404, 405, 408, 413, 421, 429,
    500, 501, 502, 503, 504,
];

/// The `method` label of `method`.
pub fn method_index(method: &Method) -> usize {
    match *method {
        Method::GET => 0,
        Method::HEAD => 1,
        Method::POST => 2,
        Method::PUT => 3,
        Method::DELETE => 4,
        Method::CONNECT => 5,
        Method::OPTIONS => 6,
        Method::TRACE => 7,
        Method::PATCH => 8,
        _ => 9,
    }
}

fn code_slot(code: u16) -> Option<usize> {
    CODES.iter().position(|c| *c == code)
}

/// The [`super::families::ROUTE_LABELS`] values of a cell. Most are repeated across cells
/// (every rule of a route, every route of a listener, every route to a Service), so each is
/// shared rather than copied.
pub type Labels = [Arc<str>; 5];

/// The count and duration of one method and code.
type Pair = (IntCounter, Histogram);
/// The slots of one method, allocated at its first request.
type CodeSlots = Box<[OnceLock<Pair>; CODES.len()]>;
/// The code slots of each method.
type MethodSlots = [OnceLock<CodeSlots>; METHODS.len()];

/// The request series of one backendRef of one rule on one Gateway listener (or of the rule's
/// answers without a backend, or of a socket's unmatched requests).
#[derive(Debug)]
pub struct RequestCells {
    /// `gateway`, `listener`, `route`, `rule`, `backend`: shared with the other cells of the
    /// same Gateway listener, route and backend.
    labels: Labels,
    /// Allocated at the cell's first request: most cells of a large table never see one.
    methods: OnceLock<Box<MethodSlots>>,
    /// `(method, code)` recorded through the slow path.
    rare: Mutex<Vec<(usize, u16)>>,
    /// The backend's own series, when the cell is a backendRef's.
    pub backend: Option<std::sync::Arc<BackendSeries>>,
    /// The last index build whose table uses the cell; the build retires the cells it did not
    /// mark (see `series`).
    seen: std::sync::atomic::AtomicU64,
}

impl RequestCells {
    pub(super) fn new(labels: Labels, backend: Option<std::sync::Arc<BackendSeries>>) -> Self {
        Self {
            labels,
            methods: Default::default(),
            rare: Mutex::new(Vec::new()),
            backend,
            seen: Default::default(),
        }
    }

    /// Marks the cell as used by index build `build`.
    pub(super) fn mark(&self, build: u64) {
        self.seen.store(build, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether index build `build` marked the cell.
    pub(super) fn marked(&self, build: u64) -> bool {
        self.seen.load(std::sync::atomic::Ordering::Relaxed) == build
    }

    fn values<'a>(&'a self, method: usize, code: &'a str) -> [&'a str; 7] {
        let l = &self.labels;
        [&l[0], &l[1], &l[2], &l[3], &l[4], METHODS[method], code]
    }

    /// Counts one request of method [`METHODS`]`[m]` (see [`method_index`]) and its
    /// duration.
    pub fn record(
        &self,
        families: &RequestFamilies,
        m: usize,
        code: StatusCode,
        elapsed: Duration,
    ) {
        let m = m.min(METHODS.len() - 1);
        let secs = elapsed.as_secs_f64();
        let Some(slot) = code_slot(code.as_u16()) else {
            let values = self.values(m, code.as_str());
            families.requests.with_label_values(&values).inc();
            families.duration.with_label_values(&values).observe(secs);
            let mut rare = self.rare.lock().unwrap_or_else(|p| p.into_inner());
            if !rare.contains(&(m, code.as_u16())) {
                rare.push((m, code.as_u16()));
            }
            return;
        };
        let slots = self.methods.get_or_init(Box::default)[m].get_or_init(Box::default);
        let (count, duration) = slots[slot].get_or_init(|| {
            let values = self.values(m, code.as_str());
            (
                families.requests.with_label_values(&values),
                families.duration.with_label_values(&values),
            )
        });
        count.inc();
        duration.observe(secs);
    }

    /// Drops every series this cell created from the families.
    pub(super) fn remove(&self, families: &RequestFamilies) {
        let mut made: Vec<(usize, u16)> =
            self.rare.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for (m, slots) in self
            .methods
            .get()
            .into_iter()
            .flat_map(|s| s.iter())
            .enumerate()
        {
            let Some(slots) = slots.get() else { continue };
            for (i, slot) in slots.iter().enumerate() {
                if slot.get().is_some() {
                    made.push((m, CODES[i]));
                }
            }
        }
        for (m, code) in made {
            let code = code.to_string();
            let values = self.values(m, &code);
            let _ = families.requests.remove_label_values(&values);
            let _ = families.duration.remove_label_values(&values);
        }
    }
}

/// The series of one backend (`namespace/service:port`).
#[derive(Debug)]
pub struct BackendSeries {
    label: Arc<str>,
    pub connect: Histogram,
    pub first_byte: Histogram,
    pub request_bytes: IntCounter,
    pub response_bytes: IntCounter,
    pub timeouts: IntCounter,
}

impl BackendSeries {
    pub(super) fn new(label: Arc<str>, m: &super::Metrics) -> Self {
        let f = &m.backend;
        let v = [&*label];
        m.outlier_ejections.with_label_values(&v);
        Self {
            connect: f.connect.with_label_values(&v),
            first_byte: f.first_byte.with_label_values(&v),
            request_bytes: f.request_bytes.with_label_values(&v),
            response_bytes: f.response_bytes.with_label_values(&v),
            timeouts: f.timeouts.with_label_values(&v),
            label,
        }
    }

    /// The `backend` label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The `backend` label, shared.
    pub(super) fn shared_label(&self) -> &Arc<str> {
        &self.label
    }

    pub(super) fn remove(&self, m: &super::Metrics) {
        let f = &m.backend;
        let v = [&*self.label];
        let _ = f.connect.remove_label_values(&v);
        let _ = f.first_byte.remove_label_values(&v);
        let _ = f.request_bytes.remove_label_values(&v);
        let _ = f.response_bytes.remove_label_values(&v);
        let _ = f.timeouts.remove_label_values(&v);
        let _ = m.outlier_ejections.remove_label_values(&v);
        for reason in RETRY_REASONS {
            let _ = m.upstream_retries.remove_label_values(&[v[0], reason]);
        }
        for limit in BREAKER_LIMITS {
            let _ = m.overloaded.remove_label_values(&[v[0], limit]);
        }
    }
}

/// The series of one L4 route on one Gateway listener.
#[derive(Debug)]
pub struct L4Series {
    labels: [String; 3],
    pub connections: IntCounter,
    pub received: IntCounter,
    pub sent: IntCounter,
    pub duration: Histogram,
}

impl L4Series {
    pub(super) fn new(labels: [String; 3], f: &L4Families) -> Self {
        let [g, l, r] = [&labels[0], &labels[1], &labels[2]].map(String::as_str);
        Self {
            connections: f.connections.with_label_values(&[g, l, r]),
            received: f.bytes.with_label_values(&[g, l, r, "received"]),
            sent: f.bytes.with_label_values(&[g, l, r, "sent"]),
            duration: f.duration.with_label_values(&[g, l, r]),
            labels,
        }
    }

    pub(super) fn remove(&self, f: &L4Families) {
        let [g, l, r] = [&self.labels[0], &self.labels[1], &self.labels[2]].map(String::as_str);
        let _ = f.connections.remove_label_values(&[g, l, r]);
        let _ = f.bytes.remove_label_values(&[g, l, r, "received"]);
        let _ = f.bytes.remove_label_values(&[g, l, r, "sent"]);
        let _ = f.duration.remove_label_values(&[g, l, r]);
    }
}
