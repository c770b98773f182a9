//! The status writer: after each publication, the leader compares the computed
//! [`StatusReport`] with what every object carries and patches only the differences. Routes'
//! `parents[]` entries of other controllers are kept (the list is atomic: read, replace ours,
//! keep theirs, patch with the read `resourceVersion`). Notable transitions become Events.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{json, Value};
use tokio::sync::watch;

use super::leader::{run_leader_pass, LeaderPass};
use super::status_diff::{is_ours, notable_transitions, object_status_patch, route_parents};
use super::watch::Stores;
use crate::published::Published;
use crate::snapshot::or_default_namespace;
use crate::status::StatusReport;

/// How many status patches are in flight at once.
const CONCURRENT_WRITES: usize = 16;

/// A status write failed; the next publication or the retry timer tries again.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("not the leader any more")]
    NotLeader,
    #[error("patch status of {kind} {object}: {source}")]
    Patch {
        kind: String,
        object: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// One planned write.
struct Write {
    kind: String,
    namespace: Option<String>,
    name: String,
    patch: Value,
    events: Vec<(String, String)>,
    reference: k8s_openapi::api::core::v1::ObjectReference,
    key: String,
    rv: Option<String>,
}

/// The leader-only writer of statuses.
pub struct StatusWriter {
    pub client: Client,
    pub stores: Stores,
    pub published: Arc<Published>,
    pub leader: watch::Receiver<bool>,
    pub controller_name: String,
    pub recorder: Recorder,
    /// Object key -> (resourceVersion read before our write, status we wrote), so a write the
    /// cache has not seen yet is not repeated.
    written: HashMap<String, (Option<String>, Value)>,
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
            written: HashMap::new(),
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
        let writes = self.plan(&report);
        let count = writes.len();
        // Forget writes of objects that are gone, so the memory stays bounded.
        let live: std::collections::HashSet<String> = report
            .entries
            .iter()
            .map(|e| object_key(&e.kind, e.namespace.as_deref(), &e.name))
            .chain(writes.iter().map(|w| w.key.clone()))
            .collect();
        self.written.retain(|k, _| live.contains(k));
        let results: Vec<_> = futures_util::stream::iter(writes.into_iter().map(|w| self.apply(w)))
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
        let mut ok = true;
        for r in results {
            match r {
                Ok((key, rv, patch)) => {
                    self.written.insert(key, (rv, patch));
                }
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

    fn plan(&self, report: &StatusReport) -> Vec<Write> {
        let mut out = Vec::new();
        let mut routes_seen = std::collections::HashSet::new();
        for e in &report.entries {
            let ns = e.namespace.as_deref();
            let (current, meta_ref) = match e.kind.as_str() {
                "GatewayClass" => {
                    let Some(o) = self.stores.gateway_classes.get(&ObjectRef::new(&e.name)) else {
                        continue;
                    };
                    (
                        serde_json::to_value(&o.status).unwrap_or(Value::Null),
                        (o.object_ref(&()), o.resource_version()),
                    )
                }
                "Gateway" => {
                    let Some(o) = self.stores.gateway(or_default_namespace(ns), &e.name) else {
                        continue;
                    };
                    (
                        serde_json::to_value(&o.status).unwrap_or(Value::Null),
                        (o.object_ref(&()), o.resource_version()),
                    )
                }
                "HTTPRoute" => {
                    let r = ObjectRef::new(&e.name).within(or_default_namespace(ns));
                    let Some(o) = self.stores.http_routes.get(&r) else {
                        continue;
                    };
                    routes_seen.insert((o.namespace(), o.name_any()));
                    (
                        serde_json::to_value(&o.status).unwrap_or(Value::Null),
                        (o.object_ref(&()), o.resource_version()),
                    )
                }
                _ => continue,
            };
            if let Some(w) = self.plan_one(
                &e.kind,
                ns,
                &e.name,
                &current,
                &e.status.to_json(),
                meta_ref,
            ) {
                out.push(w);
            }
        }
        // Routes that no longer name one of our Gateways lose our stale entries.
        for route in self.stores.http_routes.state() {
            if routes_seen.contains(&(route.namespace(), route.name_any())) {
                continue;
            }
            let current = serde_json::to_value(&route.status).unwrap_or(Value::Null);
            let has_ours = current["parents"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| is_ours(p, &self.controller_name)));
            if has_ours {
                let meta = (route.object_ref(&()), route.resource_version());
                let ns = route.namespace();
                if let Some(w) = self.plan_one(
                    "HTTPRoute",
                    ns.as_deref(),
                    &route.name_any(),
                    &current,
                    &json!({"parents": []}),
                    meta,
                ) {
                    out.push(w);
                }
            }
        }
        out
    }

    fn plan_one(
        &self,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        current: &Value,
        desired: &Value,
        (reference, rv): (k8s_openapi::api::core::v1::ObjectReference, Option<String>),
    ) -> Option<Write> {
        let patch = if kind == "HTTPRoute" {
            let cur = current["parents"].as_array().cloned().unwrap_or_default();
            let ours = desired["parents"].as_array().cloned().unwrap_or_default();
            let parents = route_parents(&cur, &ours, &self.controller_name)?;
            json!({"metadata": {"resourceVersion": rv}, "status": {"parents": parents}})
        } else {
            object_status_patch(current, desired)?
        };
        let key = object_key(kind, namespace, name);
        if let Some((before, wrote)) = self.written.get(&key) {
            if *before == rv && strip_rv(wrote) == strip_rv(&patch) {
                return None; // already written; the cache has not caught up yet
            }
        }
        let events = notable_transitions(kind, current, &patch["status"]);
        Some(Write {
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            patch,
            events,
            reference,
            key,
            rv,
        })
    }

    async fn apply(&self, w: Write) -> Result<(String, Option<String>, Value), StatusError> {
        // Leadership can end in the middle of a pass: from then on, nothing is written.
        if !*self.leader.borrow() {
            return Err(StatusError::NotLeader);
        }
        let pp = PatchParams::default();
        let result = match (w.kind.as_str(), w.namespace.as_deref()) {
            ("GatewayClass", _) => {
                patch_status::<GatewayClass>(Api::all(self.client.clone()), &w, &pp).await
            }
            ("Gateway", Some(ns)) => {
                patch_status::<Gateway>(Api::namespaced(self.client.clone(), ns), &w, &pp).await
            }
            (_, ns) => {
                patch_status::<HttpRoute>(
                    Api::namespaced(self.client.clone(), or_default_namespace(ns)),
                    &w,
                    &pp,
                )
                .await
            }
        };
        result.map_err(|source| StatusError::Patch {
            kind: w.kind.clone(),
            object: format!("{}/{}", w.namespace.as_deref().unwrap_or(""), w.name),
            source: Box::new(source),
        })?;
        for (reason, note) in &w.events {
            let ev = Event {
                type_: EventType::Warning,
                reason: reason.clone(),
                note: Some(note.clone()),
                action: "Reconcile".into(),
                secondary: None,
            };
            if let Err(e) = self.recorder.publish(&ev, &w.reference).await {
                tracing::debug!(error = %e, "event not recorded");
            }
        }
        Ok((w.key, w.rv, w.patch))
    }
}

impl LeaderPass for StatusWriter {
    async fn run(&mut self) -> bool {
        self.sync().await
    }

    fn forget(&mut self) {
        self.written.clear();
    }
}

fn object_key(kind: &str, namespace: Option<&str>, name: &str) -> String {
    format!("{kind}/{}/{name}", namespace.unwrap_or(""))
}

fn strip_rv(v: &Value) -> &Value {
    &v["status"]
}

async fn patch_status<K>(api: Api<K>, w: &Write, pp: &PatchParams) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(&w.name, pp, &Patch::Merge(&w.patch))
        .await
        .map(|_| ())
}
