//! The status writer: after each publication, the leader hands every entry of the published
//! report, with the status its object carries in the cache, to [`crate::status::diff`] and
//! sends the patches it gets back; notable transitions become Events. It holds no status rule:
//! it reads caches, writes, and remembers what it compared and wrote, so an entry whose
//! revision and object are unchanged costs a lookup, and a write the cache has not yet seen is
//! not repeated (`memory`). The routes and other kinds are planned here, Ingresses'
//! `status.loadBalancer` in `ingresses`.

mod ingresses;
mod memory;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::listenersets::ListenerSet;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::Value;
use tokio::sync::watch;

use super::leader::{run_leader_pass, LeaderPass};
use super::watch::Stores;
use crate::kinds::crd::TrafficPolicy;
use crate::kinds::routes::{RouteKind, RouteKindId, RouteVisitor};
use crate::published::Published;
use crate::snapshot::or_default_namespace;
use crate::status::diff::{self, Carried, DiffError, StatusPatch};
use crate::status::ingress;
use crate::status::{ObjectKind, ObjectStatus, Revision, SealedReport};
use memory::{Memory, ObjectKey, Write};

/// How many status patches are in flight at once.
const CONCURRENT_WRITES: usize = 16;

/// A status write failed; the next publication or the retry timer tries again.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("not the leader any more")]
    NotLeader,
    #[error("patch status of {kind} {object}: {source}")]
    Patch {
        kind: ObjectKind,
        object: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// Routes (kind, namespace, name) whose entry the report has.
type Seen = HashSet<(RouteKindId, Option<String>, String)>;

/// [`StatusWriter::plan_route`] for the route kind the entry names.
struct PlanRoute<'w, 'e> {
    writer: &'w mut StatusWriter,
    entry: &'e ObjectStatus,
    revision: Option<Revision>,
    seen: &'w mut Seen,
}

impl RouteVisitor for PlanRoute<'_, '_> {
    type Out = Option<Write>;
    fn route<K: RouteKind>(self) -> Self::Out {
        self.writer
            .plan_route::<K>(self.entry, self.revision, self.seen)
    }
}

/// [`StatusWriter::release_stale`] for one route kind.
struct ReleaseStale<'w> {
    writer: &'w mut StatusWriter,
    seen: &'w Seen,
}

impl RouteVisitor for ReleaseStale<'_> {
    type Out = Vec<Write>;
    fn route<K: RouteKind>(self) -> Self::Out {
        self.writer.release_stale::<K>(self.seen)
    }
}

/// The API resource of a route kind, for its status patch.
struct ResourceOf;

impl RouteVisitor for ResourceOf {
    type Out = ApiResource;
    fn route<K: RouteKind>(self) -> Self::Out {
        ApiResource::erase::<K>(&())
    }
}

/// The leader-only writer of statuses.
pub struct StatusWriter {
    client: Client,
    stores: Stores,
    published: Arc<Published>,
    leader: watch::Receiver<bool>,
    controller_name: String,
    recorder: Recorder,
    memory: Memory,
    /// The `Unsupported` message last recorded as an Event per Ingress, so each is recorded
    /// once; and the Events of the pass being planned.
    ingress_events: HashMap<ObjectKey, String>,
    pending_events: Vec<(ObjectReference, String)>,
    /// The `status.loadBalancer.ingress` last asked for per Ingress of ours: what is cleared
    /// when it stops being ours.
    ingress_written: HashMap<ObjectKey, Vec<Value>>,
}

impl StatusWriter {
    pub fn new(
        client: Client,
        stores: Stores,
        published: Arc<Published>,
        leader: watch::Receiver<bool>,
        controller_name: String,
        recorder: Recorder,
    ) -> Self {
        Self {
            client,
            stores,
            published,
            leader,
            controller_name,
            recorder,
            memory: Memory::default(),
            ingress_events: HashMap::new(),
            pending_events: Vec::new(),
            ingress_written: HashMap::new(),
        }
    }

    /// Writes after every publication while leading; retries a failed pass after `retry`.
    pub async fn run(self, retry: Duration) {
        let (published, leader) = (self.published.clone(), self.leader.clone());
        run_leader_pass(self, published, leader, retry).await;
    }

    /// One pass over every status. True when every write succeeded.
    pub async fn sync(&mut self) -> bool {
        let report = self.published.status();
        let (writes, live) = self.plan(&report);
        self.memory.retain(&live);
        self.ingress_events.retain(|k, _| live.contains(k));
        self.ingress_written.retain(|k, _| live.contains(k));
        let count = writes.len();
        let results: Vec<_> = futures_util::stream::iter(writes.into_iter().map(|w| self.apply(w)))
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
        let mut ok = true;
        for r in results {
            match r {
                Ok(w) => self.memory.wrote(w),
                Err(StatusError::NotLeader) => {}
                Err(e) => {
                    ok = false;
                    tracing::warn!(error = %e, "status not written");
                }
            }
        }
        if count > 0 {
            tracing::info!(status_writes = count, "status synced");
        }
        for (reference, note) in std::mem::take(&mut self.pending_events) {
            if !*self.leader.borrow() {
                break;
            }
            let ev = Event {
                type_: EventType::Warning,
                reason: "Unsupported".into(),
                note: Some(note),
                action: "Reconcile".into(),
                secondary: None,
            };
            if let Err(e) = self.recorder.publish(&ev, &reference).await {
                tracing::debug!(error = %e, "event not recorded");
            }
        }
        ok
    }

