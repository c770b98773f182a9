//! The status body of one object: the typed Gateway API status the translator builds, or JSON
//! read back from outside. Keeping the translator's output typed spares a JSON tree per object
//! on every translation; it becomes JSON only when it is served, printed or written. Pure.

use std::borrow::Cow;

use gateway_api::apis::standard::gatewayclasses::GatewayClassStatus;
use gateway_api::apis::standard::gateways::GatewayStatus;
use gateway_api::apis::standard::httproutes::HttpRouteStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::Problem;

/// One object's status. Serializes exactly as the JSON of the typed status (object keys sorted),
/// and deserializes into [`StatusBody::Json`].
#[derive(Debug, Clone, PartialEq)]
pub enum StatusBody {
    GatewayClass(GatewayClassStatus),
    Gateway(GatewayStatus),
    HttpRoute(HttpRouteStatus),
    /// A status read back from JSON (`/debug/status`) or written by hand.
    Json(Value),
}

impl Default for StatusBody {
    fn default() -> Self {
        Self::Json(Value::Null)
    }
}

impl From<Value> for StatusBody {
    fn from(v: Value) -> Self {
        Self::Json(v)
    }
}

impl StatusBody {
    /// The status as JSON, in the exact shape of the object's status subresource.
    pub fn to_json(&self) -> Cow<'_, Value> {
        let v = match self {
            Self::GatewayClass(s) => serde_json::to_value(s),
            Self::Gateway(s) => serde_json::to_value(s),
            Self::HttpRoute(s) => serde_json::to_value(s),
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

    /// Keeps each condition's `lastTransitionTime` from `prev` when its status did not change.
    pub(super) fn carry_from(&mut self, prev: &StatusBody) {
        match (prev, self) {
            (Self::GatewayClass(p), Self::GatewayClass(n)) => {
                carry_opt(p.conditions.as_deref(), n.conditions.as_deref_mut());
            }
            (Self::Gateway(p), Self::Gateway(n)) => {
                carry_opt(p.conditions.as_deref(), n.conditions.as_deref_mut());
                let (Some(pl), Some(nl)) = (&p.listeners, &mut n.listeners) else {
                    return;
                };
                for l in nl.iter_mut() {
                    if let Some(q) = pl.iter().find(|q| q.name == l.name) {
                        carry_conditions(&q.conditions, &mut l.conditions);
                    }
                }
            }
            (Self::HttpRoute(p), Self::HttpRoute(n)) => {
                for r in &mut n.parents {
                    let same = p.parents.iter().find(|q| {
                        q.parent_ref == r.parent_ref && q.controller_name == r.controller_name
                    });
                    if let Some(q) = same {
                        carry_conditions(&q.conditions, &mut r.conditions);
                    }
                }
            }
            (prev, next) => {
                let mut json = next.to_json().into_owned();
                super::carry_json(&prev.to_json(), &mut json);
                *next = Self::Json(json);
            }
        }
    }

    /// Stamps `now` as every condition's `lastTransitionTime`, for a status recomputed after
    /// its translation: carrying times over from the previous status then leaves `now` only on
    /// the conditions that really changed.
    pub fn restamp(&mut self, now: jiff::Timestamp) {
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
            Self::HttpRoute(s) => {
                for p in &mut s.parents {
                    stamp(&mut p.conditions);
                }
            }
            Self::Json(v) => super::restamp_json(v, &now.to_string()),
        }
    }

    /// Appends every condition that reports a problem, in the order of the serialized status.
    pub(super) fn problems(&self, object: &str, out: &mut Vec<Problem>) {
        match self {
            Self::GatewayClass(s) => push_bad(object, s.conditions.as_deref(), out),
            Self::Gateway(s) => {
                push_bad(object, s.conditions.as_deref(), out);
                for l in s.listeners.iter().flatten() {
                    let scope = format!("{object} listener {}", l.name);
                    push_bad(&scope, Some(&l.conditions), out);
                }
            }
            Self::HttpRoute(s) => {
                for p in &s.parents {
                    let scope = format!("{object} parent {}", p.parent_ref.name);
                    push_bad(&scope, Some(&p.conditions), out);
                }
            }
            Self::Json(v) => super::collect_problems(v, object, out),
        }
    }
}

fn carry_opt(prev: Option<&[Condition]>, next: Option<&mut [Condition]>) {
    if let (Some(p), Some(n)) = (prev, next) {
        carry_conditions(p, n);
    }
}

fn carry_conditions(prev: &[Condition], next: &mut [Condition]) {
    for c in next {
        if let Some(p) = prev.iter().find(|p| p.type_ == c.type_) {
            if p.status == c.status {
                c.last_transition_time = p.last_transition_time.clone();
            }
        }
    }
}

fn push_bad(scope: &str, conditions: Option<&[Condition]>, out: &mut Vec<Problem>) {
    for c in conditions.unwrap_or_default() {
        let bad = match c.type_.as_str() {
            "Accepted" | "ResolvedRefs" | "Programmed" => c.status == "False",
            "Conflicted" => c.status == "True",
            _ => false,
        };
        if bad {
            out.push(Problem {
                object: scope.to_owned(),
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
        Value::deserialize(deserializer).map(Self::Json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gateway(programmed: &str, time: &str) -> StatusBody {
        let v = json!({"conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
             "lastTransitionTime": time},
            {"type": "Programmed", "status": programmed, "reason": "P", "message": "m",
             "lastTransitionTime": time}],
            "listeners": [{"name": "http", "attachedRoutes": 1, "supportedKinds": [], "conditions": [
                {"type": "ResolvedRefs", "status": programmed, "reason": "R", "message": "",
                 "lastTransitionTime": time}]}]});
        StatusBody::Gateway(serde_json::from_value(v).unwrap())
    }

    fn route(accepted: &str, time: &str) -> StatusBody {
        let v = json!({"parents": [{"controllerName": "c/d", "parentRef": {"name": "gw"},
            "conditions": [{"type": "Accepted", "status": accepted, "reason": "A",
                "message": "", "lastTransitionTime": time}]}]});
        StatusBody::HttpRoute(serde_json::from_value(v).unwrap())
    }

    /// The typed walk must agree with the JSON walk it replaces.
    fn same_as_json(prev: &StatusBody, next: &StatusBody) {
        let mut typed = next.clone();
        typed.carry_from(prev);
        let mut json = next.to_json().into_owned();
        super::super::carry_json(&prev.to_json(), &mut json);
        assert_eq!(typed.to_json().into_owned(), json);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        typed.problems("X ns/n", &mut a);
        super::super::collect_problems(&json, "X ns/n", &mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn typed_carry_and_problems_match_the_json_walk() {
        let t0 = "2026-01-01T00:00:00Z";
        let t1 = "2026-01-02T00:00:00Z";
        same_as_json(&gateway("True", t0), &gateway("False", t1));
        same_as_json(&gateway("False", t0), &gateway("False", t1));
        same_as_json(&route("True", t0), &route("False", t1));
        same_as_json(&route("False", t0), &route("False", t1));
        let mut next = route("True", t1);
        next.carry_from(&route("True", t0));
        assert_eq!(
            next.to_json()["parents"][0]["conditions"][0]["lastTransitionTime"],
            t0
        );
        let mut problems = Vec::new();
        gateway("False", t0).problems("Gateway ns/gw", &mut problems);
        let scopes: Vec<&str> = problems.iter().map(|p| p.object.as_str()).collect();
        assert_eq!(scopes, ["Gateway ns/gw", "Gateway ns/gw listener http"]);
    }
}
