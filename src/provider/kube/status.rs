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

use super::gateway_service::Keeper;
use super::watch::Stores;
use crate::reconcile::Published;
use crate::status::{ObjectStatus, StatusReport};

/// How many status patches are in flight at once.
const CONCURRENT_WRITES: usize = 16;

/// A status write failed; the next publication or the retry timer tries again.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("patch status of {kind} {object}: {source}")]
    Patch {
        kind: String,
        object: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// Copies `lastTransitionTime` from `current` into `desired` wherever a condition kept its
/// status, so that the comparison (and the object) only changes on real transitions.
fn carry_times(kind: &str, current: &Value, desired: &mut Value) {
    let wrap = |status: Value| StatusReport {
        entries: vec![ObjectStatus {
            api_version: String::new(),
            kind: kind.to_owned(),
            namespace: None,
            name: String::new(),
            generation: None,
            status,
        }],
    };
    let mut next = wrap(std::mem::take(desired));
    next.carry_transition_times(&wrap(current.clone()));
    if let Some(e) = next.entries.pop() {
        *desired = e.status;
    }
}

/// The merge patch of a GatewayClass or Gateway status, or `None` when every field we compute
/// already has the value we want (fields we do not compute are left alone).
pub fn object_status_patch(kind: &str, current: &Value, desired: &Value) -> Option<Value> {
    let mut desired = desired.clone();
    carry_times(kind, current, &mut desired);
    let Value::Object(fields) = &desired else {
        return None;
    };
    let same = fields.iter().all(|(k, v)| current.get(k) == Some(v));
    (!same).then(|| json!({ "status": desired }))
}

fn is_ours(parent: &Value, controller: &str) -> bool {
    parent.get("controllerName").and_then(Value::as_str) == Some(controller)
}

fn sorted_by_ref(mut v: Vec<Value>) -> Vec<Value> {
    v.sort_by_key(|p| p.get("parentRef").map(Value::to_string));
    v
}

/// The new `status.parents` of a route: other controllers' entries as they are, then ours as
/// computed (condition times carried over). `None` when our entries already match, in any
/// order, so two controllers never fight over ordering.
pub fn route_parents(
    current: &[Value],
    desired_ours: &[Value],
    controller: &str,
) -> Option<Vec<Value>> {
    let current_ours: Vec<Value> = current
        .iter()
        .filter(|p| is_ours(p, controller))
        .cloned()
        .collect();
    let mut ours = json!({ "parents": desired_ours });
    carry_times("HTTPRoute", &json!({ "parents": current_ours }), &mut ours);
    let ours = match ours {
        Value::Object(mut m) => match m.remove("parents") {
            Some(Value::Array(a)) => a,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    if sorted_by_ref(current_ours) == sorted_by_ref(ours.clone()) {
        return None;
    }
    let mut out: Vec<Value> = current
        .iter()
        .filter(|p| !is_ours(p, controller))
        .cloned()
        .collect();
    out.extend(ours);
    Some(out)
}

fn condition<'a>(conds: Option<&'a Value>, ty: &str) -> Option<&'a str> {
    conds?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))?
        .get("status")?
        .as_str()
}

/// Events worth telling humans about, found by comparing the status an object carries with
/// the one about to be written: a route parent newly not accepted, a listener newly conflicted.
pub fn notable_transitions(kind: &str, current: &Value, desired: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let (list, key, ty, bad, reason) = match kind {
        "HTTPRoute" => ("parents", "parentRef", "Accepted", "False", "RouteRejected"),
        "Gateway" => (
            "listeners",
            "name",
            "Conflicted",
            "True",
            "ListenerConflict",
        ),
        _ => return out,
    };
    let items = |v: &Value| {
        v.get(list)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let before = items(current);
    for item in items(desired) {
        let conds = item.get("conditions");
        if condition(conds, ty) != Some(bad) {
            continue;
        }
        let was = before
            .iter()
            .find(|b| b.get(key) == item.get(key))
            .and_then(|b| condition(b.get("conditions"), ty));
        if was == Some(bad) {
            continue;
        }
        let detail = conds
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
            })
            .map(|c| {
                format!(
                    "{}: {}",
                    c["reason"].as_str().unwrap_or(""),
                    c["message"].as_str().unwrap_or("")
                )
            })
            .unwrap_or_default();
        out.push((
            reason.to_owned(),
            format!(
                "{} {}: {detail}",
                list.trim_end_matches('s'),
                item.get(key).map(Value::to_string).unwrap_or_default()
            ),
        ));
    }
    out
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

