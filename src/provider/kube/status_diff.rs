//! What the status writer must change, as pure functions over JSON: condition times carried
//! over from the object, the merge patch of a GatewayClass or Gateway status, the merged
//! `parents[]` of a route (ours replaced, other controllers' kept), and the transitions that
//! deserve an Event. No I/O.

use serde_json::{json, Value};

/// Copies `lastTransitionTime` from `current` into `desired` wherever a condition kept its
/// status, so that the comparison (and the object) only changes on real transitions.
fn carry_times(current: &Value, desired: &mut Value) {
    crate::status::carry_json(current, desired);
}

/// The merge patch of a GatewayClass or Gateway status, or `None` when every field we compute
/// already has the value we want (fields we do not compute are left alone).
pub fn object_status_patch(current: &Value, desired: &Value) -> Option<Value> {
    let mut desired = desired.clone();
    carry_times(current, &mut desired);
    let Value::Object(fields) = &desired else {
        return None;
    };
    let same = fields.iter().all(|(k, v)| current.get(k) == Some(v));
    (!same).then(|| json!({ "status": desired }))
}

pub fn is_ours(parent: &Value, controller: &str) -> bool {
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
    carry_times(&json!({ "parents": current_ours }), &mut ours);
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
        assert_eq!(object_status_patch(&current, &same), None);
        let newer_gen = json!({"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
            "message": "", "observedGeneration": 2, "lastTransitionTime": "T5"}]});
        let p = object_status_patch(&current, &newer_gen).unwrap();
        assert_eq!(p["status"]["conditions"][0]["observedGeneration"], 2);
        assert_eq!(p["status"]["conditions"][0]["lastTransitionTime"], "T0");
        assert!(p["status"].get("extra").is_none());
        assert!(object_status_patch(&Value::Null, &same).is_some());
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
