//! Reflectors: one store per declared kind (see [`crate::kinds`](mod@crate::kinds)), all feeding one
//! [`Trigger`] with the objects each event changed, and the loop that keeps a snapshot of the
//! stores, patching the previous one with those objects on every change. Owns no Gateway API
//! rule; it only copies `Arc`s out of the stores.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::{watch, Notify};

use super::binding::bindings_from_services;
use super::changes::{Changed, Changes, KindKey};
use super::retry::{with_backoff, NotServedAsEmpty, RetryPolicy};
use super::stores::Open;
pub use super::stores::Stores;
use crate::kinds::{Kind, KindSet};
use crate::metrics::Metrics;
use crate::snapshot::Snapshot;

/// Wakes the snapshot loop. Any number of fires before the loop looks again count as one, so a
/// burst of watch events costs one rebuild, never a queue. The objects the events changed are
/// noted beside ([`Trigger::note`]), for the loop to patch its previous snapshot with.
/// It also keeps when the oldest fire not yet sent in a snapshot happened, for the propagation
/// lag (`edgeplane_propagation_seconds`) of a trigger made [`Trigger::reporting`].
#[derive(Debug, Clone, Default)]
pub struct Trigger(Arc<Notify>, Arc<Fired>);

/// The oldest fire not yet sent, where snapshots' receive times are reported, and the changes
/// noted since the loop last looked.
#[derive(Debug, Default)]
struct Fired {
    since: std::sync::Mutex<Option<std::time::Instant>>,
    metrics: Option<Arc<Metrics>>,
    changes: Changes,
}

impl Trigger {
    /// A trigger whose snapshots' receive times go to `metrics` (propagation lag).
    pub fn reporting(metrics: Arc<Metrics>) -> Self {
        let fired = Fired {
            since: Default::default(),
            metrics: Some(metrics),
            changes: Changes::default(),
        };
        Self(Arc::default(), Arc::new(fired))
    }

    /// Schedules one snapshot (a single permit is kept while the loop is busy).
    pub fn fire(&self) {
        let mut since = self.1.since.lock().unwrap_or_else(|p| p.into_inner());
        since.get_or_insert_with(std::time::Instant::now);
        drop(since);
        self.0.notify_one();
    }

    /// Notes what `event` changed in its store (which it has already applied), for the next
    /// snapshot; then [`Trigger::fire`] schedules that snapshot.
    pub fn note<K: Resource<DynamicType = ()>>(&self, event: &Event<K>) {
        self.1.changes.note(event);
    }

    /// The changes noted since the last call.
    fn changes(&self) -> std::collections::HashMap<KindKey, Changed> {
        self.1.changes.take()
    }

    /// Called before a snapshot is taken from the stores: when the oldest change it will
    /// carry was fired (the stores hold every change fired so far; later fires start anew).
    fn taking(&self) -> Option<std::time::Instant> {
        self.1
            .since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Called before `snapshot`, taken when [`Trigger::taking`] returned `at`, is sent.
    fn sending<S>(&self, snapshot: &S, at: Option<std::time::Instant>) {
        if let (Some(at), Some(m)) = (at, &self.1.metrics) {
            m.received.mark(snapshot, at);
        }
    }

    /// Resolves at the next fire, or at once if one happened since the last wait.
    pub async fn fired(&self) {
        self.0.notified().await;
    }
}

/// Starts a reflector for `K`: a watcher retried with `retry` (see [`with_backoff`]), a kind
/// the API server does not serve taken as empty ([`NotServedAsEmpty`]), `managedFields`
/// stripped, reflected into a store. The returned future drives it; every raw event that
/// changes the store fires `trigger` (including `InitDone`, where a relist reveals deletes
/// missed while disconnected). [`reflectors`] calls it for every kind a set declares.
pub fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
    retry: RetryPolicy,
    trigger: Trigger,
    metrics: Arc<Metrics>,
) -> (Store<K>, BoxFuture<'static, ()>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let dt = ();
    let kind = K::kind(&dt).into_owned();
    let gauge = metrics.watch_kind_available.with_label_values(&[&kind]);
    // Present at 0 from the start: the kinds watched are known.
    metrics.control.watch_events.with_label_values(&[&kind]);
    metrics.control.watch_restarts.with_label_values(&[&kind]);
    let mut served = NotServedAsEmpty::new(&kind, &K::group(&dt), gauge);
    let stream = with_backoff(watcher(api, config), retry)
        .flat_map(move |item| futures_util::stream::iter(served.map(item)))
        .modify(|o: &mut K| o.managed_fields_mut().clear())
        .reflect(writer);
    (reader, drive(stream, kind, trigger, metrics))
}

