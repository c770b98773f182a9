//! The label handles of a route table, indexed when it is published ([`SeriesIndex::build`])
//! and attached to it, so that the proxy finds a request's handles by pointer identity (one
//! hash of three machine words, no label string) and only increments atomics. A rule's
//! handles are made at its first request (most rules of a large table never see one), then
//! kept across tables by label set while the rule stays, so counts carry over; the series of
//! label sets a new table no longer has are removed from the registry, so removed routes
//! leave `/metrics`.
//!
//! Labels: `gateway` is the Gateway's `namespace/name`, `listener` its listener's name (the
//! Gateway listener owning the virtual host, or the L4 socket's listener), `route`
//! `Kind/namespace/name`, `rule` the rule's name or else its index, `backend` the Service port
//! `namespace/service:port`, empty when no Service answers (a redirect, a preflight, an
//! unresolved backendRef, a request refused before a backend was picked). Requests no route
//! matched carry empty `route`, `rule` and `backend`, and the socket's Gateway listener when
//! exactly one is bound there (else empty `gateway` and `listener` too).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::table::{
    BackendTarget, L4Route, L4Routes, ListenerTable, RouteRef, RouteRule, RouteTable, ServiceKey,
    SocketSource,
};

use super::handles::{BackendSeries, L4Series, Labels, RequestCells};
use super::route_backends::Announced;
use super::rule_cells::{empty, resolve, route_label, source_labels, Seeded, Source};
use super::Metrics;

type Fast = foldhash::fast::FixedState;

/// One rule as served by one Gateway listener of one socket. Its cells are made at its first
/// request, or handed over from the last table when that served the same rule there and saw a
/// request on it.
#[derive(Debug)]
struct RuleSlot {
    source: Arc<Source>,
    rule: Arc<RouteRule>,
    /// One cell per backendRef, in the rule's order, then the one of answers without a backend.
    cells: OnceLock<Arc<[Arc<RequestCells>]>>,
}

/// The request cells of one rule match on one Gateway listener, found by
/// [`SeriesIndex::rule`].
#[derive(Debug, Clone, Copy)]
pub struct RuleSeries<'a> {
    slot: &'a RuleSlot,
    live: &'a Mutex<Live>,
}

impl<'a> RuleSeries<'a> {
    /// The cell of backendRef `backend` of the rule, or of its answers without a backend; made
    /// (with the rule's other cells) at the rule's first request.
    pub fn cell(&self, backend: Option<usize>) -> Option<&'a RequestCells> {
        let slot = self.slot;
        let cells = slot
            .cells
            .get_or_init(|| lock(self.live).cells_of(&slot.source, &slot.rule));
        let last = cells.len().checked_sub(1)?;
        let i = backend.filter(|b| *b < last).unwrap_or(last);
        cells.get(i).map(|c| c.as_ref())
    }
}

fn lock(live: &Mutex<Live>) -> MutexGuard<'_, Live> {
    live.lock().unwrap_or_else(|p| p.into_inner())
}

/// Every handle of one table, by the identity of the table's parts.
#[derive(Debug, Default)]
pub struct SeriesIndex {
    /// By (listener socket, Gateway listener group of the virtual host, rule).
    rules: HashMap<(usize, u32, usize), RuleSlot, Fast>,
    /// Unmatched requests, by listener socket.
    unmatched: HashMap<usize, Arc<RequestCells>, Fast>,
    /// By (socket or TLS listener, route).
    l4: HashMap<(usize, usize), Arc<L4Series>, Fast>,
    /// Rules whose cells were kept from the previous table.
    kept: usize,
    /// The live handles, where a rule's first request finds or makes its cells.
    live: Arc<Mutex<Live>>,
}