    /// The writes of one pass, and the objects to keep remembering.
    fn plan(&mut self, report: &SealedReport) -> (Vec<Write>, HashSet<ObjectKey>) {
        let mut out = Vec::new();
        let mut live = HashSet::new();
        let mut routes_seen = Seen::new();
        let controller = self.controller_name.clone();
        let addresses = ingress::gateway_addresses(report.entries_with_revisions().map(|(e, _)| e));
        for (e, revision) in report.entries_with_revisions() {
            let key = ObjectKey::of(e);
            live.insert(key.clone());
            let ns = or_default_namespace(e.namespace.as_deref());
            let revision = Some(revision);
            let write = match e.kind {
                ObjectKind::GatewayClass => {
                    let Some(o) = self
                        .stores
                        .of::<GatewayClass>()
                        .get(&ObjectRef::new(&e.name))
                    else {
                        continue;
                    };
                    self.plan_one(key, revision, &*o, |rv| {
                        diff::patch(e, Carried::GatewayClass(o.status.as_ref()), rv, &controller)
                    })
                }
                ObjectKind::Gateway => {
                    let Some(o) = self.stores.gateway(ns, &e.name) else {
                        continue;
                    };
                    self.plan_one(key, revision, &*o, |rv| {
                        diff::patch(e, Carried::Gateway(o.status.as_ref()), rv, &controller)
                    })
                }
                ObjectKind::ListenerSet => {
                    let r = ObjectRef::new(&e.name).within(ns);
                    let Some(o) = self.stores.of::<ListenerSet>().get(&r) else {
                        continue;
                    };
                    self.plan_one(key, revision, &*o, |rv| {
                        diff::patch(e, Carried::ListenerSet(o.status.as_ref()), rv, &controller)
                    })
                }
                ObjectKind::Route(RouteKindId::Ingress) => {
                    let desired = ingress::load_balancer(e, &addresses);
                    self.plan_ingress(key, ns, &e.name, desired, ingress::unsupported(e))
                }
                ObjectKind::Route(kind) => kind.visit(PlanRoute {
                    writer: self,
                    entry: e,
                    revision,
                    seen: &mut routes_seen,
                }),
                ObjectKind::BackendTlsPolicy => {
                    let r = ObjectRef::new(&e.name).within(ns);
                    let Some(o) = self.stores.of::<BackendTlsPolicy>().get(&r) else {
                        continue;
                    };
                    self.plan_one(key, revision, &*o, |rv| {
                        let carried = Carried::BackendTlsPolicy(o.status.as_ref());
                        diff::patch(e, carried, rv, &controller)
                    })
                }
                ObjectKind::TrafficPolicy => {
                    let r = ObjectRef::new(&e.name).within(ns);
                    let Some(o) = self.stores.of::<TrafficPolicy>().get(&r) else {
                        continue;
                    };
                    self.plan_one(key, revision, &*o, |rv| {
                        let carried = Carried::TrafficPolicy(o.status.as_ref());
                        diff::patch(e, carried, rv, &controller)
                    })
                }
            };
            out.extend(write);
        }
        // Ingresses no longer ours lose the address written while they were.
        for w in self.release_ingresses(&live, &addresses) {
            live.insert(w.key.clone());
            out.push(w);
        }
        // Routes that no longer name one of our Gateways lose our stale entries.
        for &kind in RouteKindId::ALL {
            let released = kind.visit(ReleaseStale {
                writer: self,
                seen: &routes_seen,
            });
            for w in released {
                live.insert(w.key.clone());
                out.push(w);
            }
        }
        (out, live)
    }

    /// The write of route entry `e` of kind `K`, if one is due: the one plan for every route
    /// kind, on the status in the shape they share.
    fn plan_route<K: RouteKind>(
        &mut self,
        e: &ObjectStatus,
        revision: Option<Revision>,
        seen: &mut Seen,
    ) -> Option<Write> {
        if !K::PARENTS_STATUS {
            return None;
        }
        let ns = or_default_namespace(e.namespace.as_deref());
        let r = ObjectRef::new(&e.name).within(ns);
        let o = self.stores.find::<K>()?.get(&r)?;
        seen.insert((K::ID, o.namespace(), o.name_any()));
        let carried = o.route_status();
        let controller = self.controller_name.clone();
        self.plan_one(ObjectKey::of(e), revision, &*o, |rv| {
            diff::patch(e, Carried::Route(carried.as_deref()), rv, &controller)
        })
    }

