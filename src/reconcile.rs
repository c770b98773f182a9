//! The reconcile loop: every new snapshot is translated whole (reusing, through the
//! translator's `Incremental` memory, what unchanged inputs produced last time), its table and
//! status published atomically, and the proxy's listeners brought in line. Level-triggered: it
//! never looks at what changed, and snapshots that arrive during a rebuild coalesce into one
//! follow-up rebuild.
//! Between rebuilds it retries the sockets the proxy could not bind, and republishes the status
//! when that changes anything: status is what the listener manager did, not what it was asked.
//! Translation, status sealing and the freeing of replaced tables and reports run on one
//! long-lived thread of the loop's own (`worker`), never on the async workers.

mod worker;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;

use crate::problem_log::{log_changes, Sources};
use crate::proxy::{ListenerError, Proxy};
use crate::snapshot::Snapshot;
use crate::status::problems::ProblemSet;
use crate::status::{ObjectKind, ObjectStatus, StatusReport};
use crate::table::ServedCertificates;
use crate::translate::{
    apply_bind_failures, apply_udp_bind_failures, Incremental, PortMap, TranslateOptions,
    Translation,
};

/// Where publications go; it lives in its own module so readers do not depend on the loop.
pub use crate::published::Published;
use crate::published::Reconcile;
use worker::Worker;
pub use worker::WorkerError;

/// A rebuild that published nothing; the previous table keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("translation failed: {0}")]
    Translate(String),
}

/// Settings of every translation this process makes.
#[derive(Debug, Clone)]
pub struct ReconcileOptions {
    pub controller_name: String,
    /// Which Ingresses are ours and which Gateway serves them.
    pub ingress: crate::translate::ingress::IngressOptions,
    pub bind_address: IpAddr,
    /// Standalone mode's `--port-map`: the local port each Gateway listener port binds.
    pub port_map: PortMap,
    /// Where objects were read from, named in the log lines of problems.
    pub sources: Sources,
    /// What the running mode can do (the GatewayClass's `supportedFeatures` follow it).
    pub capabilities: crate::translate::Capabilities,
}

/// What one publication did, for logs and tests.
#[derive(Debug)]
pub struct Rebuilt {
    pub generation: u64,
    pub rules: usize,
    /// Number of conditions reporting a problem.
    pub problems: usize,
    pub bind_errors: Vec<ListenerError>,
}

/// Turns snapshots into published tables. Holds the generation counter across rebuilds.
pub struct Reconciler {
    published: Arc<Published>,
    proxy: Option<Arc<Proxy>>,
    options: ReconcileOptions,
    generation: u64,
    /// The translator's Gateway statuses of the live table (with their index in the report),
    /// before the bind outcome was overlaid: a retry that changes it recomputes from them.
    gateways: Vec<(usize, ObjectStatus)>,
    /// What earlier translations computed from inputs that may still be unchanged; empty
    /// after a translation that failed, so the next one is full.
    memory: Incremental,
    /// Where translations run and old tables and reports are freed.
    worker: Worker,
    /// The problems of the published status, to log only those that appear or clear.
    problems: ProblemSet,
}

impl Reconciler {
    /// A reconciler publishing into `published`; without a proxy, listeners are not synced
    /// (`check`, tests).
    pub fn new(
        published: Arc<Published>,
        proxy: Option<Arc<Proxy>>,
        options: ReconcileOptions,
    ) -> Self {
        Self {
            published,
            proxy,
            options,
            generation: 0,
            gateways: Vec::new(),
            memory: Incremental::default(),
            worker: Worker::start(),
            problems: ProblemSet::default(),
        }
    }

    /// Generation of the last published table (0 before the first).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Translates `snapshot` on the worker thread and publishes the result.
    pub async fn rebuild(&mut self, snapshot: Arc<Snapshot>) -> Result<Rebuilt, ReconcileError> {
        let started = Instant::now();
        let metrics = self.published.metrics().clone();
        metrics.snapshot_read(&*snapshot);
        let options = TranslateOptions {
            ingress: self.options.ingress.clone(),
            controller_name: self.options.controller_name.clone(),
            bind_address: self.options.bind_address,
            now: jiff::Timestamp::now(),
            generation: self.generation + 1,
            port_map: self.options.port_map.clone(),
            capabilities: self.options.capabilities,
        };
        // The certificates served now: a Secret updated to garbage keeps serving its last one.
        let served = ServedCertificates::of(&self.published.table());
        let mut memory = std::mem::take(&mut self.memory);
        let handles = metrics.clone();
        let (translation, memory) = self
            .worker
            .run(move || {
                let at = Instant::now();
                let translation = memory.translate(&snapshot, &options, &served);
                let translated = at.elapsed();
                // The label handles are resolved here, off the async workers, not at the swap.
                handles.attach(&translation.table);
                tracing::debug!(
                    translate_us = translated.as_micros() as u64,
                    handles_us = at.elapsed().saturating_sub(translated).as_micros() as u64,
                    "snapshot translated"
                );
                (translation, memory)
            })
            .await
            .map_err(|e| {
                metrics.reconciled("error", started);
                self.published.record_reconcile(Reconcile {
                    at_unix_ms: jiff::Timestamp::now().as_millisecond(),
                    seconds: started.elapsed().as_secs_f64(),
                    generation: self.generation,
                    rules: 0,
                    problems: 0,
                    error: Some(e.to_string()),
                });
                ReconcileError::Translate(e.to_string())
            })?;
        let reuse = memory.last();
        tracing::debug!(
            reused = reuse.reused,
            compiled = reuse.compiled,
            "routes reused from the previous translation"
        );
        self.memory = memory;
        Ok(self.publish(translation, started).await)
    }

