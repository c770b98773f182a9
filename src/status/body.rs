//! The status body of one object: the typed Gateway API status the translator builds, or JSON
//! read back from outside. Keeping the translator's output typed spares a JSON tree per object
//! on every translation; it becomes JSON only when it is served, printed or written. Every walk
//! over a status (transition times, problems, restamping) is written once, on the typed form; a
//! JSON body takes part through its typed form when it parses as one. Pure.

use std::borrow::Cow;
use std::sync::Arc;

use crate::kinds::httproute::HttpRouteStatusParents;
use gateway_api::apis::standard::backendtlspolicies::{
    BackendTlsPolicyStatus, BackendTlsPolicyStatusAncestors,
};
use gateway_api::apis::standard::gatewayclasses::GatewayClassStatus;
use gateway_api::apis::standard::gateways::GatewayStatus;
use gateway_api::apis::standard::listenersets::ListenerSetStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::conditions::{carry_changes, carry_times, carry_to, is_problem};
use super::{ObjectKind, Problem};
use crate::kinds::crd::TrafficPolicyStatus;
use crate::kinds::routes::RouteStatus;

/// One object's status. Serializes exactly as the JSON of the typed status (object keys sorted),
/// and deserializes into [`StatusBody::Json`]. A route's status is shared (`Arc`): the
/// translator reuses an unchanged route's status, and a report holds thousands of them. The
/// other kinds are boxed, so that a body is two words: a report holds one per route, and a
/// Gateway's status inline would make each of them as large.
#[derive(Debug, Clone, PartialEq)]
pub enum StatusBody {
    GatewayClass(Box<GatewayClassStatus>),
    Gateway(Box<GatewayStatus>),
    ListenerSet(Box<ListenerSetStatus>),
    /// The status of a route of any kind: every kind's is the spec's `RouteStatus`, held in
    /// one type, so every walk over route statuses serves every kind.
    Route(Arc<RouteStatus>),
    BackendTlsPolicy(Box<BackendTlsPolicyStatus>),
    /// A TrafficPolicy's status: the same `ancestors[]` shape as a BackendTLSPolicy's.
    TrafficPolicy(Box<TrafficPolicyStatus>),
    /// A status read back from JSON (`/debug/status`) or written by hand.
    Json(Box<Value>),
}

impl Default for StatusBody {
    fn default() -> Self {
        Self::Json(Box::new(Value::Null))
    }
}

impl From<Value> for StatusBody {
    fn from(v: Value) -> Self {
        Self::Json(Box::new(v))
    }
}

