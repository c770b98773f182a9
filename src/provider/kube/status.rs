//! The status writer: after each publication, the leader hands every entry of the published
//! report, with the status its object carries in the cache, to [`crate::status::diff`] and
//! sends the patches it gets back; notable transitions become Events. It holds no status rule:
//! it reads caches, writes, and remembers what it compared and wrote, so an entry whose
//! revision and object are unchanged costs a lookup, and a write the cache has not yet seen is
//! not repeated.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use gateway_api::apis::experimental::httproutes::{HttpRoute, HttpRouteStatus};
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::grpcroutes::GrpcRoute;
use gateway_api::apis::standard::listenersets::ListenerSet;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::Value;
use tokio::sync::watch;

use super::leader::{run_leader_pass, LeaderPass};
use super::watch::Stores;
use crate::kinds::crd::TrafficPolicy;
use crate::kinds::l4::{TcpRoute, UdpRoute};
use crate::published::Published;
use crate::snapshot::or_default_namespace;
use crate::status::diff::{self, Carried, DiffError, StatusPatch};
use crate::status::{ObjectKind, ObjectStatus, Revision, SealedReport};

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

/// An object whose status the writer tracks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ObjectKey {
    kind: ObjectKind,
    namespace: Option<String>,
    name: String,
}

impl ObjectKey {
    fn of(entry: &ObjectStatus) -> Self {
        Self {
            kind: entry.kind,
            namespace: entry.namespace.clone(),
            name: entry.name.clone(),
        }
    }
}

/// What the writer last settled for one object.
#[derive(Debug)]
struct Settled {
    /// The object's `resourceVersion` when it was compared or written.
    version: Option<String>,
    /// Revision of the computed status it was compared with; `None` for a route released.
    revision: Option<Revision>,
    /// The status part of the patch written at `version`, if one was.
    wrote: Option<Value>,
}

/// What the writer remembers per object, while the object is in the report (or a route still
/// carries our entries): enough to skip a comparison whose answer is known, and a write the
/// cache has not shown yet.
#[derive(Debug, Default)]
struct Memory {
    objects: HashMap<ObjectKey, Settled>,
}

impl Memory {
    /// True when the object (by `resourceVersion`) and its computed status (by revision) are
    /// those last settled: comparing them again would give the same answer.
    fn unchanged(
        &self,
        key: &ObjectKey,
        version: &Option<String>,
        revision: Option<Revision>,
    ) -> bool {
        self.objects
            .get(key)
            .is_some_and(|s| s.version == *version && s.revision == revision)
    }

    /// The object already carries its computed status.
    fn matched(&mut self, key: ObjectKey, version: Option<String>, revision: Option<Revision>) {
        let settled = Settled {
            version,
            revision,
            wrote: None,
        };
        self.objects.insert(key, settled);
    }

    /// True when `status` was already written against this very `version`: the cache is
    /// behind, not the object, so the write is not repeated.
    fn already_written(
        &mut self,
        key: &ObjectKey,
        version: &Option<String>,
        revision: Option<Revision>,
        status: &Value,
    ) -> bool {
        let Some(s) = self.objects.get_mut(key) else {
            return false;
        };
        let same = s.version == *version && s.wrote.as_ref() == Some(status);
        if same {
            s.revision = revision;
        }
        same
    }

    /// `status` was written against `version`.
    fn wrote(&mut self, w: Write) {
        let settled = Settled {
            version: w.version,
            revision: w.revision,
            wrote: Some(w.patch.status().clone()),
        };
        self.objects.insert(w.key, settled);
    }

    fn retain(&mut self, live: &HashSet<ObjectKey>) {
        self.objects.retain(|k, _| live.contains(k));
    }

    fn clear(&mut self) {
        self.objects.clear();
    }
}

/// One planned write.
struct Write {
    key: ObjectKey,
    revision: Option<Revision>,
    version: Option<String>,
    patch: StatusPatch,
    reference: ObjectReference,
}

/// A route whose entries of ours are stale: its key, reference, version and current status.
type StaleRoute = (
    ObjectKey,
    ObjectReference,
    Option<String>,
    Option<HttpRouteStatus>,
);

