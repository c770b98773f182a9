//! Status, owned in one place: the conditions the translator builds ([`conditions`]), the
//! computed status of every object ([`StatusReport`]), `lastTransitionTime` carried across
//! publications, the report as published ([`SealedReport`]), and what the leader must change on
//! the objects to match it ([`diff`]: merge patches and the transitions worth an Event). Served
//! at `/debug/status`, printed by `edgeplane check`, written by the Kubernetes provider, which
//! only sends what it is handed. Pure: no I/O, no tokio, no kube client.

mod body;
pub mod conditions;
pub mod diff;
pub mod ingress;
mod kind;
pub mod problems;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

pub use body::StatusBody;
pub use kind::{ObjectKind, UnknownKind, API_VERSION, GATEWAY_GROUP};

/// The computed status of every object the translator owns (our GatewayClasses, their Gateways,
/// and routes that reference those Gateways), sorted by kind, namespace and name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StatusReport {
    pub entries: Vec<ObjectStatus>,
}

/// One object's status, in the exact shape of its status subresource. Serializes with the
/// kind's `apiVersion` first, as `/debug/status` and `check` show it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStatus {
    pub kind: ObjectKind,
    /// Shared with the translator's memory for routes, so that listing a route's status
    /// copies no name.
    #[serde(default)]
    pub namespace: Option<Arc<str>>,
    pub name: Arc<str>,
    #[serde(default)]
    pub generation: Option<i64>,
    /// The typed status (`GatewayClassStatus`, `GatewayStatus`, `HTTPRouteStatus`); JSON when
    /// serialized.
    pub status: StatusBody,
}

impl ObjectStatus {
    /// The status of one object; `namespace` is `None` for cluster-scoped kinds.
    pub fn new(
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
        generation: Option<i64>,
        status: StatusBody,
    ) -> Self {
        Self::shared(
            kind,
            namespace.map(Arc::from),
            Arc::from(name),
            generation,
            status,
        )
    }

    /// [`ObjectStatus::new`] with names the caller already holds.
    pub fn shared(
        kind: ObjectKind,
        namespace: Option<Arc<str>>,
        name: Arc<str>,
        generation: Option<i64>,
        status: StatusBody,
    ) -> Self {
        Self {
            kind,
            namespace,
            name,
            generation,
            status,
        }
    }

    /// Whether `other` is the status of the same object.
    pub fn same_object(&self, other: &ObjectStatus) -> bool {
        self.kind == other.kind && self.namespace == other.namespace && self.name == other.name
    }

    /// Stamps `now` as every condition's `lastTransitionTime`, for a status recomputed after
    /// its translation: carrying times over from the previous status then leaves `now` only
    /// on the conditions that really changed.
    pub fn restamp(&mut self, now: jiff::Timestamp) {
        if self.status.make_typed(self.kind) {
            self.status.restamp(now);
        }
    }

    /// Keeps each condition's `lastTransitionTime` from `prev`, the status of the same object,
    /// when its status did not change. A JSON body takes part through its typed form.
    fn carry_from(&mut self, prev: &ObjectStatus) {
        let Some(p) = prev.status.typed(prev.kind) else {
            return;
        };
        if self.status.make_typed(self.kind) {
            self.status.carry_from(&p);
        }
    }

    /// `Kind namespace/name` (`Kind name` for cluster-scoped kinds), as problems name it.
    pub fn label(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {}/{}", self.kind, ns, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

impl Serialize for ObjectStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("ObjectStatus", 6)?;
        s.serialize_field("apiVersion", self.kind.api_version())?;
        s.serialize_field("kind", &self.kind)?;
        match &self.namespace {
            Some(ns) => s.serialize_field("namespace", ns)?,
            None => s.skip_field("namespace")?,
        }
        s.serialize_field("name", &self.name)?;
        s.serialize_field("generation", &self.generation)?;
        s.serialize_field("status", &self.status)?;
        s.end()
    }
}

/// A condition that reports a problem, found by [`StatusReport::problems`].
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// `Kind namespace/name`, plus the listener or parent it concerns.
    pub object: String,
    pub condition: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}={} ({}): {}",
            self.object, self.condition, self.status, self.reason, self.message
        )
    }
}

type ObjectId<'a> = (ObjectKind, Option<&'a str>, &'a str);

fn id(e: &ObjectStatus) -> ObjectId<'_> {
    (e.kind, e.namespace.as_deref(), &e.name)
}

impl StatusReport {
    /// Sorts entries by kind order, namespace and name, so output is stable.
    pub fn sort(&mut self) {
        self.entries.sort_by(|a, b| id(a).cmp(&id(b)));
    }