/// The one Gateway listener serving HTTP on `socket`, which labels its unmatched requests;
/// `None` when several do. The TLS Passthrough listeners of an HTTPS socket serve no HTTP
/// request, so they do not count.
fn http_source(socket: &ListenerTable) -> Option<&SocketSource> {
    let mut sources: Vec<&SocketSource> = match &socket.passthrough {
        Some(sni) => sni
            .listeners
            .iter()
            .filter(|l| l.https)
            .filter_map(|l| l.source.as_ref())
            .collect(),
        None => socket.sources.iter().collect(),
    };
    sources.dedup();
    match sources.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

fn addr<T>(p: &T) -> usize {
    std::ptr::from_ref(p) as usize
}

impl SeriesIndex {
    /// The series of `rule` served by Gateway listener group `group` of socket `listener`.
    pub fn rule(
        &self,
        listener: &ListenerTable,
        group: u32,
        rule: &RouteRule,
    ) -> Option<RuleSeries<'_>> {
        let slot = self.rules.get(&(addr(listener), group, addr(rule)))?;
        Some(RuleSeries {
            slot,
            live: &self.live,
        })
    }

    /// The cell of requests no route of socket `listener` matched.
    pub fn unmatched(&self, listener: &ListenerTable) -> Option<&RequestCells> {
        self.unmatched.get(&addr(listener)).map(|c| c.as_ref())
    }

    /// The series of L4 `route` on `at` (the socket's [`ListenerTable`] for TCP and UDP, the
    /// [`crate::table::SniListener`] for TLS).
    pub fn l4<T>(&self, at: &T, route: &L4Route) -> Option<&Arc<L4Series>> {
        self.l4.get(&(addr(at), Arc::as_ptr(&route.route) as usize))
    }

    /// The index attached to `table` when it was published.
    pub fn of(table: &RouteTable) -> Option<&Self> {
        table.attached.get::<Self>()
    }

    /// Number of rule entries (for tests).
    pub fn rule_entries(&self) -> usize {
        self.rules.len()
    }

    /// Number of rules whose cells were kept from the previous table (for tests and logs).
    pub fn rules_kept(&self) -> usize {
        self.kept
    }

    /// Number of rules whose cells exist: those requested (for tests).
    pub fn rules_requested(&self) -> usize {
        self.rules
            .values()
            .filter(|s| s.cells.get().is_some())
            .count()
    }
}

/// The handles of the live label sets, kept across tables.
#[derive(Debug, Default)]
pub(super) struct Live {
    /// Index builds so far: the mark of the last one (see [`RequestCells::mark`]).
    builds: u64,
    /// Rule entries of the last table, to size the next index.
    slots: usize,
    /// Every live request cell by its labels; a build retires those it did not mark.
    cells: HashMap<Labels, Arc<RequestCells>, Seeded>,
    /// The cells of each requested rule of the last table.
    rules: HashMap<RuleKey, RuleCells, Seeded>,
    backends: HashMap<ServiceKey, Arc<BackendSeries>, Seeded>,
    l4: HashMap<[String; 3], Arc<L4Series>>,
}

/// A rule as served by one Gateway listener: the rule's address, `gateway`, `listener`.
type RuleKey = (usize, Arc<str>, Arc<str>);

fn rule_key(source: &Source, rule: &RouteRule) -> RuleKey {
    (addr(rule), source.gateway.clone(), source.listener.clone())
}

/// The cells one rule resolved to. The translator hands an unchanged route's rules to the
/// next table as the same `Arc`s, so a table change hands over the cells of the rules that
/// did not change. Holds the rule so that its address, part of the key, is not reused
/// meanwhile.
#[derive(Debug)]
struct RuleCells {
    /// Also tells the route, whose rules made anew keep its cells (`Builder::requested`).
    rule: Arc<RouteRule>,
    cells: Arc<[Arc<RequestCells>]>,
}

impl Live {
    /// The cells of `rule` on Gateway listener `source`: those another table's request made,
    /// else [`resolve`]d, marked as used by the last build (whose table serves the rule, or a
    /// table before it does, and the next build retires them).
    fn cells_of(&mut self, source: &Source, rule: &Arc<RouteRule>) -> Arc<[Arc<RequestCells>]> {
        let key = rule_key(source, rule);
        if let Some(made) = self.rules.get(&key) {
            return made.cells.clone();
        }
        let cells = resolve(&mut self.cells, &self.backends, self.builds, source, rule);
        let made = RuleCells {
            rule: rule.clone(),
            cells: cells.clone(),
        };
        self.rules.insert(key, made);
        cells
    }
}