fn drive<K, S>(
    stream: S,
    kind: String,
    trigger: Trigger,
    metrics: Arc<Metrics>,
) -> BoxFuture<'static, ()>
where
    K: Resource<DynamicType = ()> + Send + 'static,
    S: futures_util::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
{
    async move {
        let events = metrics.control.watch_events.with_label_values(&[&kind]);
        let restarts = metrics.control.watch_restarts.with_label_values(&[&kind]);
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match &event {
                Ok(Event::InitApply(_) | Event::Apply(_) | Event::Delete(_)) => events.inc(),
                Ok(Event::Init | Event::InitDone) => {}
                Err(_) => restarts.inc(),
            }
            match event {
                // The store swaps its contents at InitDone; nothing to rebuild before.
                Ok(Event::Init | Event::InitApply(_)) => {}
                Ok(changed @ (Event::InitDone | Event::Apply(_) | Event::Delete(_))) => {
                    trigger.note(&changed);
                    trigger.fire();
                }
                Err(e) => {
                    metrics
                        .config_errors
                        .with_label_values(&["kubernetes"])
                        .inc();
                    tracing::warn!(kind, error = %e, "watch failed; retrying with backoff");
                }
            }
        }
    }
    .boxed()
}

/// The stores and the futures that fill them.
pub struct Reflectors<S = Snapshot> {
    pub stores: Stores<S>,
    pub tasks: Vec<BoxFuture<'static, ()>>,
}

/// Opens stores as reflectors, cluster-wide, collecting the futures that drive them.
struct Reflect<'a> {
    client: &'a Client,
    retry: RetryPolicy,
    trigger: &'a Trigger,
    metrics: &'a Arc<Metrics>,
    tasks: Vec<BoxFuture<'static, ()>>,
}

impl Open for Reflect<'_> {
    fn objects<K: Kind>(&mut self) -> Store<K> {
        self.start(Api::<K>::all(self.client.clone()))
    }

    fn metadata<K: Kind>(&mut self) -> Store<PartialObjectMeta<K>> {
        // `Api<PartialObjectMeta<K>>` makes metadata-only list and watch requests.
        self.start(Api::<PartialObjectMeta<K>>::all(self.client.clone()))
    }

    fn client(&self) -> Option<Client> {
        Some(self.client.clone())
    }
}

impl Reflect<'_> {
    fn start<K>(&mut self, api: Api<K>) -> Store<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let (store, task) = reflect(
            api,
            watcher::Config::default(),
            self.retry,
            self.trigger.clone(),
            self.metrics.clone(),
        );
        self.tasks.push(task);
        store
    }
}

/// Creates one reflector per kind `S` declares, as it declares it (whole objects or metadata
/// only), cluster-wide, each retried with `retry`. Nothing runs until the tasks are polled.
pub fn reflectors<S: KindSet>(
    client: &Client,
    retry: RetryPolicy,
    trigger: &Trigger,
    metrics: &Arc<Metrics>,
) -> Reflectors<S> {
    let mut reflect = Reflect {
        client,
        retry,
        trigger,
        metrics,
        tasks: Vec::new(),
    };
    let stores = Stores::open(&mut reflect);
    Reflectors {
        stores,
        tasks: reflect.tasks,
    }
}

/// What the cluster adds to a [`Snapshot`] besides objects: the bound ports of each Gateway,
/// from the Service the leader keeps for it in its namespace.
pub fn bind_gateways(snapshot: &mut Snapshot) {
    let bindings = bindings_from_services(&snapshot.services, &snapshot.gateways);
    snapshot.gateway_bindings = Some(Arc::new(bindings));
}

