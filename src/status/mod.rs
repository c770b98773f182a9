//! The status every object should carry, as computed by `translate`: served at `/debug/status`,
//! printed by `edgeplane check`, and written by the leader in a cluster. Pure.

mod body;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use body::StatusBody;

/// The computed status of every object the translator owns (our GatewayClasses, their Gateways,
/// and routes that reference those Gateways), sorted by kind, namespace and name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StatusReport {
    pub entries: Vec<ObjectStatus>,
}

/// One object's status, in the exact shape of its status subresource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStatus {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(default)]
    pub generation: Option<i64>,
    /// The typed status (`GatewayClassStatus`, `GatewayStatus`, `HTTPRouteStatus`); JSON when
    /// serialized.
    pub status: StatusBody,
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

impl StatusReport {
    /// Sorts entries by kind order, namespace and name, so output is stable.
    pub fn sort(&mut self) {
        fn kind_rank(kind: &str) -> u8 {
            match kind {
                "GatewayClass" => 0,
                "Gateway" => 1,
                _ => 2,
            }
        }
        self.entries.sort_by(|a, b| {
            kind_rank(&a.kind)
                .cmp(&kind_rank(&b.kind))
                .then_with(|| a.kind.cmp(&b.kind))
                .then_with(|| a.namespace.cmp(&b.namespace))
                .then_with(|| a.name.cmp(&b.name))
        });
    }

    /// The entry of one object, if the translator owns it.
    pub fn get(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<&ObjectStatus> {
        self.entries
            .iter()
            .find(|e| e.kind == kind && e.namespace.as_deref() == namespace && e.name == name)
    }

    /// Every condition that reports a problem: `Accepted`, `ResolvedRefs` or `Programmed` False,
    /// or `Conflicted` True, wherever it appears (object, listener or route parent).
    pub fn problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        for e in &self.entries {
            let object = match &e.namespace {
                Some(ns) => format!("{} {}/{}", e.kind, ns, e.name),
                None => format!("{} {}", e.kind, e.name),
            };
            e.status.problems(&object, &mut out);
        }
        out
    }

    /// Keeps each condition's `lastTransitionTime` from `previous` when its status did not change,
    /// so times move only on real transitions and unchanged output compares equal.
    pub fn carry_transition_times(&mut self, previous: &StatusReport) {
        let index: HashMap<(&str, Option<&str>, &str), &ObjectStatus> = previous
            .entries
            .iter()
            .map(|e| {
                (
                    (e.kind.as_str(), e.namespace.as_deref(), e.name.as_str()),
                    e,
                )
            })
            .collect();
        for e in &mut self.entries {
            let key = (e.kind.as_str(), e.namespace.as_deref(), e.name.as_str());
            if let Some(p) = index.get(&key) {
                e.status.carry_from(&p.status);
            }
        }
    }
}

fn collect_problems(v: &Value, object: &str, out: &mut Vec<Problem>) {
    let Value::Object(map) = v else { return };
    let scope = match (map.get("name"), map.get("parentRef")) {
        (Some(Value::String(n)), _) => format!("{object} listener {n}"),
        (_, Some(p)) => format!(
            "{object} parent {}",
            p.get("name").and_then(Value::as_str).unwrap_or("?")
        ),
        _ => object.to_owned(),
    };
    for (key, value) in map {
        match (key.as_str(), value) {
            ("conditions", Value::Array(conds)) => {
                for c in conds {
                    let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    let (ty, status) = (field("type"), field("status"));
                    let bad = match ty.as_str() {
                        "Accepted" | "ResolvedRefs" | "Programmed" => status == "False",
                        "Conflicted" => status == "True",
                        _ => false,
                    };
                    if bad {
                        out.push(Problem {
                            object: scope.clone(),
                            condition: ty,
                            status,
                            reason: field("reason"),
                            message: field("message"),
                        });
                    }
                }
            }
            (_, Value::Array(items)) => {
                for item in items {
                    collect_problems(item, object, out);
                }
            }
            (_, Value::Object(_)) => collect_problems(value, &scope, out),
            _ => {}
        }
    }
}