impl StatusBody {
    /// The status as JSON, in the exact shape of the object's status subresource.
    pub fn to_json(&self) -> Cow<'_, Value> {
        let v = match self {
            Self::GatewayClass(s) => serde_json::to_value(s),
            Self::Gateway(s) => serde_json::to_value(s),
            Self::ListenerSet(s) => serde_json::to_value(s),
            Self::Route(s) => serde_json::to_value(s),
            Self::BackendTlsPolicy(s) => serde_json::to_value(s),
            Self::TrafficPolicy(s) => serde_json::to_value(s),
            Self::Json(v) => return Cow::Borrowed(v),
        };
        Cow::Owned(v.unwrap_or(Value::Null))
    }

    /// The JSON of a status that was read back as JSON (as `/debug/status` deserializes).
    pub fn as_json(&self) -> Option<&Value> {
        match self {
            Self::Json(v) => Some(v),
            _ => None,
        }
    }

    /// The kind's typed status: this body when it is typed as `kind`, else parsed from its
    /// JSON. `None` when it is neither (the JSON is not a valid status of that kind).
    pub fn typed(&self, kind: ObjectKind) -> Option<Cow<'_, StatusBody>> {
        match (kind, self) {
            (ObjectKind::GatewayClass, Self::GatewayClass(_))
            | (ObjectKind::Gateway, Self::Gateway(_))
            | (ObjectKind::ListenerSet, Self::ListenerSet(_))
            | (ObjectKind::Route(_), Self::Route(_))
            | (ObjectKind::BackendTlsPolicy, Self::BackendTlsPolicy(_))
            | (ObjectKind::TrafficPolicy, Self::TrafficPolicy(_)) => Some(Cow::Borrowed(self)),
            (_, Self::Json(v)) => {
                let typed = match kind {
                    ObjectKind::GatewayClass => {
                        Self::GatewayClass(Box::new(GatewayClassStatus::deserialize(&**v).ok()?))
                    }
                    ObjectKind::Gateway => {
                        Self::Gateway(Box::new(GatewayStatus::deserialize(&**v).ok()?))
                    }
                    ObjectKind::ListenerSet => {
                        Self::ListenerSet(Box::new(ListenerSetStatus::deserialize(&**v).ok()?))
                    }
                    ObjectKind::Route(_) => {
                        Self::Route(Arc::new(RouteStatus::deserialize(&**v).ok()?))
                    }
                    ObjectKind::BackendTlsPolicy => Self::BackendTlsPolicy(Box::new(
                        BackendTlsPolicyStatus::deserialize(&**v).ok()?,
                    )),
                    ObjectKind::TrafficPolicy => {
                        Self::TrafficPolicy(Box::new(TrafficPolicyStatus::deserialize(&**v).ok()?))
                    }
                };
                Some(Cow::Owned(typed))
            }
            _ => None,
        }
    }

    /// Turns a JSON body into its typed form for `kind`; false when it stays JSON.
    pub(super) fn make_typed(&mut self, kind: ObjectKind) -> bool {
        match self.typed(kind) {
            Some(Cow::Borrowed(_)) => true,
            Some(Cow::Owned(typed)) => {
                *self = typed;
                true
            }
            None => false,
        }
    }

    /// Keeps each condition's `lastTransitionTime` from `prev` when its status did not change.
    /// Both bodies must be typed as the same kind; otherwise nothing is carried.
    pub(super) fn carry_from(&mut self, prev: &StatusBody) {
        match (prev, self) {
            (Self::GatewayClass(p), Self::GatewayClass(n)) => carry_class(p, n),
            (Self::Gateway(p), Self::Gateway(n)) => carry_gateway(p, n),
            (Self::ListenerSet(p), Self::ListenerSet(n)) => carry_listener_set(p, n),
            (Self::Route(p), Self::Route(n)) => carry_shared_route(p, n),
            (Self::BackendTlsPolicy(p), Self::BackendTlsPolicy(n)) => carry_policy(p, n),
            (Self::TrafficPolicy(p), Self::TrafficPolicy(n)) => {
                carry_ancestors(&p.ancestors, &mut n.ancestors)
            }
            _ => {}
        }
    }

    /// Stamps `now` as every condition's `lastTransitionTime` (JSON bodies are left as they
    /// are), for a status recomputed after its translation: carrying times over from the
    /// previous status then leaves `now` only on the conditions that really changed.
    pub(super) fn restamp(&mut self, now: jiff::Timestamp) {
        let stamp = |conditions: &mut [Condition]| {
            for c in conditions {
                c.last_transition_time = Time(now);
            }
        };
        match self {
            Self::GatewayClass(s) => stamp(s.conditions.as_deref_mut().unwrap_or_default()),
            Self::Gateway(s) => {
                stamp(s.conditions.as_deref_mut().unwrap_or_default());
                for l in s.listeners.iter_mut().flatten() {
                    stamp(&mut l.conditions);
                }
            }
            Self::ListenerSet(s) => {
                stamp(s.conditions.as_deref_mut().unwrap_or_default());
                for l in s.listeners.iter_mut().flatten() {
                    stamp(&mut l.conditions);
                }
            }
            Self::Route(s) => {
                for p in &mut Arc::make_mut(s).parents {
                    stamp(&mut p.conditions);
                }
            }
            Self::BackendTlsPolicy(s) => {
                for a in &mut s.ancestors {
                    stamp(&mut a.conditions);
                }
            }
            Self::TrafficPolicy(s) => {
                for a in &mut s.ancestors {
                    stamp(&mut a.conditions);
                }
            }
            Self::Json(_) => {}
        }
    }

    /// True when carrying times from `prev` (see [`StatusBody::carry_from`]) would make this
    /// body equal to `prev`: both are routes, equal but for `lastTransitionTime`, and each
    /// parent and condition carries from its counterpart. Then `prev` can stand for the
    /// carried body, shared rather than copied. Only routes are looked at; they are the many.
    pub(super) fn carries_to(&self, prev: &StatusBody) -> bool {
        let (n, p) = match (self, prev) {
            (Self::Route(n), Self::Route(p)) => (n, p),
            _ => return false,
        };
        Arc::ptr_eq(n, p)
            || (n.parents.len() == p.parents.len()
                && n.parents.iter().enumerate().all(|(i, r)| {
                    let q = &p.parents[i];
                    p.parents.iter().position(|q| same_parent(q, r)) == Some(i)
                        && carry_to(&q.conditions, &r.conditions)
                }))
    }

    /// Appends every condition that reports a problem, in the order of the serialized status,
    /// each named by where it sits: `object`, a listener of it, or a route parent. Names are
    /// made only for the problems found: a report holds thousands of healthy routes.
    pub(super) fn problems(&self, object: &dyn Fn() -> String, out: &mut Vec<Problem>) {
        match self {
            Self::GatewayClass(s) => push_problems(object, s.conditions.as_deref(), out),
            Self::Gateway(s) => {
                push_problems(object, s.conditions.as_deref(), out);
                for l in s.listeners.iter().flatten() {
                    push_problems(
                        &within(object, "listener", &l.name),
                        Some(&l.conditions),
                        out,
                    );
                }
            }
            Self::ListenerSet(s) => {
                push_problems(object, s.conditions.as_deref(), out);
                for l in s.listeners.iter().flatten() {
                    push_problems(
                        &within(object, "listener", &l.name),
                        Some(&l.conditions),
                        out,
                    );
                }
            }
            Self::Route(s) => {
                for p in &s.parents {
                    let scope = within(object, "parent", &p.parent_ref.name);
                    push_problems(&scope, Some(&p.conditions), out);
                }
            }
            Self::BackendTlsPolicy(s) => ancestor_problems(object, &s.ancestors, out),
            Self::TrafficPolicy(s) => ancestor_problems(object, &s.ancestors, out),
            Self::Json(_) => {}
        }
    }
}

