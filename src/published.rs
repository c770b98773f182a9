//! What the process currently serves: the live route table, the status computed with it,
//! readiness and the publication counter. The reconciler is the one writer; the proxy, the
//! admin server and the Kubernetes provider (status writer, side objects) read it through
//! accessors and never change it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
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
        })
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
}