/// [`StatusBody::restamp`] on JSON: every `lastTransitionTime` under a `conditions` list.
fn restamp_json(v: &mut Value, now: &str) {
    match v {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match (key.as_str(), value) {
                    ("conditions", Value::Array(conds)) => {
                        for c in conds.iter_mut().filter_map(Value::as_object_mut) {
                            c.insert("lastTransitionTime".into(), Value::String(now.to_owned()));
                        }
                    }
                    (_, value) => restamp_json(value, now),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| restamp_json(i, now)),
        _ => {}
    }
}

/// Identity of a list element across rebuilds: listener name, or route parent + controller.
fn identity(v: &Value) -> Option<String> {
    if let Some(n) = v.get("name").and_then(Value::as_str) {
        return Some(n.to_owned());
    }
    let p = v.get("parentRef")?;
    Some(format!(
        "{p}|{}",
        v.get("controllerName").unwrap_or(&Value::Null)
    ))
}

/// [`StatusReport::carry_transition_times`] on the JSON form of one status (also used by the
/// status writer against what an object carries).
pub fn carry_json(prev: &Value, next: &mut Value) {
    let (Value::Object(pm), Value::Object(nm)) = (prev, next) else {
        return;
    };
    for (key, nv) in nm.iter_mut() {
        let Some(pv) = pm.get(key) else { continue };
        match (key.as_str(), pv, nv) {
            ("conditions", Value::Array(pc), Value::Array(nc)) => {
                for c in nc.iter_mut() {
                    let same = pc.iter().find(|p| p.get("type") == c.get("type"));
                    if let (Some(p), Value::Object(cm)) = (same, c) {
                        if p.get("status") == cm.get("status") {
                            if let Some(t) = p.get("lastTransitionTime") {
                                cm.insert("lastTransitionTime".into(), t.clone());
                            }
                        }
                    }
                }
            }
            (_, Value::Array(pa), Value::Array(na)) => {
                for item in na.iter_mut() {
                    let id = identity(item);
                    if let Some(p) =
                        id.and_then(|id| pa.iter().find(|p| identity(p).as_deref() == Some(&id)))
                    {
                        carry_json(p, item);
                    }
                }
            }
            (_, pv @ Value::Object(_), nv @ Value::Object(_)) => carry_json(pv, nv),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(status: Value) -> StatusReport {
        StatusReport {
            entries: vec![ObjectStatus {
                api_version: "gateway.networking.k8s.io/v1".into(),
                kind: "Gateway".into(),
                namespace: Some("ns".into()),
                name: "gw".into(),
                generation: Some(1),
                status: status.into(),
            }],
        }
    }

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let prev = entry(json!({"conditions": [
            {"type": "Accepted", "status": "True", "lastTransitionTime": "T0"},
            {"type": "Programmed", "status": "True", "lastTransitionTime": "T0"}],
            "listeners": [{"name": "http", "conditions": [{"type": "Accepted", "status": "True", "lastTransitionTime": "T0"}]}]}));
        let mut next = entry(json!({"conditions": [
            {"type": "Accepted", "status": "True", "lastTransitionTime": "T1"},
            {"type": "Programmed", "status": "False", "lastTransitionTime": "T1"}],
            "listeners": [{"name": "http", "conditions": [{"type": "Accepted", "status": "True", "lastTransitionTime": "T1"}]}]}));
        next.carry_transition_times(&prev);
        let s = next.entries[0].status.to_json();
        assert_eq!(s["conditions"][0]["lastTransitionTime"], "T0");
        assert_eq!(s["conditions"][1]["lastTransitionTime"], "T1");
        assert_eq!(
            s["listeners"][0]["conditions"][0]["lastTransitionTime"],
            "T0"
        );
    }

    #[test]
    fn problems_name_the_listener() {
        let r = entry(
            json!({"conditions": [{"type": "Accepted", "status": "True"}],
            "listeners": [{"name": "https", "conditions": [
                {"type": "Accepted", "status": "False", "reason": "UnsupportedProtocol", "message": "m"},
                {"type": "Conflicted", "status": "False", "reason": "NoConflicts"}]}]}),
        );
        let p = r.problems();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].object, "Gateway ns/gw listener https");
        assert_eq!(p[0].reason, "UnsupportedProtocol");
    }
}