/// The leader-only writer of statuses and side objects.
pub struct StatusWriter {
    pub client: Client,
    pub stores: Stores,
    pub published: Arc<Published>,
    pub leader: watch::Receiver<bool>,
    pub controller_name: String,
    pub recorder: Recorder,
    pub keeper: Keeper,
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
        keeper: Keeper,
    ) -> Self {
        Self {
            client,
            stores,
            published,
            leader,
            controller_name,
            recorder,
            keeper,
            written: HashMap::new(),
        }
    }

    /// Waits for publications and leadership; syncs whenever leading. Retries failed passes
    /// after `retry` even if nothing new is published.
    pub async fn run(mut self, retry: Duration) {
        let mut generation = self.published.generation.subscribe();
        let mut failed = false;
        loop {
            let leading = *self.leader.borrow_and_update();
            if !leading {
                self.written.clear();
            }
            if leading && self.published.is_ready() {
                failed = !self.sync().await;
            }
            tokio::select! {
                r = generation.changed() => if r.is_err() { return },
                r = self.leader.changed() => if r.is_err() { return },
                () = tokio::time::sleep(retry), if failed => {}
            }
        }
    }

    /// One pass: side objects, then every status. True when everything succeeded.
    pub async fn sync(&mut self) -> bool {
        let (side_writes, side_errors) = self.keeper.sync(&self.stores).await;
        for e in &side_errors {
            tracing::warn!(error = %e, "side object not reconciled");
        }
        let report = self.published.status.load_full();
        let writes = self.plan(&report);
        let count = writes.len();
        let results: Vec<_> = futures_util::stream::iter(writes.into_iter().map(|w| self.apply(w)))
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
        let mut ok = side_errors.is_empty();
        for r in results {
            match r {
                Ok((key, rv, patch)) => {
                    self.written.insert(key, (rv, patch));
                }
                Err(e) => {
                    ok = false;
                    tracing::warn!(error = %e, "status not written");
                }
            }
        }
        if count + side_writes > 0 {
            tracing::info!(status_writes = count, side_writes, "status synced");
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
                    let Some(o) = self.stores.gateway(ns.unwrap_or("default"), &e.name) else {
                        continue;
                    };
                    (
                        serde_json::to_value(&o.status).unwrap_or(Value::Null),
                        (o.object_ref(&()), o.resource_version()),
                    )
                }
                "HTTPRoute" => {
                    let r = ObjectRef::new(&e.name).within(ns.unwrap_or("default"));
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
            if let Some(w) = self.plan_one(&e.kind, ns, &e.name, &current, &e.status, meta_ref) {
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
            object_status_patch(kind, current, desired)?
        };
        let key = format!("{kind}/{}/{name}", namespace.unwrap_or(""));
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
                    Api::namespaced(self.client.clone(), ns.unwrap_or("default")),
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

#[cfg(test)]
mod tests {
    use super::*;

    const US: &str = "edgeplane.dev/gateway-controller";

    fn parent(gw: &str, controller: &str, accepted: &str, time: &str) -> Value {
        json!({"parentRef": {"name": gw}, "controllerName": controller, "conditions": [
            {"type": "Accepted", "status": accepted, "reason": "R", "message": "m",
             "observedGeneration": 1, "lastTransitionTime": time}]})
    }

    #[test]
    fn route_parents_keep_other_controllers_and_skip_equal() {
        let theirs = parent("other", "example.com/ctl", "True", "T0");
        let current = vec![parent("gw", US, "True", "T0"), theirs.clone()];
        // Same status, newer time: nothing to write.
        assert_eq!(
            route_parents(&current, &[parent("gw", US, "True", "T9")], US),
            None
        );
        // Status changed: ours replaced, theirs kept untouched.
        let next = route_parents(&current, &[parent("gw", US, "False", "T9")], US).unwrap();
        assert_eq!(next.len(), 2);
        assert_eq!(next[0], theirs);
        assert_eq!(next[1]["conditions"][0]["status"], "False");
        assert_eq!(next[1]["conditions"][0]["lastTransitionTime"], "T9");
        // Order of our entries does not matter.
        let two = vec![parent("a", US, "True", "T0"), parent("b", US, "True", "T0")];
        let swapped = [parent("b", US, "True", "T1"), parent("a", US, "True", "T1")];
        assert_eq!(route_parents(&two, &swapped, US), None);
        // No longer ours: our entries go, theirs stay.
        assert_eq!(route_parents(&current, &[], US), Some(vec![theirs]));
    }

    #[test]
    fn object_patch_only_on_change_and_keeps_times() {
        let current = json!({"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
            "message": "", "observedGeneration": 1, "lastTransitionTime": "T0"}], "extra": 1});
        let same = json!({"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
            "message": "", "observedGeneration": 1, "lastTransitionTime": "T5"}]});
        assert_eq!(object_status_patch("GatewayClass", &current, &same), None);
        let newer_gen = json!({"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
            "message": "", "observedGeneration": 2, "lastTransitionTime": "T5"}]});
        let p = object_status_patch("GatewayClass", &current, &newer_gen).unwrap();
        assert_eq!(p["status"]["conditions"][0]["observedGeneration"], 2);
        assert_eq!(p["status"]["conditions"][0]["lastTransitionTime"], "T0");
        assert!(p["status"].get("extra").is_none());
        assert!(object_status_patch("Gateway", &Value::Null, &same).is_some());
    }

    #[test]
    fn events_on_new_rejections_and_conflicts_only() {
        let cur = json!({"parents": [parent("gw", US, "True", "T0")]});
        let bad = json!({"parents": [parent("gw", US, "False", "T1")]});
        let ev = notable_transitions("HTTPRoute", &cur, &bad);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].0, "RouteRejected");
        assert!(notable_transitions("HTTPRoute", &bad, &bad).is_empty());
        let gw = |c: &str| json!({"listeners": [{"name": "http", "conditions": [{"type": "Conflicted", "status": c, "reason": "HostnameConflict", "message": "m"}]}]});
        assert_eq!(
            notable_transitions("Gateway", &gw("False"), &gw("True"))[0].0,
            "ListenerConflict"
        );
        assert!(notable_transitions("Gateway", &gw("True"), &gw("True")).is_empty());
    }
}