/// [`StatusBody::problems`] of a policy's `ancestors[]`.
fn ancestor_problems(
    object: &dyn Fn() -> String,
    ancestors: &[BackendTlsPolicyStatusAncestors],
    out: &mut Vec<Problem>,
) {
    for a in ancestors {
        let scope = within(object, "ancestor", &a.ancestor_ref.name);
        push_problems(&scope, Some(&a.conditions), out);
    }
}

/// [`StatusBody::carry_from`] for a GatewayClass: its conditions.
pub(super) fn carry_class(prev: &GatewayClassStatus, next: &mut GatewayClassStatus) {
    if let (Some(p), Some(n)) = (&prev.conditions, &mut next.conditions) {
        carry_times(p, n);
    }
}

/// [`StatusBody::carry_from`] for a Gateway: its conditions, and each listener's, matched by
/// listener name.
pub(super) fn carry_gateway(prev: &GatewayStatus, next: &mut GatewayStatus) {
    if let (Some(p), Some(n)) = (&prev.conditions, &mut next.conditions) {
        carry_times(p, n);
    }
    let (Some(pl), Some(nl)) = (&prev.listeners, &mut next.listeners) else {
        return;
    };
    for l in nl.iter_mut() {
        if let Some(q) = pl.iter().find(|q| q.name == l.name) {
            carry_times(&q.conditions, &mut l.conditions);
        }
    }
}

/// [`StatusBody::carry_from`] for a ListenerSet: as for a Gateway, its conditions and each
/// listener's, matched by listener name.
pub(super) fn carry_listener_set(prev: &ListenerSetStatus, next: &mut ListenerSetStatus) {
    if let (Some(p), Some(n)) = (&prev.conditions, &mut next.conditions) {
        carry_times(p, n);
    }
    let (Some(pl), Some(nl)) = (&prev.listeners, &mut next.listeners) else {
        return;
    };
    for l in nl.iter_mut() {
        if let Some(q) = pl.iter().find(|q| q.name == l.name) {
            carry_times(&q.conditions, &mut l.conditions);
        }
    }
}

/// [`StatusBody::carry_from`] for a route: each parent's conditions, the parent matched by
/// `parentRef` and `controllerName`.
pub(super) fn carry_route(prev: &RouteStatus, next: &mut RouteStatus) {
    for r in &mut next.parents {
        if let Some(q) = prev.parents.iter().find(|q| same_parent(q, r)) {
            carry_times(&q.conditions, &mut r.conditions);
        }
    }
}

/// [`carry_route`] on a shared status, copied only when a time actually changes.
fn carry_shared_route(prev: &RouteStatus, next: &mut Arc<RouteStatus>) {
    let changes = next.parents.iter().any(|r| {
        prev.parents
            .iter()
            .find(|q| same_parent(q, r))
            .is_some_and(|q| carry_changes(&q.conditions, &r.conditions))
    });
    if changes {
        carry_route(prev, Arc::make_mut(next));
    }
}

/// [`StatusBody::carry_from`] for a policy: each ancestor's conditions, the ancestor matched
/// by `ancestorRef` and `controllerName`.
pub(super) fn carry_policy(prev: &BackendTlsPolicyStatus, next: &mut BackendTlsPolicyStatus) {
    carry_ancestors(&prev.ancestors, &mut next.ancestors);
}

/// [`carry_policy`] on the `ancestors[]` of any policy kind.
pub(super) fn carry_ancestors(
    prev: &[BackendTlsPolicyStatusAncestors],
    next: &mut [BackendTlsPolicyStatusAncestors],
) {
    for a in next {
        if let Some(q) = prev.iter().find(|q| same_ancestor(q, a)) {
            carry_times(&q.conditions, &mut a.conditions);
        }
    }
}