/// Waits for every store's first list, then sends a snapshot at once, after every trigger
/// that changed an object (a relist that found what was cached, a kind still not served, a
/// watch that reconnected publish nothing), and after every `resync` regardless, until the
/// receiver side is gone. The first snapshot, and the one after each `resync`, is read whole
/// from the stores; in between, the previous one is patched with the objects the watch events
/// named ([`Stores::patch`]), so a change costs in proportion to itself. Referenced objects
/// are fetched into each snapshot (only those whose resourceVersion changed cost an API call),
/// then `finish` adds what is not an object (a [`Snapshot`]'s Gateway bindings:
/// [`bind_gateways`], derived from its objects).
pub async fn run_snapshots<S: KindSet>(
    stores: Stores<S>,
    trigger: Trigger,
    tx: watch::Sender<Arc<S>>,
    resync: Duration,
    finish: impl Fn(&mut S) + Send,
) {
    if stores.wait_until_ready().await.is_err() {
        return;
    }
    tracing::info!("initial list of every kind complete");
    // The initial lists are not changes to measure the propagation of.
    trigger
        .1
        .since
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    // The last snapshot taken, before `finish`.
    let mut last: Option<S> = None;
    let mut resynced = false;
    while !tx.is_closed() {
        let fired = trigger.taking();
        // Taken before the stores are read: a change noted later is already in them, and is
        // read again next time.
        let changes = trigger.changes();
        let started = std::time::Instant::now();
        let (mut snapshot, changed) = match last.take() {
            Some(mut snapshot) if !resynced => {
                let changed = stores.patch(&mut snapshot, &changes).await;
                (snapshot, changed)
            }
            _ => {
                let mut snapshot = stores.snapshot();
                stores.fetch_referenced(&mut snapshot).await;
                (snapshot, true)
            }
        };
        // Where a propagation's time goes: waiting for the loop, then taking the snapshot.
        let waited = fired.map_or(Duration::ZERO, |f| started.saturating_duration_since(f));
        tracing::debug!(
            waited_us = waited.as_micros() as u64,
            take_us = started.elapsed().as_micros() as u64,
            changed,
            "snapshot taken from the stores"
        );
        last = Some(snapshot.clone());
        if changed || resynced {
            finish(&mut snapshot);
            let snapshot = Arc::new(snapshot);
            trigger.sending(&*snapshot, fired);
            if tx.send(snapshot).is_err() {
                return;
            }
        } else {
            tracing::debug!("no object changed; nothing to publish");
        }
        resynced = tokio::select! {
            () = trigger.fired() => false,
            () = tokio::time::sleep(resync) => {
                tracing::debug!("periodic resync");
                true
            }
        };
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::any::Any;

    use gateway_api::apis::standard::gateways::Gateway;
    use k8s_openapi::api::core::v1::Namespace;
    use kube::runtime::reflector::store::Writer;

    use super::*;

    fn gateway(ns: &str, name: &str, deleting: bool) -> Gateway {
        let mut g: Gateway = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": ns, "name": name, "resourceVersion": "1"},
            "spec": {"gatewayClassName": "c", "listeners": []}
        }))
        .unwrap();
        if deleting {
            g.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
            );
        }
        g
    }

    /// Bare stores, without a server; their writers are kept so tests can fill them.
    #[derive(Default)]
    pub(in crate::provider::kube) struct Bare(Vec<Box<dyn Any>>);

    impl Open for Bare {
        fn objects<K: Kind>(&mut self) -> Store<K> {
            let (reader, writer) = reflector::store::<K>();
            self.0.push(Box::new(writer));
            reader
        }

        fn metadata<K: Kind>(&mut self) -> Store<PartialObjectMeta<K>> {
            self.objects::<PartialObjectMeta<K>>()
        }

        fn client(&self) -> Option<Client> {
            None
        }
    }

    impl Bare {
        pub(in crate::provider::kube) fn writer<K: Resource<DynamicType = ()> + Clone + 'static>(
            &mut self,
        ) -> &mut Writer<K> {
            self.0
                .iter_mut()
                .find_map(|w| w.downcast_mut())
                .expect("a writer of that kind")
        }
    }

    #[test]
    fn relist_drops_objects_deleted_while_disconnected_and_skips_deleting_gateways() {
        let mut bare = Bare::default();
        let stores: Stores = Stores::open(&mut bare);
        let w = bare.writer::<Gateway>();
        w.apply_watcher_event(&Event::Init);
        w.apply_watcher_event(&Event::InitApply(gateway("a", "one", false)));
        w.apply_watcher_event(&Event::InitApply(gateway("a", "two", false)));
        w.apply_watcher_event(&Event::InitApply(gateway("a", "gone", true)));
        w.apply_watcher_event(&Event::InitDone);
        let mut snap = stores.snapshot();
        bind_gateways(&mut snap);
        let mut names: Vec<_> = snap.gateways.iter().map(|g| g.name_any()).collect();
        names.sort();
        assert_eq!(names, ["one", "two"]);
        assert!(snap.gateway_bindings.as_ref().unwrap().is_empty());
        // A relist that no longer contains "two": the store swaps at InitDone, not before.
        w.apply_watcher_event(&Event::Init);
        w.apply_watcher_event(&Event::InitApply(gateway("a", "one", false)));
        assert_eq!(stores.snapshot().gateways.len(), 2);
        w.apply_watcher_event(&Event::InitDone);
        let snap = stores.snapshot();
        assert_eq!(snap.gateways.len(), 1);
        assert_eq!(snap.gateways[0].name_any(), "one");
        assert!(stores.gateway("a", "one").is_some());
    }

    #[test]
    fn metadata_kinds_carry_only_metadata_and_referenced_kinds_wait_for_a_fetch() {
        let mut bare = Bare::default();
        let stores: Stores = Stores::open(&mut bare);
        let ns: PartialObjectMeta<Namespace> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "labels": {"team": "a"}, "resourceVersion": "1"}
        }))
        .unwrap();
        let w = bare.writer::<PartialObjectMeta<Namespace>>();
        w.apply_watcher_event(&Event::Init);
        w.apply_watcher_event(&Event::InitApply(ns));
        w.apply_watcher_event(&Event::InitDone);
        let snap = stores.snapshot();
        assert_eq!(snap.namespaces.len(), 1);
        let labels = snap.namespaces[0].metadata.labels.as_ref().unwrap();
        assert_eq!(labels["team"], "a");
        assert!(snap.namespaces[0].spec.is_none());
        assert_eq!(stores.of::<Namespace>().state().len(), 1);
        // Secrets are watched as metadata and only fetched when referenced.
        assert!(snap.secrets.is_empty());
    }

    #[tokio::test]
    async fn trigger_coalesces_bursts() {
        let t = Trigger::default();
        for _ in 0..10 {
            t.fire();
        }
        tokio::time::timeout(Duration::from_millis(10), t.fired())
            .await
            .expect("first wait sees the burst");
        let second = tokio::time::timeout(Duration::from_millis(10), t.fired()).await;
        assert!(second.is_err(), "a burst counts once");
    }
}