    /// Publishes a translation: swaps the table in and syncs the proxy's listeners first, so
    /// propagation waits for nothing else; then, on the worker thread, overlays the sockets
    /// that could not be bound on the status, carries condition times over, swaps the status
    /// and frees the previous table and status. Marks the process ready and updates the
    /// metrics.
    pub async fn publish(&mut self, translation: Translation, started: Instant) -> Rebuilt {
        let Translation { mut table, status } = translation;
        self.generation += 1;
        table.generation = self.generation;
        let rules = table.rule_count();
        let table = Arc::new(table);
        let previous_table = self.published.publish_table(table.clone());
        tracing::debug!(
            since_rebuild_us = started.elapsed().as_micros() as u64,
            "route table swapped in"
        );
        let bind_errors = match &self.proxy {
            Some(proxy) => proxy.sync_listeners(&table).await,
            None => Vec::new(),
        };
        for e in &bind_errors {
            tracing::error!(addr = %e.addr, error = %e.error, "cannot bind listener");
        }
        let failures = self
            .proxy
            .as_ref()
            .map(|p| p.bind_failures())
            .unwrap_or_default();
        let udp_failures = self
            .proxy
            .as_ref()
            .map(|p| p.udp_bind_failures())
            .unwrap_or_default();
        let published = self.published.clone();
        let before = std::mem::take(&mut self.problems);
        let sources = self.options.sources.clone();
        let (problems, gateways) = self
            .worker
            .run(move || {
                // Freeing a large table or report takes long enough to stall an async worker.
                drop(previous_table);
                let mut status = status;
                let gateways = gateway_entries(&status);
                apply_bind_failures(&mut status, &table, &failures);
                apply_udp_bind_failures(&mut status, &table, &udp_failures);
                let status = status.seal(&published.status());
                let problems = ProblemSet::of(&status);
                drop(published.publish_status(status));
                log_changes(&problems.changes_from(&before), &sources);
                (problems, gateways)
            })
            .await
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "status bookkeeping failed");
                (ProblemSet::default(), Vec::new())
            });
        self.gateways = gateways;
        let problems = problems_count(&mut self.problems, problems);
        self.published.mark_ready();
        self.published.announce(self.generation);
        let m = self.published.metrics();
        m.table_generation
            .set(i64::try_from(self.generation).unwrap_or(i64::MAX));
        m.table_rules.set(i64::try_from(rules).unwrap_or(i64::MAX));
        m.record_certificates(&self.published.table());
        m.reconciled("ok", started);
        self.published.record_reconcile(Reconcile {
            at_unix_ms: jiff::Timestamp::now().as_millisecond(),
            seconds: started.elapsed().as_secs_f64(),
            generation: self.generation,
            rules,
            problems,
            error: None,
        });
        tracing::info!(
            generation = self.generation,
            rules,
            problems,
            elapsed_us = started.elapsed().as_micros() as u64,
            "route table published"
        );
        Rebuilt {
            generation: self.generation,
            rules,
            problems,
            bind_errors,
        }
    }

    /// Retries the proxy's failed sockets that are due; when that changes what is bound,
    /// recomputes the status from the translator's Gateway statuses and the new bind outcome,
    /// and republishes it (same table, same generation; followers are notified). True when it
    /// republished.
    pub async fn retry_binds(&mut self) -> bool {
        let Some(proxy) = &self.proxy else {
            return false;
        };
        if !proxy.retry_failed_binds().await {
            return false;
        }
        let failures = proxy.bind_failures();
        let udp_failures = proxy.udp_bind_failures();
        let unbound = failures.len() + udp_failures.len();
        let table = self.published.table();
        let published = self.published.clone();
        let gateways = self.gateways.clone();
        let now = jiff::Timestamp::now();
        let before = std::mem::take(&mut self.problems);
        let sources = self.options.sources.clone();
        let problems = self
            .worker
            .run(move || {
                let current = published.status();
                let mut status = StatusReport::clone(&current);
                for (i, mut raw) in gateways {
                    if let Some(slot) = status.entries.get_mut(i).filter(|e| e.same_object(&raw)) {
                        // Conditions that change now, change now.
                        raw.restamp(now);
                        *slot = raw;
                    }
                }
                apply_bind_failures(&mut status, &table, &failures);
                apply_udp_bind_failures(&mut status, &table, &udp_failures);
                let status = status.seal(&current);
                let problems = ProblemSet::of(&status);
                drop(published.publish_status(status));
                log_changes(&problems.changes_from(&before), &sources);
                problems
            })
            .await
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "status bookkeeping failed");
                ProblemSet::default()
            });
        let problems = problems_count(&mut self.problems, problems);
        self.published.announce_status();
        tracing::info!(
            generation = self.generation,
            unbound,
            problems,
            "status republished after a bind retry"
        );
        true
    }

    /// Rebuilds from the channel's current snapshot, then once per change until the sender is
    /// dropped. Changes that arrive during a rebuild are seen as one change afterwards. While
    /// sockets are unbound, retries them when their back-off is due.
    pub async fn run(mut self, mut snapshots: watch::Receiver<Arc<Snapshot>>) {
        loop {
            let snapshot = snapshots.borrow_and_update().clone();
            if let Err(e) = self.rebuild(snapshot).await {
                tracing::error!(error = %e, "keeping the previous route table");
            }
            loop {
                let retry = self.proxy.as_ref().and_then(|p| p.next_bind_retry());
                let at = retry.map_or_else(tokio::time::Instant::now, Into::into);
                tokio::select! {
                    changed = snapshots.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        break;
                    }
                    () = tokio::time::sleep_until(at), if retry.is_some() => {
                        self.retry_binds().await;
                    }
                }
            }
        }
    }
}

