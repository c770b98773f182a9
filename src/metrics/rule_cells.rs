//! The labels of a rule's request series and the cells they name: the `gateway`, `listener`,
//! `route`, `rule` and `backend` values of one rule served by one Gateway listener, and the
//! cells of a rule, found by those labels among the live ones or made. Used by the series
//! index at a rule's first request and by `route_backends` at scrape time.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;

use crate::table::{BackendTarget, RouteRef, RouteRule, ServiceKey, SocketSource, WeightedBackend};

use super::handles::{BackendSeries, Labels, RequestCells};

/// Keyed by label text from the configuration: seeded per process.
pub(super) type Seeded = foldhash::fast::RandomState;

/// The `gateway` and `listener` labels of one Gateway listener, shared by its rules.
#[derive(Debug)]
pub(super) struct Source {
    pub(super) gateway: Arc<str>,
    pub(super) listener: Arc<str>,
}

/// The `gateway` and `listener` labels of a Gateway listener.
pub(super) fn source_labels(source: Option<&SocketSource>) -> (String, String) {
    let (mut gateway, mut listener) = (String::new(), String::new());
    if let Some(s) = source {
        let _ = s.write_gateway(&mut gateway);
        let _ = s.write_listener(&mut listener);
    }
    (gateway, listener)
}

/// The empty label value.
pub(super) fn empty() -> Arc<str> {
    Arc::from("")
}

/// `Kind/namespace/name`.
pub fn route_label(route: &RouteRef) -> String {
    format!("{}/{}", route.kind(), route.label())
}

/// The `rule` label: the rule's name, else its index.
pub(super) fn rule_label(rule: &RouteRule) -> String {
    match &rule.rule_name {
        Some(n) => n.to_string(),
        None => rule.rule_index.to_string(),
    }
}

/// The `backend` label of a backendRef: its Service port, empty when it resolved to none.
pub(super) fn backend_label(backend: &WeightedBackend) -> String {
    match &backend.target {
        BackendTarget::Service(s) => s.service.to_string(),
        BackendTarget::Invalid { .. } => String::new(),
    }
}

/// The cells of `rule` on Gateway listener `source` by their labels, in `cells` or added to
/// it, marked with `mark`: one per backendRef (with the backend's series from `backends`),
/// then the one of answers without a backend.
pub(super) fn resolve(
    cells: &mut HashMap<Labels, Arc<RequestCells>, Seeded>,
    backends: &HashMap<ServiceKey, Arc<BackendSeries>, Seeded>,
    mark: u64,
    source: &Source,
    rule: &RouteRule,
) -> Arc<[Arc<RequestCells>]> {
    let mut cell = |labels: Labels, backend: Option<Arc<BackendSeries>>| {
        let c = match cells.entry(labels) {
            Entry::Occupied(e) => e.get().clone(),
            Entry::Vacant(e) => {
                let c = Arc::new(RequestCells::new(e.key().clone(), backend));
                e.insert(c).clone()
            }
        };
        c.mark(mark);
        c
    };
    let labels = [
        source.gateway.clone(),
        source.listener.clone(),
        Arc::from(route_label(&rule.route)),
        Arc::from(rule_label(rule)),
        empty(),
    ];
    let refs = &rule.backends.backends;
    let mut out = Vec::with_capacity(refs.len() + 1);
    for b in refs {
        let series = match &b.target {
            BackendTarget::Service(s) => backends.get(&s.service).cloned(),
            BackendTarget::Invalid { .. } => None,
        };
        let mut labels = labels.clone();
        labels[4] = match &series {
            Some(s) => s.shared_label().clone(),
            None => Arc::from(backend_label(b)),
        };
        out.push(cell(labels, series));
    }
    out.push(cell(labels, None));
    out.into()
}
