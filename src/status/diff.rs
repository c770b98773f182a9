//! What the status writer must change on one object, given the status it carries in the
//! cluster: condition times carried over from it (the same rule as between publications), the
//! merge patch of a GatewayClass or Gateway status, the `parents[]` of a route (ours replaced,
//! other controllers' kept, guarded by the read `resourceVersion`), and the transitions that
//! deserve an Event. Pure: the writer sends what this returns.

use crate::kinds::httproute::{HttpRouteStatus, HttpRouteStatusParents};
use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicyStatus;
use gateway_api::apis::standard::gatewayclasses::GatewayClassStatus;
use gateway_api::apis::standard::gateways::GatewayStatus;
use gateway_api::apis::standard::listenersets::ListenerSetStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::Serialize;
use serde_json::{json, Value};

use super::body::{carry_class, carry_gateway, carry_listener_set, carry_policy, carry_route};
use super::conditions::{is_problem_of_type, ConditionType};
use super::{ObjectKind, ObjectStatus, StatusBody};

/// The status an object carries in the cluster, as the reflectors read it; `None` when it has
/// none yet.
#[derive(Debug, Clone, Copy)]
pub enum Carried<'a> {
    GatewayClass(Option<&'a GatewayClassStatus>),
    Gateway(Option<&'a GatewayStatus>),
    ListenerSet(Option<&'a ListenerSetStatus>),
    /// A route of any kind, its status in the shape every kind shares
    /// ([`crate::kinds::routes::RouteKind::route_status`]).
    Route(Option<&'a HttpRouteStatus>),
    BackendTlsPolicy(Option<&'a BackendTlsPolicyStatus>),
    TrafficPolicy(Option<&'a crate::kinds::crd::TrafficPolicyStatus>),
}

/// A transition worth an Event: a route parent newly not accepted, a listener newly in
/// conflict. Emitted as a Warning by the writer once its patch is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notable {
    pub reason: &'static str,
    pub note: String,
}

/// One status write: the merge patch to send to the object's `/status`, and the Events it
/// deserves.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusPatch {
    /// `{"status": ...}`, plus `metadata.resourceVersion` for routes.
    pub body: Value,
    pub notable: Vec<Notable>,
}

impl StatusPatch {
    /// The status part of the patch: two patches with equal status parts make the same write.
    pub fn status(&self) -> &Value {
        &self.body["status"]
    }
}

/// The computed status cannot be compared with the object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    #[error("the computed status of {kind} {name} is not a {kind} status")]
    NotTyped { kind: ObjectKind, name: String },
    #[error("{kind} {name} was compared with the status of another kind")]
    OtherKind { kind: ObjectKind, name: String },
}

/// The write that makes an object carry `desired`, or `None` when every field we compute
/// already has the value we want (times carried over from `carried`, fields we do not compute
/// left alone). Routes compare and replace only the `parents[]` entries of `controller`, in any
/// order, so two controllers never fight over ordering; `resource_version` (the one `carried`
/// was read at) guards their patch, as the list is replaced whole.
pub fn patch(
    desired: &ObjectStatus,
    carried: Carried<'_>,
    resource_version: Option<&str>,
    controller: &str,
) -> Result<Option<StatusPatch>, DiffError> {
    let (kind, name) = (desired.kind, desired.name.to_string());
    let body = desired
        .status
        .typed(kind)
        .ok_or_else(|| DiffError::NotTyped {
            kind,
            name: name.clone(),
        })?;
    Ok(match (&*body, carried) {
        (StatusBody::GatewayClass(want), Carried::GatewayClass(current)) => {
            let mut want = want.clone();
            if let Some(c) = current {
                carry_class(c, &mut want);
            }
            object_patch(current, &want).map(|body| StatusPatch {
                body,
                notable: Vec::new(),
            })
        }
        (StatusBody::Gateway(want), Carried::Gateway(current)) => {
            let mut want = want.clone();
            if let Some(c) = current {
                carry_gateway(c, &mut want);
            }
            object_patch(current, &want).map(|body| StatusPatch {
                body,
                notable: conflicted_listeners(current, &want),
            })
        }
        (StatusBody::ListenerSet(want), Carried::ListenerSet(current)) => {
            let mut want = want.clone();
            if let Some(c) = current {
                carry_listener_set(c, &mut want);
            }
            object_patch(current, &want).map(|body| StatusPatch {
                body,
                notable: Vec::new(),
            })
        }
        (StatusBody::Route(want), Carried::Route(current)) => {
            route_patch(current, &want.parents, resource_version, controller)
        }
        (StatusBody::BackendTlsPolicy(want), Carried::BackendTlsPolicy(current)) => {
            policy_patch(current, want, resource_version, controller)
        }
        (StatusBody::TrafficPolicy(want), Carried::TrafficPolicy(current)) => {
            // Both kinds' status is the spec's `PolicyStatus`: one rule for their ancestors.
            let as_policy = |s: &crate::kinds::crd::TrafficPolicyStatus| BackendTlsPolicyStatus {
                ancestors: s.ancestors.clone(),
            };
            let summary =
                |s: &crate::kinds::crd::TrafficPolicyStatus| (s.accepted.clone(), s.targets);
            let summary_changed = current.map(summary) != Some(summary(want));
            let ancestors = policy_patch(
                current.map(as_policy).as_ref(),
                &as_policy(want),
                resource_version,
                controller,
            );
            with_policy_summary(ancestors, summary_changed.then_some(want))
        }
        _ => return Err(DiffError::OtherKind { kind, name }),
    })
}

/// The write that takes `controller`'s entries off a route that no longer names one of its
/// Gateways (other controllers' entries stay), or `None` when it carries none.
pub fn release_route(
    carried: Option<&HttpRouteStatus>,
    resource_version: Option<&str>,
    controller: &str,
) -> Option<StatusPatch> {
    route_patch(carried, &[], resource_version, controller)
}

/// Whether a route carries `parents[]` entries of `controller`.
pub fn has_parents_of(carried: Option<&HttpRouteStatus>, controller: &str) -> bool {
    carried.is_some_and(|s| s.parents.iter().any(|p| p.controller_name == controller))
}

fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// `{"status": desired}` unless every field of `desired` already has its value in `current`.
fn object_patch<T: Serialize>(current: Option<&T>, desired: &T) -> Option<Value> {
    let desired = to_json(desired);
    let current = to_json(&current);
    let Value::Object(fields) = &desired else {
        return None;
    };
    let same = fields.iter().all(|(k, v)| current.get(k) == Some(v));
    (!same).then(|| json!({ "status": desired }))
}

fn sorted_by_ref(mut v: Vec<Value>) -> Vec<Value> {
    v.sort_by_key(|p| p.get("parentRef").map(Value::to_string));
    v
}

/// A policy's new `ancestors[]`: as [`route_patch`] does for `parents[]`, other controllers'
/// entries kept, ours replaced (times carried over), `None` when ours already match.
fn policy_patch(
    carried: Option<&BackendTlsPolicyStatus>,
    desired: &BackendTlsPolicyStatus,
    resource_version: Option<&str>,
    controller: &str,
) -> Option<StatusPatch> {
    let current = carried.map(|s| s.ancestors.as_slice()).unwrap_or_default();
    let (current_ours, theirs): (Vec<_>, Vec<_>) = current
        .iter()
        .cloned()
        .partition(|a| a.controller_name == controller);
    let current_ours = BackendTlsPolicyStatus {
        ancestors: current_ours,
    };
    let mut ours = desired.clone();
    carry_policy(&current_ours, &mut ours);
    let sorted = |s: &BackendTlsPolicyStatus| {
        let mut v: Vec<Value> = s.ancestors.iter().map(to_json).collect();
        v.sort_by_key(|a| a.get("ancestorRef").map(Value::to_string));
        v
    };
    if sorted(&current_ours) == sorted(&ours) {
        return None;
    }
    let mut ancestors: Vec<Value> = theirs.iter().map(to_json).collect();
    ancestors.extend(ours.ancestors.iter().map(to_json));
    Some(StatusPatch {
        body: json!({
            "metadata": {"resourceVersion": resource_version},
            "status": {"ancestors": ancestors},
        }),
        notable: Vec::new(),
    })
}

/// `patch` (the ancestors' write, if any) with the TrafficPolicy summary of `want` added
/// when it changed: the summary is the controller's alone, so it is merged in as it is.
fn with_policy_summary(
    patch: Option<StatusPatch>,
    want: Option<&crate::kinds::crd::TrafficPolicyStatus>,
) -> Option<StatusPatch> {
    let Some(want) = want else {
        return patch;
    };
    let mut patch = patch.unwrap_or_else(|| StatusPatch {
        body: json!({"status": {}}),
        notable: Vec::new(),
    });
    patch.body["status"]["accepted"] = json!(want.accepted);
    patch.body["status"]["targets"] = json!(want.targets);
    Some(patch)
}

/// The route's new `parents[]`: other controllers' entries as they are, then ours as computed
/// (times carried over from our current entries); `None` when ours already match.
fn route_patch(
    carried: Option<&HttpRouteStatus>,
    desired: &[HttpRouteStatusParents],
    resource_version: Option<&str>,
    controller: &str,
) -> Option<StatusPatch> {
    let current = carried.map(|s| s.parents.as_slice()).unwrap_or_default();
    let (current_ours, theirs): (Vec<_>, Vec<_>) = current
        .iter()
        .cloned()
        .partition(|p| p.controller_name == controller);
    let current_ours = HttpRouteStatus {
        parents: current_ours,
    };
    let mut ours = HttpRouteStatus {
        parents: desired.to_vec(),
    };
    carry_route(&current_ours, &mut ours);
    let json = |ps: &[HttpRouteStatusParents]| ps.iter().map(to_json).collect::<Vec<_>>();
    let ours_json = json(&ours.parents);
    if sorted_by_ref(json(&current_ours.parents)) == sorted_by_ref(ours_json.clone()) {
        return None;
    }
    let notable = rejected_parents(current, theirs.iter().chain(&ours.parents));
    let mut parents = json(&theirs);
    parents.extend(ours_json);
    Some(StatusPatch {
        body: json!({
            "metadata": {"resourceVersion": resource_version},
            "status": {"parents": parents},
        }),
        notable,
    })
}

fn first(conditions: &[Condition], ty: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == ty)
}

/// Whether the first condition of type `ty` reports a problem.
fn troubled(conditions: &[Condition], ty: ConditionType) -> bool {
    first(conditions, ty).is_some_and(|c| is_problem_of_type(c, ty))
}

fn detail(conditions: &[Condition], ty: ConditionType) -> String {
    first(conditions, ty)
        .map(|c| format!("{}: {}", c.reason, c.message))
        .unwrap_or_default()
}

/// Parents about to be written whose `Accepted` newly reports a problem, each compared with
/// the first current parent with the same `parentRef`.
fn rejected_parents<'a>(
    current: &[HttpRouteStatusParents],
    next: impl Iterator<Item = &'a HttpRouteStatusParents>,
) -> Vec<Notable> {
    next.filter(|p| troubled(&p.conditions, ConditionType::Accepted))
        .filter(|p| {
            let was = current.iter().find(|b| b.parent_ref == p.parent_ref);
            !was.is_some_and(|b| troubled(&b.conditions, ConditionType::Accepted))
        })
        .map(|p| Notable {
            reason: "RouteRejected",
            note: format!(
                "parent {}: {}",
                to_json(&p.parent_ref),
                detail(&p.conditions, ConditionType::Accepted)
            ),
        })
        .collect()
}

