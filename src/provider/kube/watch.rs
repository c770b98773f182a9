//! Reflectors: one store per kind the translator reads, all feeding one [`Trigger`], and the loop
//! that assembles a whole [`Snapshot`] from the stores on every change (level-triggered).
//! Owns no Gateway API rule; it only copies `Arc`s out of the stores.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::{watch, Notify};

use super::binding::bindings_from_services;
use super::secrets::{SecretCache, SecretMetaStore};
use crate::metrics::Metrics;
use crate::snapshot::Snapshot;
use crate::translate::referenced_secrets;

/// Wakes the snapshot loop. Any number of fires before the loop looks again count as one, so a
/// burst of watch events costs one rebuild, never a queue.
#[derive(Debug, Clone, Default)]
pub struct Trigger(Arc<Notify>);

impl Trigger {
    /// Schedules one snapshot (a single permit is kept while the loop is busy).
    pub fn fire(&self) {
        self.0.notify_one();
    }

    /// Resolves at the next fire, or at once if one happened since the last wait.
    pub async fn fired(&self) {
        self.0.notified().await;
    }
}

/// Starts a reflector for `K`: a watcher with backoff, `managedFields` stripped, reflected into
/// a store. The returned future drives it; every raw event that changes the store fires
/// `trigger` (including `InitDone`, where a relist reveals deletes missed while disconnected).
/// New kinds plug in by calling this with their `Api`.
pub fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
    trigger: Trigger,
    metrics: Arc<Metrics>,
) -> (Store<K>, BoxFuture<'static, ()>)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|o: &mut K| o.managed_fields_mut().clear())
        .reflect(writer);
    (
        reader,
        drive(
            stream,
            K::kind(&K::DynamicType::default()).into_owned(),
            trigger,
            metrics,
        ),
    )
}

fn drive<K, S>(
    stream: S,
    kind: String,
    trigger: Trigger,
    metrics: Arc<Metrics>,
) -> BoxFuture<'static, ()>
where
    K: Send + 'static,
    S: futures_util::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
{
    async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                // The store swaps its contents at InitDone; nothing to rebuild before.
                Ok(Event::Init | Event::InitApply(_)) => {}
                Ok(Event::InitDone | Event::Apply(_) | Event::Delete(_)) => trigger.fire(),
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

/// Readers of every store. Cheap to clone; shared by the snapshot loop, the status writer and
/// the side-object keeper.
#[derive(Clone)]
pub struct Stores {
    pub gateway_classes: Store<GatewayClass>,
    pub gateways: Store<Gateway>,
    pub http_routes: Store<HttpRoute>,
    pub reference_grants: Store<ReferenceGrant>,
    pub namespaces: Store<PartialObjectMeta<Namespace>>,
    pub services: Store<Service>,
    pub endpoint_slices: Store<EndpointSlice>,
    pub secrets: SecretMetaStore,
}

/// The stores and the futures that fill them.
pub struct Reflectors {
    pub stores: Stores,
    pub tasks: Vec<BoxFuture<'static, ()>>,
}

/// Creates one reflector per kind, cluster-wide. Nothing runs until the tasks are polled.
pub fn reflectors(client: &Client, trigger: &Trigger, metrics: &Arc<Metrics>) -> Reflectors {
    let cfg = watcher::Config::default;
    let mut tasks = Vec::new();
    macro_rules! full {
        ($k:ty) => {{
            let (s, t) = reflect(
                Api::<$k>::all(client.clone()),
                cfg(),
                trigger.clone(),
                metrics.clone(),
            );
            tasks.push(t);
            s
        }};
    }
    macro_rules! meta {
        ($k:ty) => {{
            // `Api<PartialObjectMeta<K>>` makes metadata-only list and watch requests.
            let (s, t) = reflect(
                Api::<PartialObjectMeta<$k>>::all(client.clone()),
                cfg(),
                trigger.clone(),
                metrics.clone(),
            );
            tasks.push(t);
            s
        }};
    }
    let stores = Stores {
        gateway_classes: full!(GatewayClass),
        gateways: full!(Gateway),
        http_routes: full!(HttpRoute),
        reference_grants: full!(ReferenceGrant),
        namespaces: meta!(Namespace),
        services: full!(Service),
        endpoint_slices: full!(EndpointSlice),
        secrets: meta!(k8s_openapi::api::core::v1::Secret),
    };
    Reflectors { stores, tasks }
}

impl Stores {
    /// Resolves once every store has completed its first list.
    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.gateway_classes.wait_until_ready().await?;
        self.gateways.wait_until_ready().await?;
        self.http_routes.wait_until_ready().await?;
        self.reference_grants.wait_until_ready().await?;
        self.namespaces.wait_until_ready().await?;
        self.services.wait_until_ready().await?;
        self.endpoint_slices.wait_until_ready().await?;
        self.secrets.wait_until_ready().await?;
        Ok(())
    }

    /// The whole current input of the translator. Gateways being deleted are left out, so every
    /// replica unbinds their listeners before the finalizer lets them go; Services of the
    /// controller's namespace labelled for a Gateway give each Gateway its bound ports.
    pub fn snapshot(&self, controller_namespace: &str) -> Snapshot {
        let gateways: Vec<Arc<Gateway>> = self
            .gateways
            .state()
            .into_iter()
            .filter(|g| g.metadata.deletion_timestamp.is_none())
            .collect();
        let services = self.services.state();
        let bindings = bindings_from_services(&services, controller_namespace, &gateways);
        Snapshot {
            gateway_classes: self.gateway_classes.state(),
            gateways,
            http_routes: self.http_routes.state(),
            reference_grants: self.reference_grants.state(),
            namespaces: self
                .namespaces
                .state()
                .iter()
                .map(|m| {
                    Arc::new(Namespace {
                        metadata: m.metadata.clone(),
                        ..Namespace::default()
                    })
                })
                .collect(),
            services,
            endpoint_slices: self.endpoint_slices.state(),
            gateway_bindings: Some(Arc::new(bindings)),
            // Filled by the snapshot loop, which fetches referenced Secrets.
            secrets: Vec::new(),
        }
    }

    /// The current Gateway `namespace/name`, if cached.
    pub fn gateway(&self, namespace: &str, name: &str) -> Option<Arc<Gateway>> {
        self.gateways.get(&ObjectRef::new(name).within(namespace))
    }
}