    /// The writes that take our entries off routes of kind `K` that carry `parents[]` entries
    /// of ours but are not in the report (they no longer name one of our Gateways).
    fn release_stale<K: RouteKind>(&mut self, seen: &Seen) -> Vec<Write> {
        let routes = match self.stores.find::<K>() {
            Some(store) => store.state(),
            None => return Vec::new(),
        };
        let controller = self.controller_name.clone();
        let mut out = Vec::new();
        for route in routes {
            let current = route.route_status();
            if seen.contains(&(K::ID, route.namespace(), route.name_any()))
                || !diff::has_parents_of(current.as_deref(), &controller)
            {
                continue;
            }
            let key = ObjectKey {
                kind: ObjectKind::Route(K::ID),
                namespace: route.namespace(),
                name: route.name_any(),
            };
            let write = self.plan_one(key, None, &*route, |rv| {
                Ok(diff::release_route(current.as_deref(), rv, &controller))
            });
            out.extend(write);
        }
        out
    }

    /// Plans the write of one object, unless the object and its computed status (by revision)
    /// are those last settled, the diff finds nothing to change, or the same patch was already
    /// written against this very version (the cache is behind, not the object).
    fn plan_one<K>(
        &mut self,
        key: ObjectKey,
        revision: Option<Revision>,
        object: &K,
        diff: impl FnOnce(Option<&str>) -> Result<Option<StatusPatch>, DiffError>,
    ) -> Option<Write>
    where
        K: Resource<DynamicType = ()>,
    {
        let reference = object.object_ref(&());
        self.plan_version(key, revision, reference, object.resource_version(), diff)
    }

    /// [`StatusWriter::plan_one`] given the object's reference and resource version.
    fn plan_version(
        &mut self,
        key: ObjectKey,
        revision: Option<Revision>,
        reference: ObjectReference,
        version: Option<String>,
        diff: impl FnOnce(Option<&str>) -> Result<Option<StatusPatch>, DiffError>,
    ) -> Option<Write> {
        if self.memory.unchanged(&key, &version, revision) {
            return None;
        }
        let patch = match diff(version.as_deref()) {
            Ok(Some(patch)) => patch,
            Ok(None) => {
                self.memory.matched(key, version, revision);
                return None;
            }
            Err(e) => {
                tracing::warn!(error = %e, "status not compared");
                return None;
            }
        };
        if self
            .memory
            .already_written(&key, &version, revision, patch.status())
        {
            return None;
        }
        Some(Write {
            reference,
            key,
            revision,
            version,
            patch,
        })
    }

    async fn apply(&self, w: Write) -> Result<Write, StatusError> {
        // Leadership can end in the middle of a pass: from then on, nothing is written.
        if !*self.leader.borrow() {
            return Err(StatusError::NotLeader);
        }
        let client = self.client.clone();
        let ns = or_default_namespace(w.key.namespace.as_deref());
        let result = match w.key.kind {
            ObjectKind::GatewayClass => patch_status::<GatewayClass>(Api::all(client), &w).await,
            ObjectKind::Gateway => patch_status::<Gateway>(Api::namespaced(client, ns), &w).await,
            ObjectKind::ListenerSet => {
                patch_status::<ListenerSet>(Api::namespaced(client, ns), &w).await
            }
            ObjectKind::Route(RouteKindId::Ingress) => {
                patch_status::<Ingress>(Api::namespaced(client, ns), &w).await
            }
            ObjectKind::Route(kind) => {
                let resource = kind.visit(ResourceOf);
                let api = Api::<DynamicObject>::namespaced_with(client, ns, &resource);
                patch_status(api, &w).await
            }
            ObjectKind::BackendTlsPolicy => {
                patch_status::<BackendTlsPolicy>(Api::namespaced(client, ns), &w).await
            }
            ObjectKind::TrafficPolicy => {
                patch_status::<TrafficPolicy>(Api::namespaced(client, ns), &w).await
            }
        };
        let outcome = match &result {
            Ok(()) => "ok",
            Err(kube::Error::Api(e)) if e.code == 409 => "conflict",
            Err(_) => "error",
        };
        self.published
            .metrics()
            .control
            .status_writes
            .with_label_values(&[outcome])
            .inc();
        result.map_err(|source| StatusError::Patch {
            kind: w.key.kind,
            object: format!(
                "{}/{}",
                w.key.namespace.as_deref().unwrap_or(""),
                w.key.name
            ),
            source: Box::new(source),
        })?;
        for n in &w.patch.notable {
            let ev = Event {
                type_: EventType::Warning,
                reason: n.reason.to_owned(),
                note: Some(n.note.clone()),
                action: "Reconcile".into(),
                secondary: None,
            };
            if let Err(e) = self.recorder.publish(&ev, &w.reference).await {
                tracing::debug!(error = %e, "event not recorded");
            }
        }
        Ok(w)
    }
}

impl LeaderPass for StatusWriter {
    async fn run(&mut self) -> bool {
        self.sync().await
    }

    fn forget(&mut self) {
        self.memory.clear();
        self.ingress_events.clear();
    }
}

async fn patch_status<K>(api: Api<K>, w: &Write) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(
        &w.key.name,
        &PatchParams::default(),
        &Patch::Merge(&w.patch.body),
    )
    .await
    .map(|_| ())
}