/// Listeners about to be written whose `Conflicted` newly reports a problem, each compared with
/// the current listener of the same name.
fn conflicted_listeners(current: Option<&GatewayStatus>, next: &GatewayStatus) -> Vec<Notable> {
    let before = current
        .and_then(|s| s.listeners.as_deref())
        .unwrap_or_default();
    next.listeners
        .iter()
        .flatten()
        .filter(|l| troubled(&l.conditions, ConditionType::Conflicted))
        .filter(|l| {
            let was = before.iter().find(|b| b.name == l.name);
            !was.is_some_and(|b| troubled(&b.conditions, ConditionType::Conflicted))
        })
        .map(|l| Notable {
            reason: "ListenerConflict",
            note: format!(
                "listener {}: {}",
                Value::from(l.name.as_str()),
                detail(&l.conditions, ConditionType::Conflicted)
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: &str = "edgeplane.dev/gateway-controller";

    fn parent(gw: &str, controller: &str, accepted: &str, time: &str) -> HttpRouteStatusParents {
        serde_json::from_value(
            json!({"parentRef": {"name": gw}, "controllerName": controller,
            "conditions": [{"type": "Accepted", "status": accepted, "reason": "R", "message": "m",
             "observedGeneration": 1, "lastTransitionTime": time}]}),
        )
        .unwrap()
    }

    fn route(parents: Vec<HttpRouteStatusParents>) -> HttpRouteStatus {
        HttpRouteStatus { parents }
    }

    fn desired_route(parents: Vec<HttpRouteStatusParents>) -> ObjectStatus {
        let body = StatusBody::Route(std::sync::Arc::new(route(parents)));
        ObjectStatus::new(
            ObjectKind::Route(crate::kinds::routes::RouteKindId::HttpRoute),
            Some("ns"),
            "r",
            Some(1),
            body,
        )
    }

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-02T00:00:00Z";

    #[test]
    fn route_parents_keep_other_controllers_and_skip_equal() {
        let theirs = parent("other", "example.com/ctl", "True", T0);
        let current = route(vec![parent("gw", US, "True", T0), theirs.clone()]);
        let diff = |want: Vec<HttpRouteStatusParents>| {
            let c = Carried::Route(Some(&current));
            patch(&desired_route(want), c, Some("7"), US).unwrap()
        };
        // Same status, newer time: nothing to write.
        assert_eq!(diff(vec![parent("gw", US, "True", T1)]), None);
        // Status changed: ours replaced, theirs kept untouched, guarded by the version read.
        let next = diff(vec![parent("gw", US, "False", T1)]).unwrap();
        assert_eq!(next.body["metadata"]["resourceVersion"], "7");
        let parents = &next.status()["parents"];
        assert_eq!(parents[0], to_json(&theirs));
        assert_eq!(parents[1]["conditions"][0]["status"], "False");
        assert_eq!(parents[1]["conditions"][0]["lastTransitionTime"], T1);
        assert_eq!(next.notable.len(), 1);
        assert_eq!(next.notable[0].reason, "RouteRejected");
        assert_eq!(next.notable[0].note, r#"parent {"name":"gw"}: R: m"#);
        // Order of our entries does not matter.
        let two = route(vec![
            parent("a", US, "True", T0),
            parent("b", US, "True", T0),
        ]);
        let swapped = vec![parent("b", US, "True", T1), parent("a", US, "True", T1)];
        let c = Carried::Route(Some(&two));
        assert_eq!(patch(&desired_route(swapped), c, None, US), Ok(None));
        // No longer ours: our entries go, theirs stay.
        let released = release_route(Some(&current), Some("7"), US).unwrap();
        assert_eq!(released.status()["parents"], json!([to_json(&theirs)]));
        assert!(release_route(Some(&route(vec![theirs])), None, US).is_none());
        assert!(has_parents_of(Some(&current), US));
        assert!(!has_parents_of(None, US));
    }

    fn gateway_class(accepted: &str, generation: i64, time: &str) -> GatewayClassStatus {
        serde_json::from_value(
            json!({"conditions": [{"type": "Accepted", "status": accepted,
            "reason": "Accepted", "message": "", "observedGeneration": generation,
            "lastTransitionTime": time}]}),
        )
        .unwrap()
    }

    #[test]
    fn object_patch_only_on_change_and_keeps_times() {
        let current = gateway_class("True", 1, T0);
        let diff = |want: GatewayClassStatus, current: Option<&GatewayClassStatus>| {
            let body = StatusBody::GatewayClass(Box::new(want));
            let desired = ObjectStatus::new(ObjectKind::GatewayClass, None, "c", Some(1), body);
            patch(&desired, Carried::GatewayClass(current), None, US).unwrap()
        };
        assert_eq!(diff(gateway_class("True", 1, T1), Some(&current)), None);
        let p = diff(gateway_class("True", 2, T1), Some(&current)).unwrap();
        assert_eq!(p.status()["conditions"][0]["observedGeneration"], 2);
        assert_eq!(p.status()["conditions"][0]["lastTransitionTime"], T0);
        assert!(p.body.get("metadata").is_none());
        assert!(diff(gateway_class("True", 1, T1), None).is_some());
        let desired = desired_route(Vec::new());
        assert!(matches!(
            patch(&desired, Carried::GatewayClass(None), None, US),
            Err(DiffError::OtherKind { .. })
        ));
    }

    #[test]
    fn events_on_new_conflicts_only() {
        let gw = |c: &str| -> GatewayStatus {
            serde_json::from_value(json!({"listeners": [{"name": "http", "attachedRoutes": 0,
                "supportedKinds": [], "conditions": [{"type": "Conflicted", "status": c,
                "reason": "HostnameConflict", "message": "m", "lastTransitionTime": T0}]}]}))
            .unwrap()
        };
        let notable = conflicted_listeners(Some(&gw("False")), &gw("True"));
        assert_eq!(
            notable,
            [Notable {
                reason: "ListenerConflict",
                note: r#"listener "http": HostnameConflict: m"#.into()
            }]
        );
        assert!(conflicted_listeners(Some(&gw("True")), &gw("True")).is_empty());
        assert_eq!(conflicted_listeners(None, &gw("True")).len(), 1);
        let bad = [parent("gw", US, "False", T1)];
        assert!(rejected_parents(&bad, bad.iter()).is_empty());
    }
}