/// The same ancestor entry of a policy's status: same `ancestorRef` and `controllerName`.
fn same_ancestor(a: &BackendTlsPolicyStatusAncestors, b: &BackendTlsPolicyStatusAncestors) -> bool {
    a.ancestor_ref == b.ancestor_ref && a.controller_name == b.controller_name
}

/// The same parent entry of a route's status: same `parentRef` and `controllerName`.
fn same_parent(a: &HttpRouteStatusParents, b: &HttpRouteStatusParents) -> bool {
    a.parent_ref == b.parent_ref && a.controller_name == b.controller_name
}

/// The name of a part of `object`: `<object> <what> <name>`.
fn within<'a>(
    object: &'a dyn Fn() -> String,
    what: &'static str,
    name: &'a str,
) -> impl Fn() -> String + 'a {
    move || format!("{} {what} {name}", object())
}

fn push_problems(
    scope: &dyn Fn() -> String,
    conditions: Option<&[Condition]>,
    out: &mut Vec<Problem>,
) {
    for c in conditions.unwrap_or_default() {
        if is_problem(c) {
            out.push(Problem {
                object: scope(),
                condition: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
            });
        }
    }
}

impl Serialize for StatusBody {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for StatusBody {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gateway_json(programmed: &str, time: &str) -> Value {
        json!({"conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
             "lastTransitionTime": time},
            {"type": "Programmed", "status": programmed, "reason": "P", "message": "m",
             "lastTransitionTime": time}],
            "listeners": [{"name": "http", "attachedRoutes": 1, "supportedKinds": [], "conditions": [
                {"type": "ResolvedRefs", "status": programmed, "reason": "R", "message": "",
                 "lastTransitionTime": time}]}]})
    }

    fn gateway(programmed: &str, time: &str) -> StatusBody {
        StatusBody::Gateway(Box::new(
            serde_json::from_value(gateway_json(programmed, time)).unwrap(),
        ))
    }

    fn route(accepted: &str, time: &str) -> StatusBody {
        let v = json!({"parents": [{"controllerName": "c/d", "parentRef": {"name": "gw"},
            "conditions": [{"type": "Accepted", "status": accepted, "reason": "A",
                "message": "", "lastTransitionTime": time}]}]});
        StatusBody::Route(Arc::new(serde_json::from_value(v).unwrap()))
    }

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-02T00:00:00Z";

    #[test]
    fn times_carry_over_only_where_the_status_stayed() {
        let mut next = gateway("False", T1);
        next.carry_from(&gateway("True", T0));
        let j = next.to_json();
        assert_eq!(j["conditions"][0]["lastTransitionTime"], T0);
        assert_eq!(j["conditions"][1]["lastTransitionTime"], T1);
        assert_eq!(j["listeners"][0]["conditions"][0]["lastTransitionTime"], T1);
        let mut next = route("True", T1);
        next.carry_from(&route("True", T0));
        assert_eq!(
            next.to_json()["parents"][0]["conditions"][0]["lastTransitionTime"],
            T0
        );
        let mut next = route("True", T1);
        next.carry_from(&gateway("True", T0));
        assert_eq!(next, route("True", T1), "another kind carries nothing");
    }

    #[test]
    fn json_bodies_take_part_through_their_typed_form() {
        let json = StatusBody::from(gateway_json("True", T0));
        let typed = json.typed(ObjectKind::Gateway).unwrap();
        assert_eq!(*typed, gateway("True", T0));
        assert!(json
            .typed(ObjectKind::Route(
                crate::kinds::routes::RouteKindId::HttpRoute
            ))
            .is_none());
        assert!(
            StatusBody::from(json!({"conditions": [{"type": "Accepted"}]}))
                .typed(ObjectKind::GatewayClass)
                .is_none()
        );
        assert!(gateway("True", T0)
            .typed(ObjectKind::GatewayClass)
            .is_none());
    }

    #[test]
    fn problems_are_named_by_where_they_sit() {
        let mut problems = Vec::new();
        gateway("False", T0).problems(&|| "Gateway ns/gw".into(), &mut problems);
        route("False", T0).problems(&|| "HTTPRoute ns/r".into(), &mut problems);
        let scopes: Vec<&str> = problems.iter().map(|p| p.object.as_str()).collect();
        assert_eq!(
            scopes,
            [
                "Gateway ns/gw",
                "Gateway ns/gw listener http",
                "HTTPRoute ns/r parent gw"
            ]
        );
    }

    #[test]
    fn restamping_sets_every_time() {
        let mut restamped = gateway("True", T0);
        restamped.restamp(T1.parse().unwrap());
        assert_eq!(restamped, gateway("True", T1));
    }

    /// A report holds one body per route: two words, whichever kind it is.
    #[test]
    fn a_body_is_two_words() {
        assert_eq!(std::mem::size_of::<StatusBody>(), 16);
    }
}
