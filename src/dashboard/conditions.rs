//! One line per object from the entries of `/debug/status`: the state of its Accepted,
//! Programmed and ResolvedRefs conditions (across every parent or ancestor for routes and
//! policies), the reason and message that explain it, and since when. Shared by the dashboard
//! and `edgeplane status`; works on the JSON form so that it reads any kind alike.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The conditions of one object summed up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub kind: String,
    /// Empty for cluster-scoped objects (GatewayClass).
    pub namespace: String,
    pub name: String,
    /// `True`, `False`, `Unknown`, or empty when the object has no such condition.
    pub accepted: String,
    pub programmed: String,
    pub resolved_refs: String,
    /// The reason of the first condition that is not `True` (the one to read first), else of
    /// Accepted.
    pub reason: String,
    /// The message that goes with `reason`.
    pub message: String,
    /// The earliest `lastTransitionTime` among the conditions (RFC 3339), empty without one.
    pub since: String,
}

impl Summary {
    /// True when some condition is `False` or `Unknown`: the object needs attention.
    pub fn is_broken(&self) -> bool {
        [&self.accepted, &self.programmed, &self.resolved_refs]
            .iter()
            .any(|s| !s.is_empty() && *s != "True")
    }
}

/// Every condition of a status entry: its own, its listeners' for a Gateway are not included
/// (they have rows of their own on the dashboard), its parents' (routes) and ancestors'
/// (policies).
pub fn conditions(entry: &Value) -> Vec<&Value> {
    let status = &entry["status"];
    let mut out: Vec<&Value> = status["conditions"]
        .as_array()
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    for list in ["parents", "ancestors"] {
        for p in status[list].as_array().into_iter().flatten() {
            out.extend(p["conditions"].as_array().into_iter().flatten());
        }
    }
    out
}

/// The summary of one entry of `/debug/status`.
pub fn summarize(entry: &Value) -> Summary {
    let conds = conditions(entry);
    summarize_conditions(
        str_of(&entry["kind"]),
        str_of(&entry["namespace"]),
        str_of(&entry["name"]),
        &conds,
    )
}

/// The summary of a list of conditions (a Gateway listener's, say).
pub fn summarize_conditions(kind: &str, namespace: &str, name: &str, conds: &[&Value]) -> Summary {
    // Across parents, one False makes the column False; Unknown next; True only when all are.
    let state = |ty: &str| {
        let mut out = String::new();
        for c in conds.iter().filter(|c| c["type"] == ty) {
            let s = str_of(&c["status"]);
            let rank = |s: &str| match s {
                "False" => 3,
                "Unknown" => 2,
                "True" => 1,
                _ => 0,
            };
            if rank(s) > rank(&out) {
                out = s.to_owned();
            }
        }
        out
    };
    // A condition in its bad state: not True for most, True for Conflicted or Unsupported.
    let explaining = conds
        .iter()
        .find(|c| (c["status"] == "True") != is_polarity_positive(str_of(&c["type"])))
        .or_else(|| conds.iter().find(|c| c["type"] == "Accepted"))
        .or_else(|| conds.first());
    let since = conds
        .iter()
        .map(|c| str_of(&c["lastTransitionTime"]))
        .filter(|t| !t.is_empty())
        .min()
        .unwrap_or_default();
    Summary {
        kind: kind.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        accepted: state("Accepted"),
        programmed: state("Programmed"),
        resolved_refs: state("ResolvedRefs"),
        reason: explaining
            .map(|c| str_of(&c["reason"]))
            .unwrap_or_default()
            .to_owned(),
        message: explaining
            .map(|c| str_of(&c["message"]))
            .unwrap_or_default()
            .to_owned(),
        since: since.to_owned(),
    }
}

/// Conditions whose `True` is the good state (Conflicted, say, is the opposite).
fn is_polarity_positive(ty: &str) -> bool {
    !matches!(ty, "Conflicted" | "OverlappingTLSConfig" | "Unsupported")
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_false_parent_condition_explains_the_route() {
        let entry = json!({
            "kind": "HTTPRoute", "namespace": "default", "name": "r",
            "status": {"parents": [
                {"conditions": [
                    {"type": "Accepted", "status": "True", "reason": "Accepted",
                     "lastTransitionTime": "2026-01-02T00:00:00Z"},
                    {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs"}]},
                {"conditions": [
                    {"type": "Accepted", "status": "True", "reason": "Accepted",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "ResolvedRefs", "status": "False", "reason": "BackendNotFound",
                     "message": "Service default/missing not found"}]}
            ]}
        });
        let s = summarize(&entry);
        assert_eq!(
            (
                s.accepted.as_str(),
                s.resolved_refs.as_str(),
                s.programmed.as_str()
            ),
            ("True", "False", "")
        );
        assert_eq!(s.reason, "BackendNotFound");
        assert!(s.message.contains("missing"));
        assert_eq!(s.since, "2026-01-01T00:00:00Z");
        assert!(s.is_broken());
    }

    #[test]
    fn a_healthy_gateway_reads_accepted() {
        let entry = json!({
            "kind": "Gateway", "namespace": "default", "name": "gw",
            "status": {"conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok"},
                {"type": "Programmed", "status": "True", "reason": "Programmed"}]}
        });
        let s = summarize(&entry);
        assert_eq!((s.reason.as_str(), s.message.as_str()), ("Accepted", "ok"));
        assert!(!s.is_broken());
    }

    #[test]
    fn an_unsupported_ingress_reads_its_reason() {
        let entry = json!({
            "kind": "Ingress", "namespace": "default", "name": "shop",
            "status": {"parents": [{"conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted"},
                {"type": "Unsupported", "status": "True", "reason": "UnsupportedValue",
                 "message": "annotation x is not supported yet"}]}]}
        });
        let s = summarize(&entry);
        assert_eq!(s.reason, "UnsupportedValue");
        assert!(s.message.contains("annotation x"));
        assert!(!s.is_broken(), "it is served");
    }
}