/// Builds tables' indexes from the live handles, and retires what a table drops.
struct Builder<'a> {
    metrics: &'a Metrics,
    /// This build's mark.
    build: u64,
    /// `cells` and `rules` of `old` are read and extended in place; its `backends` and `l4`
    /// move to `new` as the table uses them.
    old: Live,
    new: Live,
    /// The rules of the new table, whose `route_backends` series exist before any request.
    announced: Vec<Announced>,
    /// The routes of the last table that saw a request: a rule of theirs the translator made
    /// anew (the route or its endpoints changed) takes its cells now, by label, so that its
    /// counts go on.
    requested: HashSet<Arc<RouteRef>, Fast>,
    /// Rules whose cells were kept from the last table, and rules without cells yet.
    kept: usize,
    fresh: usize,
}

impl Builder<'_> {
    /// The series of the Service port `key`: the last table's, or new ones.
    fn backend(&mut self, key: &ServiceKey) {
        if self.new.backends.contains_key(key) {
            return;
        }
        let b = self.old.backends.remove(key).unwrap_or_else(|| {
            Arc::new(BackendSeries::new(Arc::from(key.to_string()), self.metrics))
        });
        self.new.backends.insert(key.clone(), b);
    }

    /// The slot of `rule` on Gateway listener `source`: with the cells of the last table when
    /// it served the same rule there and a request made them, else empty until a request
    /// does. Keeps the series of the rule's backends.
    fn rule(&mut self, source: &Arc<Source>, rule: &Arc<RouteRule>) -> RuleSlot {
        for b in &rule.backends.backends {
            if let BackendTarget::Service(s) = &b.target {
                self.backend(&s.service);
            }
        }
        self.announced.push(Announced {
            source: source.clone(),
            rule: rule.clone(),
        });
        // Nothing requested yet (a table never requested, a first load): nothing to look up.
        if self.old.rules.is_empty() && self.new.rules.is_empty() {
            self.fresh += 1;
            return RuleSlot {
                source: source.clone(),
                rule: rule.clone(),
                cells: OnceLock::new(),
            };
        }
        let key = rule_key(source, rule);
        let cells = match self.new.rules.get(&key) {
            Some(kept) => Some(kept.cells.clone()),
            None => match self.old.rules.remove(&key) {
                Some(kept) => {
                    self.kept += 1;
                    for c in kept.cells.iter() {
                        c.mark(self.build);
                    }
                    let cells = kept.cells.clone();
                    self.new.rules.insert(key, kept);
                    Some(cells)
                }
                None if self.requested.contains(&rule.route) => {
                    let (cells, backends) = (&mut self.old.cells, &self.new.backends);
                    let cells = resolve(cells, backends, self.build, source, rule);
                    let made = RuleCells {
                        rule: rule.clone(),
                        cells: cells.clone(),
                    };
                    self.new.rules.insert(key, made);
                    Some(cells)
                }
                None => None,
            },
        };
        if cells.is_none() {
            self.fresh += 1;
        }
        RuleSlot {
            source: source.clone(),
            rule: rule.clone(),
            cells: cells.map(OnceLock::from).unwrap_or_default(),
        }
    }

    fn l4(&mut self, source: Option<&SocketSource>, route: &L4Route) -> Arc<L4Series> {
        let (gateway, listener) = source_labels(source);
        // L4 backends get no per-backend series: those measure HTTP exchanges.
        let labels = [gateway, listener, route_label(&route.route)];
        if let Some(s) = self.new.l4.get(&labels) {
            return s.clone();
        }
        let s = self
            .old
            .l4
            .remove(&labels)
            .unwrap_or_else(|| Arc::new(L4Series::new(labels.clone(), &self.metrics.l4)));
        self.new.l4.insert(labels, s.clone());
        s
    }

    fn socket(&mut self, index: &mut SeriesIndex, socket: &ListenerTable) {
        let only = http_source(socket);
        let shared = |source: Option<&SocketSource>| {
            let (gateway, listener) = source_labels(source);
            Arc::new(Source {
                gateway: Arc::from(gateway),
                listener: Arc::from(listener),
            })
        };
        let source = shared(only);
        let e = empty();
        let labels = [
            source.gateway.clone(),
            source.listener.clone(),
            e.clone(),
            e.clone(),
            e,
        ];
        // Marked by this build: the old map is the one being read.
        let unmatched = match self.old.cells.entry(labels) {
            Entry::Occupied(e) => e.get().clone(),
            Entry::Vacant(e) => {
                let c = Arc::new(RequestCells::new(e.key().clone(), None));
                e.insert(c).clone()
            }
        };
        unmatched.mark(self.build);
        index.unmatched.insert(addr(socket), unmatched);
        // The labels of each Gateway listener group, made once per socket.
        let mut groups: HashMap<u32, Arc<Source>, Fast> = HashMap::default();
        // What a host's slots hold does not depend on the order hosts are visited in.
        for vhost in socket.hosts.unordered() {
            let source = groups
                .entry(vhost.listener)
                .or_insert_with(|| shared(socket.groups.get(vhost.listener as usize).or(only)))
                .clone();
            for rule in &vhost.rules {
                let key = (addr(socket), vhost.listener, addr(rule.as_ref()));
                if let Entry::Vacant(slot) = index.rules.entry(key) {
                    slot.insert(self.rule(&source, rule));
                }
            }
        }
        match &socket.l4 {
            Some(L4Routes::Tcp { route: Some(r) } | L4Routes::Udp { route: Some(r) }) => {
                let s = self.l4(socket.sources.first(), r);
                index
                    .l4
                    .insert((addr(socket), Arc::as_ptr(&r.route) as usize), s);
            }
            Some(L4Routes::Tls(sni)) => {
                for (i, l) in sni.listeners.iter().enumerate() {
                    for (_, r) in &l.hosts {
                        let s = self.l4(socket.sources.get(i), r);
                        index
                            .l4
                            .insert((addr(l), Arc::as_ptr(&r.route) as usize), s);
                    }
                }
            }
            _ => {}
        }
        for l in socket.passthrough.iter().flat_map(|p| &p.listeners) {
            for (_, r) in &l.hosts {
                let s = self.l4(l.source.as_ref(), r);
                index
                    .l4
                    .insert((addr(l), Arc::as_ptr(&r.route) as usize), s);
            }
        }
    }

    /// Removes from the registry every series of the handles the new table left behind.
    fn retire(mut self, slots: usize) -> Live {
        let m = self.metrics;
        let build = self.build;
        self.old.cells.retain(|_, c| {
            let live = c.marked(build);
            if !live {
                c.remove(&m.http);
            }
            live
        });
        self.new.cells = std::mem::take(&mut self.old.cells);
        self.new.builds = build;
        self.new.slots = slots;
        for b in self.old.backends.values() {
            b.remove(m);
        }
        for s in self.old.l4.values() {
            s.remove(&m.l4);
        }
        self.new
    }
}