/// Keeps `now` as the published problems and returns how many there are.
fn problems_count(kept: &mut ProblemSet, now: ProblemSet) -> usize {
    *kept = now;
    kept.len()
}

/// The Gateway entries of a translator's report, with their index.
fn gateway_entries(report: &StatusReport) -> Vec<(usize, ObjectStatus)> {
    report
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == ObjectKind::Gateway)
        .map(|(i, e)| (i, e.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use crate::table::RouteTable;
    use serde_json::json;

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-02T00:00:00Z";
    const T2: &str = "2026-01-03T00:00:00Z";

    fn report(status: &str, time: &str) -> StatusReport {
        let status = json!({"conditions": [{"type": "Accepted", "status": status,
            "reason": "R", "message": "", "observedGeneration": 1,
            "lastTransitionTime": time}]});
        let entry = ObjectStatus::new(ObjectKind::GatewayClass, None, "c", Some(1), status.into());
        StatusReport {
            entries: vec![entry],
        }
    }

    fn reconciler() -> (Arc<Published>, Reconciler) {
        let published = Published::new(Metrics::new());
        let r = Reconciler::new(
            published.clone(),
            None,
            ReconcileOptions {
                ingress: Default::default(),
                controller_name: "x/y".into(),
                bind_address: IpAddr::from([127, 0, 0, 1]),
                port_map: Default::default(),
                sources: Default::default(),
                capabilities: crate::translate::Capabilities::STANDALONE,
            },
        );
        (published, r)
    }

    #[tokio::test]
    async fn publish_stores_table_status_and_readiness() {
        let (published, mut r) = reconciler();
        assert!(!published.is_ready());
        let t = Translation {
            table: RouteTable::default(),
            status: report("True", T0),
        };
        let out = r.publish(t, Instant::now()).await;
        assert_eq!(out.generation, 1);
        assert!(published.is_ready());
        assert_eq!(*published.subscribe().borrow(), 1);
        assert_eq!(published.table().generation, 1);
        assert_eq!(published.metrics().table_generation.get(), 1);
        let recent = published.recent_reconciles();
        assert_eq!(recent.len(), 1);
        assert_eq!(
            (recent[0].generation, recent[0].error.as_deref()),
            (1, None)
        );
        let t = Translation {
            table: RouteTable::default(),
            status: report("True", T1),
        };
        r.publish(t, Instant::now()).await;
        let status = published.status();
        assert_eq!(
            status.entries[0].status.to_json()["conditions"][0]["lastTransitionTime"],
            T0
        );
        let t = Translation {
            table: RouteTable::default(),
            status: report("False", T2),
        };
        let out = r.publish(t, Instant::now()).await;
        assert_eq!(out.generation, 3);
        assert_eq!(out.problems, 1);
        let status = published.status();
        assert_eq!(
            status.entries[0].status.to_json()["conditions"][0]["lastTransitionTime"],
            T2
        );
        assert!(published
            .metrics()
            .encode()
            .contains("edgeplane_table_generation 3"));
    }

    #[tokio::test]
    async fn run_publishes_each_snapshot() {
        let (published, r) = reconciler();
        let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
        let task = tokio::spawn(r.run(rx));
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        while !published.is_ready() && Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert!(published.is_ready());
        tx.send(Arc::new(Snapshot::default())).ok();
        while published.table().generation < 2 && Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(published.table().generation, 2);
        drop(tx);
        tokio::time::timeout(std::time::Duration::from_secs(5), task)
            .await
            .ok();
    }
}