    /// Sorts entries as [`StatusReport::sort`] does, `sorted` being a range of them already in
    /// order (the routes, which the translator lists in report order): only the other entries
    /// are sorted. When those before the range sort before it and those after it after it
    /// (the translator lists classes and Gateways first), nothing else moves; otherwise they
    /// are placed among the range's by binary search, so the routes are moved in blocks
    /// rather than compared and merged one by one.
    pub fn sort_around(&mut self, sorted: std::ops::Range<usize>) {
        let Some(block) = self.entries.get(sorted.clone()) else {
            return self.sort();
        };
        if !block.is_sorted_by(|a, b| id(a) <= id(b)) {
            return self.sort();
        }
        let start = sorted.start;
        // Stable, as `sort` is: equal entries keep their order within each side, and an
        // entry equal to one of the block's stays on its side of it, as below.
        let (head, rest) = self.entries.split_at_mut(start);
        let (block, tail) = rest.split_at_mut(sorted.len());
        head.sort_by(|a, b| id(a).cmp(&id(b)));
        tail.sort_by(|a, b| id(a).cmp(&id(b)));
        // Each side's last entry against the next side's first (an empty block joins the two).
        let joins = [head.last(), block.first(), block.last(), tail.first()];
        let apart = joins.iter().flatten().is_sorted_by(|a, b| id(a) <= id(b));
        if apart {
            // Both sides sorted and on their own side of the block: the report is sorted.
            return;
        }
        let block: Vec<ObjectStatus> = self.entries.drain(sorted).collect();
        // Each other entry with whether it came after the block: an entry equal to one of the
        // block's stays on its side of it, as a stable sort keeps it.
        let mut rest: Vec<(bool, ObjectStatus)> = self
            .entries
            .drain(..)
            .enumerate()
            .map(|(i, e)| (i >= start, e))
            .collect();
        rest.sort_by(|a, b| id(&a.1).cmp(&id(&b.1)));
        let mut block = block.into_iter();
        for (after, e) in rest {
            let before = block.as_slice().partition_point(|b| {
                let (b, e) = (id(b), id(&e));
                b < e || (after && b == e)
            });
            self.entries.extend(block.by_ref().take(before));
            self.entries.push(e);
        }
        self.entries.extend(block);
    }

    /// The entry of one object, if the translator owns it.
    pub fn get(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<&ObjectStatus> {
        self.entries
            .iter()
            .find(|e| id(e) == (kind, namespace, name))
    }

    /// Every condition that reports a problem (see [`conditions::is_problem`]), wherever it
    /// appears (object, listener or route parent).
    pub fn problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        for e in &self.entries {
            if let Some(body) = e.status.typed(e.kind) {
                body.problems(&|| e.label(), &mut out);
            }
        }
        out
    }

    /// Every entry with its problems, for the entries that have any, in report order. The
    /// routes of a Gateway mostly share one status `Arc` (the translator pools equal
    /// statuses), so a route status found without problems is not walked again for the next
    /// entries holding the same `Arc`.
    pub fn problems_by_object(&self) -> Vec<(&ObjectStatus, Vec<Problem>)> {
        let mut clear: Option<&Arc<crate::kinds::routes::RouteStatus>> = None;
        self.entries
            .iter()
            .filter_map(|e| {
                let route = match &e.status {
                    StatusBody::Route(s) => Some(s),
                    _ => None,
                };
                if route.is_some_and(|s| clear.is_some_and(|c| Arc::ptr_eq(c, s))) {
                    return None;
                }
                let mut out = Vec::new();
                e.status.typed(e.kind)?.problems(&|| e.label(), &mut out);
                if out.is_empty() {
                    clear = route.or(clear);
                    return None;
                }
                Some((e, out))
            })
            .collect()
    }

    /// The report as published after `previous`: JSON bodies that parse as their kind's status
    /// become typed, each condition keeps its `lastTransitionTime` from `previous` when its
    /// status did not change (times move only on real transitions, and unchanged output
    /// compares equal), and each entry gets the [`Revision`] the status writer compares: the
    /// previous one's when the entry is equal to it, else a new one. Sealing serializes
    /// nothing. Runs on the reconciler's blocking thread.
    pub fn seal(mut self, previous: &SealedReport) -> SealedReport {
        let order = Order::of(&self.entries);
        let mut earlier = Earlier::new(previous, order);
        let revisions = self
            .entries
            .iter_mut()
            .map(|e| {
                e.status.make_typed(e.kind);
                let Some(i) = earlier.find(id(e)) else {
                    return Revision::new();
                };
                let prev = &previous.report.entries[i];
                if e.status.carries_to(&prev.status) {
                    // The carried status is the previous one: share it, keep its revision.
                    e.status = prev.status.clone();
                    return previous
                        .revisions
                        .get(i)
                        .copied()
                        .unwrap_or_else(Revision::new);
                }
                e.carry_from(prev);
                match previous.revisions.get(i) {
                    Some(&r) if e.status == prev.status => r,
                    _ => Revision::new(),
                }
            })
            .collect();
        SealedReport {
            report: self,
            revisions,
            order,
        }
    }
}

/// How a report's entries are ordered by object, found in one pass and kept with the sealed
/// report, so that the next seal does not check its predecessor again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Order {
    /// Not known to be sorted (a report never sealed, or one out of order).
    #[default]
    Unsorted,
    /// Sorted, with some object listed more than once.
    Sorted,
    /// Sorted, each object listed once (what the translator makes).
    Strict,
}

