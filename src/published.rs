//! What the process currently serves: the live route table, the status computed with it,
//! readiness, the publication counter and a short ring of recent reconciles. The reconciler is
//! the one writer; the proxy, the admin and dashboard servers and the Kubernetes provider
//! (status writer, side objects) read it through accessors and never change it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use serde::Serialize;
use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::status::SealedReport;
use crate::table::RouteTable;

/// The current publication. Readers load the table or status and subscribe to the counter;
/// only the reconciler's side calls the `publish_*`, `mark_ready` and `announce*` methods.
#[derive(Debug)]
pub struct Published {
    table: Arc<ArcSwap<RouteTable>>,
    status: ArcSwap<SealedReport>,
    ready: AtomicBool,
    metrics: Arc<Metrics>,
    generation: watch::Sender<u64>,
    reconciles: Mutex<VecDeque<Reconcile>>,
}

/// How many reconciles [`Published::recent_reconciles`] keeps.
pub const RECENT_RECONCILES: usize = 32;

/// One reconcile, as the dashboard lists it: when it ended, how long it took and what came of
/// it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reconcile {
    /// End of the reconcile, Unix milliseconds.
    pub at_unix_ms: i64,
    /// From the snapshot's arrival at the translator to the table and status published.
    pub seconds: f64,
    /// The generation published (the previous one when it failed).
    pub generation: u64,
    /// Rules in the published table.
    pub rules: usize,
    /// Objects with a problem in their status.
    pub problems: usize,
    /// Why nothing was published, when the reconcile failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Published {
    /// Nothing published yet: an empty table, no status, not ready.
    pub fn new(metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self {
            table: Arc::new(ArcSwap::from_pointee(RouteTable::default())),
            status: ArcSwap::from_pointee(SealedReport::default()),
            ready: AtomicBool::new(false),
            metrics,
            generation: watch::Sender::new(0),
            reconciles: Mutex::new(VecDeque::with_capacity(RECENT_RECONCILES)),
        })
    }

    /// The latest reconciles, oldest first (at most [`RECENT_RECONCILES`]).
    pub fn recent_reconciles(&self) -> Vec<Reconcile> {
        self.reconciles
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Reconciler side: remembers one reconcile, forgetting the oldest beyond
    /// [`RECENT_RECONCILES`].
    pub fn record_reconcile(&self, reconcile: Reconcile) {
        if let Ok(mut ring) = self.reconciles.lock() {
            if ring.len() >= RECENT_RECONCILES {
                ring.pop_front();
            }
            ring.push_back(reconcile);
        }
    }

    /// The live route table.
    pub fn table(&self) -> Arc<RouteTable> {
        self.table.load_full()
    }

    /// The cell the proxy loads the live table from, once per request, without going through
    /// this struct. Only the reconciler stores into it.
    pub fn shared_table(&self) -> Arc<ArcSwap<RouteTable>> {
        self.table.clone()
    }

    /// The status computed with the live table (transition times carried, revisions given).
    pub fn status(&self) -> Arc<SealedReport> {
        self.status.load_full()
    }

    /// Whether the first full table has been published (`/readyz`).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The process's metrics, updated with every publication.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Follows publications without polling: the receiver sees the generation of each new
    /// table, and the same value again when only the status is republished (a failed socket
    /// bound on retry). The status writer and the side-object keeper wake on it.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Reconciler side: resolves the table's metric label handles (see
    /// [`Metrics::attach`]) and records its publication (the propagation lag is observed
    /// just before the swap, so no request served by the table can see /metrics without
    /// it), then swaps it in; returns the previous one, to be freed off the async workers.
    pub fn publish_table(&self, table: Arc<RouteTable>) -> Arc<RouteTable> {
        self.metrics.attach(&table);
        self.metrics.table_published();
        self.table.swap(table)
    }

    /// Reconciler side: swaps a new status in; returns the previous one, to be freed off the
    /// async workers.
    pub fn publish_status(&self, status: SealedReport) -> Arc<SealedReport> {
        self.status.swap(Arc::new(status))
    }

    /// Reconciler side: the first full table is published.
    pub fn mark_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// Reconciler side: tells subscribers that `generation` is published.
    pub fn announce(&self, generation: u64) {
        self.generation.send_replace(generation);
    }

    /// Reconciler side: tells subscribers that the status changed for the same table.
    pub fn announce_status(&self) {
        self.generation.send_modify(|_| {});
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{ObjectKind, ObjectStatus, StatusReport};

    #[test]
    fn readers_see_what_the_reconciler_side_published() {
        let p = Published::new(Metrics::new());
        let mut followers = p.subscribe();
        assert!(!p.is_ready());
        assert!(p.status().entries.is_empty());
        let table = RouteTable {
            generation: 3,
            ..RouteTable::default()
        };
        assert_eq!(p.publish_table(Arc::new(table)).generation, 0);
        assert_eq!(p.table().generation, 3);
        assert_eq!(p.shared_table().load().generation, 3);
        let entry = ObjectStatus::new(
            ObjectKind::GatewayClass,
            None,
            "c",
            None,
            Default::default(),
        );
        let report = StatusReport {
            entries: vec![entry],
        };
        p.publish_status(report.into());
        assert_eq!(p.status().entries.len(), 1);
        p.mark_ready();
        assert!(p.is_ready());
        p.announce(3);
        assert!(followers.has_changed().unwrap());
        assert_eq!(*followers.borrow_and_update(), 3);
        p.announce_status();
        assert!(followers.has_changed().unwrap());
        assert_eq!(*followers.borrow_and_update(), 3);
    }

    #[test]
    fn the_reconcile_ring_keeps_the_latest() {
        let p = Published::new(Metrics::new());
        assert!(p.recent_reconciles().is_empty());
        for generation in 0..(RECENT_RECONCILES as u64 + 5) {
            p.record_reconcile(Reconcile {
                at_unix_ms: 0,
                seconds: 0.001,
                generation,
                rules: 1,
                problems: 0,
                error: None,
            });
        }
        let kept = p.recent_reconciles();
        assert_eq!(kept.len(), RECENT_RECONCILES);
        assert_eq!(kept[0].generation, 5);
        assert_eq!(
            kept.last().unwrap().generation,
            RECENT_RECONCILES as u64 + 4
        );
    }
}