/// Waits for every store's first list, then sends a snapshot at once and again after every
/// trigger and every `resync`, until the receiver side is gone. Referenced Secrets are fetched
/// into each snapshot (only those whose resourceVersion changed cost an API call).
pub async fn run_snapshots(
    stores: Stores,
    mut secrets: SecretCache,
    trigger: Trigger,
    tx: watch::Sender<Arc<Snapshot>>,
    controller_namespace: String,
    resync: Duration,
) {
    if stores.wait_until_ready().await.is_err() {
        return;
    }
    tracing::info!("initial list of every kind complete");
    loop {
        let mut snapshot = stores.snapshot(&controller_namespace);
        let wanted = referenced_secrets(&snapshot.gateways, &snapshot.reference_grants);
        snapshot.secrets = secrets.referenced(&wanted).await;
        if tx.send(Arc::new(snapshot)).is_err() {
            return;
        }
        tokio::select! {
            () = trigger.fired() => {}
            () = tokio::time::sleep(resync) => tracing::debug!("periodic resync"),
        }
    }
}

#[cfg(test)]
mod tests {
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

    fn stores() -> (Stores, Vec<Box<dyn std::any::Any>>) {
        // Writers are kept alive so the readers stay valid.
        let (gc, gcw) = reflector::store::<GatewayClass>();
        let (g, gw) = reflector::store::<Gateway>();
        let (r, rw) = reflector::store::<HttpRoute>();
        let (rg, rgw) = reflector::store::<ReferenceGrant>();
        let (n, nw) = reflector::store::<PartialObjectMeta<Namespace>>();
        let (s, sw) = reflector::store::<Service>();
        let (e, ew) = reflector::store::<EndpointSlice>();
        let (sec, secw) = reflector::store();
        let writers: Vec<Box<dyn std::any::Any>> = vec![
            Box::new(gcw),
            Box::new(gw),
            Box::new(rw),
            Box::new(rgw),
            Box::new(nw),
            Box::new(sw),
            Box::new(ew),
            Box::new(secw),
        ];
        (
            Stores {
                gateway_classes: gc,
                gateways: g,
                http_routes: r,
                reference_grants: rg,
                namespaces: n,
                services: s,
                endpoint_slices: e,
                secrets: sec,
            },
            writers,
        )
    }

    #[test]
    fn relist_drops_objects_deleted_while_disconnected_and_skips_deleting_gateways() {
        let (stores, mut writers) = stores();
        let w = writers[1]
            .downcast_mut::<reflector::store::Writer<Gateway>>()
            .unwrap();
        w.apply_watcher_event(&Event::Init);
        w.apply_watcher_event(&Event::InitApply(gateway("a", "one", false)));
        w.apply_watcher_event(&Event::InitApply(gateway("a", "two", false)));
        w.apply_watcher_event(&Event::InitApply(gateway("a", "gone", true)));
        w.apply_watcher_event(&Event::InitDone);
        let snap = stores.snapshot("edgeplane-system");
        let mut names: Vec<_> = snap.gateways.iter().map(|g| g.name_any()).collect();
        names.sort();
        assert_eq!(names, ["one", "two"]);
        assert!(snap.gateway_bindings.as_ref().unwrap().is_empty());
        // A relist that no longer contains "two": the store swaps at InitDone, not before.
        w.apply_watcher_event(&Event::Init);
        w.apply_watcher_event(&Event::InitApply(gateway("a", "one", false)));
        assert_eq!(stores.snapshot("x").gateways.len(), 2);
        w.apply_watcher_event(&Event::InitDone);
        let snap = stores.snapshot("x");
        assert_eq!(snap.gateways.len(), 1);
        assert_eq!(snap.gateways[0].name_any(), "one");
        assert!(stores.gateway("a", "one").is_some());
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