/// A TLSRoute's status in the shape every route kind shares.
fn route_status<T: serde::Serialize>(status: Option<&T>) -> Option<HttpRouteStatus> {
    serde_json::to_value(status?)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
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
        ok
    }

    /// The writes of one pass, and the objects to keep remembering.
    fn plan(&mut self, report: &SealedReport) -> (Vec<Write>, HashSet<ObjectKey>) {
        let mut out = Vec::new();
        let mut live = HashSet::new();
        let mut routes_seen = HashSet::new();
        let mut grpc_seen = HashSet::new();
        let controller = self.controller_name.clone();
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
                ObjectKind::HttpRoute => {
                    let r = ObjectRef::new(&e.name).within(ns);
                    let Some(o) = self.stores.of::<HttpRoute>().get(&r) else {
                        continue;
                    };
                    routes_seen.insert((e.kind, o.namespace(), o.name_any()));
                    self.plan_one(key, revision, &*o, |rv| {
                        diff::patch(e, Carried::HttpRoute(o.status.as_ref()), rv, &controller)
                    })
                }
                ObjectKind::GrpcRoute => {
                    let r = ObjectRef::new(&e.name).within(ns);
                    let Some(o) = self.stores.of::<GrpcRoute>().get(&r) else {
                        continue;
                    };
                    grpc_seen.insert((o.namespace(), o.name_any()));
                    let carried = o.status.as_ref().and_then(diff::grpc_route_status);
                    self.plan_one(key, revision, &*o, |rv| {
                        diff::patch(e, Carried::GrpcRoute(carried.as_ref()), rv, &controller)
                    })
                }
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
                ObjectKind::TlsRoute => {
                    let r = ObjectRef::new(&e.name).within(ns);
                    let Some(o) = self.stores.of::<TlsRoute>().get(&r) else {
                        continue;
                    };
                    routes_seen.insert((e.kind, o.namespace(), o.name_any()));
                    // Every route kind's status has one shape; TLSRoute's has its own type.
                    let current = route_status(o.status.as_ref());
                    self.plan_one(key, revision, &*o, |rv| {
                        diff::patch(e, Carried::HttpRoute(current.as_ref()), rv, &controller)
                    })
                }
                ObjectKind::TcpRoute => {
                    let r = ObjectRef::new(&e.name).within(ns);
                    let Some(o) = self.stores.of::<TcpRoute>().get(&r) else {
                        continue;
                    };
                    routes_seen.insert((e.kind, o.namespace(), o.name_any()));
                    self.plan_one(key, revision, &*o, |rv| {
                        diff::patch(e, Carried::HttpRoute(o.status.as_ref()), rv, &controller)
                    })
                }
                ObjectKind::UdpRoute => {
                    let r = ObjectRef::new(&e.name).within(ns);
                    let Some(o) = self.stores.of::<UdpRoute>().get(&r) else {
                        continue;
                    };
                    routes_seen.insert((e.kind, o.namespace(), o.name_any()));
                    self.plan_one(key, revision, &*o, |rv| {
                        diff::patch(e, Carried::HttpRoute(o.status.as_ref()), rv, &controller)
                    })
                }
            };
            out.extend(write);
        }
        // Routes that no longer name one of our Gateways lose our stale entries.
        let stale = [
            self.stale::<HttpRoute>(ObjectKind::HttpRoute, &routes_seen, |r| r.status.clone()),
            self.stale::<TlsRoute>(ObjectKind::TlsRoute, &routes_seen, |r| {
                route_status(r.status.as_ref())
            }),
            self.stale::<TcpRoute>(ObjectKind::TcpRoute, &routes_seen, |r| r.status.clone()),
            self.stale::<UdpRoute>(ObjectKind::UdpRoute, &routes_seen, |r| r.status.clone()),
        ];
        for (key, reference, version, status) in stale.into_iter().flatten() {
            live.insert(key.clone());
            let write = self.plan_version(key, None, reference, version, |rv| {
                Ok(diff::release_route(status.as_ref(), rv, &controller))
            });
            out.extend(write);
        }
        for route in self.stores.of::<GrpcRoute>().state() {
            let carried = route.status.as_ref().and_then(diff::grpc_route_status);
            if grpc_seen.contains(&(route.namespace(), route.name_any()))
                || !diff::has_parents_of(carried.as_ref(), &controller)
            {
                continue;
            }
            let key = ObjectKey {
                kind: ObjectKind::GrpcRoute,
                namespace: route.namespace(),
                name: route.name_any(),
            };
            live.insert(key.clone());
            let write = self.plan_one(key, None, &*route, |rv| {
                Ok(diff::release_route(carried.as_ref(), rv, &controller))
            });
            out.extend(write);
        }
        (out, live)
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

    /// Routes of kind `K` that carry `parents[]` entries of ours but are not in the report (they
    /// no longer name one of our Gateways): key, reference, version and current status of each.
    fn stale<K>(
        &self,
        kind: ObjectKind,
        seen: &HashSet<(ObjectKind, Option<String>, String)>,
        status: impl Fn(&K) -> Option<HttpRouteStatus>,
    ) -> Vec<StaleRoute>
    where
        K: crate::kinds::Kind,
        crate::snapshot::Snapshot: crate::kinds::Holds<K>,
    {
        let mut out = Vec::new();
        for route in self.stores.of::<K>().state() {
            let current = status(&route);
            if seen.contains(&(kind, route.namespace(), route.name_any()))
                || !diff::has_parents_of(current.as_ref(), &self.controller_name)
            {
                continue;
            }
            let key = ObjectKey {
                kind,
                namespace: route.namespace(),
                name: route.name_any(),
            };
            out.push((
                key,
                route.object_ref(&()),
                route.resource_version(),
                current,
            ));
        }
        out
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
            ObjectKind::HttpRoute => {
                patch_status::<HttpRoute>(Api::namespaced(client, ns), &w).await
            }
            ObjectKind::GrpcRoute => {
                patch_status::<GrpcRoute>(Api::namespaced(client, ns), &w).await
            }
            ObjectKind::BackendTlsPolicy => {
                patch_status::<BackendTlsPolicy>(Api::namespaced(client, ns), &w).await
            }
            ObjectKind::TrafficPolicy => {
                patch_status::<TrafficPolicy>(Api::namespaced(client, ns), &w).await
            }
            ObjectKind::TlsRoute => patch_status::<TlsRoute>(Api::namespaced(client, ns), &w).await,
            ObjectKind::TcpRoute => patch_status::<TcpRoute>(Api::namespaced(client, ns), &w).await,
            ObjectKind::UdpRoute => patch_status::<UdpRoute>(Api::namespaced(client, ns), &w).await,
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{StatusBody, StatusReport};
    use serde_json::json;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            kind: ObjectKind::HttpRoute,
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    /// Two different revisions of one entry, as sealing hands them out.
    fn revisions() -> (Revision, Revision) {
        let report = |accepted: &str| StatusReport {
            entries: vec![ObjectStatus::new(
                ObjectKind::GatewayClass,
                None,
                "c",
                Some(1),
                StatusBody::from(
                    json!({"conditions": [{"type": "Accepted", "status": accepted,
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
                ),
            )],
        };
        let first = SealedReport::from(report("True"));
        let second = report("False").seal(&first);
        let revision = |r: &SealedReport| r.entries_with_revisions().next().map(|e| e.1);
        (revision(&first).unwrap(), revision(&second).unwrap())
    }

    #[test]
    fn a_tlsroute_status_reads_as_every_route_kind_status() {
        let tls: gateway_api::apis::standard::tlsroutes::TlsRouteStatus = serde_json::from_value(
            json!({"parents": [{"controllerName": "x/y", "parentRef": {"name": "gw"}, "conditions": []}]}),
        )
        .unwrap();
        let route = route_status(Some(&tls)).unwrap();
        assert!(diff::has_parents_of(Some(&route), "x/y"));
        assert!(route_status::<HttpRouteStatus>(None).is_none());
    }

    #[test]
    fn memory_skips_known_answers_and_repeated_writes() {
        let (r1, r2) = revisions();
        let v = |s: &str| Some(s.to_owned());
        let mut m = Memory::default();
        assert!(!m.unchanged(&key("a"), &v("1"), Some(r1)));
        m.matched(key("a"), v("1"), Some(r1));
        assert!(m.unchanged(&key("a"), &v("1"), Some(r1)));
        assert!(
            !m.unchanged(&key("a"), &v("2"), Some(r1)),
            "the object changed"
        );
        assert!(
            !m.unchanged(&key("a"), &v("1"), Some(r2)),
            "the status changed"
        );

        let status = json!({"parents": []});
        let reference = ObjectReference::default();
        let patch = StatusPatch {
            body: json!({"status": status}),
            notable: Vec::new(),
        };
        let (revision, version) = (Some(r1), v("1"));
        let (key_b, patch_b) = (key("b"), patch.clone());
        m.wrote(Write {
            key: key_b,
            revision,
            version,
            patch: patch_b,
            reference,
        });
        // The cache still shows version 1: the same write is not sent again, whatever the
        // revision, and the new revision is remembered.
        assert!(m.already_written(&key("b"), &v("1"), Some(r2), &status));
        assert!(m.unchanged(&key("b"), &v("1"), Some(r2)));
        assert!(!m.already_written(&key("b"), &v("2"), Some(r2), &status));
        assert!(!m.already_written(&key("b"), &v("1"), Some(r2), &json!({})));

        m.retain(&HashSet::from([key("b")]));
        assert!(
            !m.unchanged(&key("a"), &v("1"), Some(r1)),
            "gone from the report"
        );
        m.clear();
        assert!(!m.unchanged(&key("b"), &v("1"), Some(r2)));
    }
}