impl Order {
    fn of(entries: &[ObjectStatus]) -> Self {
        let mut order = Self::Strict;
        for pair in entries.windows(2) {
            match id(&pair[0]).cmp(&id(&pair[1])) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => order = Self::Sorted,
                std::cmp::Ordering::Greater => return Self::Unsorted,
            }
        }
        order
    }
}

/// Whether `e` is the object `object` names because it holds the very same name (and
/// namespace): an entry carried over unchanged shares them with its predecessor, so most
/// entries are matched without comparing a string.
fn same_names(e: &ObjectStatus, object: ObjectId<'_>) -> bool {
    e.kind == object.0
        && std::ptr::eq(&*e.name, object.2)
        && match (e.namespace.as_deref(), object.1) {
            (Some(a), Some(b)) => std::ptr::eq(a, b),
            (None, None) => true,
            _ => false,
        }
}

/// Finds each entry's previous entry, for [`StatusReport::seal`]. Reports come sorted from
/// the translator, so the two are walked side by side (no index of the previous one, which
/// cost a hash of every entry per publication); a report that is not sorted (read back or
/// written by hand) is looked up through an index instead. Either way an object found twice
/// in the previous report is its last entry.
enum Earlier<'a> {
    /// Both reports sorted: the position in `entries` reached so far.
    Walk {
        entries: &'a [ObjectStatus],
        at: usize,
        /// Both list each object once: an entry found is the only one, and the next object
        /// asked for lies after it.
        strict: bool,
    },
    Index(foldhash::HashMap<ObjectId<'a>, usize>),
}

impl<'a> Earlier<'a> {
    /// For a report whose entries are in `now` order, sealed after `previous` (whose order
    /// its own sealing found; a report never sealed is checked here).
    fn new(previous: &'a SealedReport, now: Order) -> Self {
        let entries = &previous.report.entries;
        let before = match previous.order {
            Order::Unsorted => Order::of(entries),
            known => known,
        };
        if before != Order::Unsorted && now != Order::Unsorted {
            return Self::Walk {
                entries,
                at: 0,
                strict: before == Order::Strict && now == Order::Strict,
            };
        }
        let previous = entries;
        Self::Index(
            previous
                .iter()
                .enumerate()
                .map(|(i, e)| (id(e), i))
                .collect(),
        )
    }

    /// The position of `object`'s previous entry. In a walk, objects must be asked for in
    /// sorted order.
    fn find(&mut self, object: ObjectId<'_>) -> Option<usize> {
        match self {
            Self::Index(index) => {
                // Shortened to `object`'s lifetime (the map is covariant in its keys).
                let index: &foldhash::HashMap<ObjectId<'_>, usize> = index;
                index.get(&object).copied()
            }
            Self::Walk {
                entries,
                at,
                strict,
            } => {
                if *strict && entries.get(*at).is_some_and(|e| same_names(e, object)) {
                    *at += 1;
                    return Some(*at - 1);
                }
                while entries.get(*at).is_some_and(|e| id(e) < object) {
                    *at += 1;
                }
                let mut found = None;
                // The last of equal entries, as the index keeps it; `at` stays on the first,
                // for an object the report lists twice.
                let mut i = *at;
                while entries.get(i).is_some_and(|e| id(e) == object) {
                    found = Some(i);
                    i += 1;
                }
                if *strict && found.is_some() {
                    // Listed once on both sides: the next object lies after this one.
                    *at = i;
                }
                found
            }
        }
    }
}

/// One version of one entry's status, as sealed: an entry keeps its revision while its status
/// stays equal across publications and gets a new one when it changes. Revisions are unique
/// in the process, so equal revisions mean equal statuses, even between reports sealed from
/// different predecessors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Revision(u64);

impl Revision {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// A report as published: transition times carried over from the previous publication, and
/// the [`Revision`] of every entry's status. Immutable: a changed report is sealed again, so a
/// revision always matches its entry. Reads as the [`StatusReport`] it holds.
#[derive(Debug, Clone, Default)]
pub struct SealedReport {
    report: StatusReport,
    revisions: Vec<Revision>,
    /// How `report` is ordered, for the next seal.
    order: Order,
}

impl SealedReport {
    /// Every entry with the revision of its status.
    pub fn entries_with_revisions(&self) -> impl Iterator<Item = (&ObjectStatus, Revision)> {
        self.report
            .entries
            .iter()
            .zip(self.revisions.iter().copied())
    }
}

impl From<StatusReport> for SealedReport {
    /// A report sealed without a previous publication: its times are its own.
    fn from(report: StatusReport) -> Self {
        report.seal(&SealedReport::default())
    }
}

impl std::ops::Deref for SealedReport {
    type Target = StatusReport;

    fn deref(&self) -> &StatusReport {
        &self.report
    }
}

impl Serialize for SealedReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.report.serialize(serializer)
    }
}

#[cfg(test)]
mod tests;