impl SeriesIndex {
    /// Indexes the rules of `table` (their cells come at their first request), creating the
    /// series of its new backends and L4 routes and removing those of the label sets `live`
    /// held that the table no longer has.
    pub(super) fn build(table: &RouteTable, metrics: &Metrics, live: &Arc<Mutex<Live>>) -> Self {
        let mut guard = lock(live);
        let old = std::mem::take(&mut *guard);
        // Sized for a table like the last one: most changes keep the rule count, and a map
        // grown entry by entry hashes every key again at each doubling.
        let rules = old.slots;
        let new = Live {
            rules: HashMap::with_capacity_and_hasher(old.rules.len(), Seeded::default()),
            backends: HashMap::with_capacity_and_hasher(old.backends.len(), Seeded::default()),
            ..Live::default()
        };
        let requested = old.rules.values().map(|r| r.rule.route.clone()).collect();
        let mut b = Builder {
            metrics,
            build: old.builds + 1,
            old,
            new,
            announced: Vec::with_capacity(rules),
            requested,
            kept: 0,
            fresh: 0,
        };
        let mut index = SeriesIndex {
            rules: HashMap::with_capacity_and_hasher(rules, Fast::default()),
            live: live.clone(),
            ..SeriesIndex::default()
        };
        for socket in table.listeners.values().chain(table.udp.values()) {
            b.socket(&mut index, socket);
        }
        metrics
            .http
            .routes
            .announce(std::mem::take(&mut b.announced));
        tracing::debug!(
            kept = b.kept,
            fresh = b.fresh,
            "rule label handles kept from the last table"
        );
        index.kept = b.kept;
        *guard = b.retire(index.rules.len());
        index
    }
}

#[cfg(test)]
#[path = "series_tests.rs"]
mod tests;
