//! The ListenerSet scenarios (GEP-1713), listed, with the checks they share; run here: which
//! ListenerSets a Gateway takes, their status and `attachedListenerSets`, and listener
//! precedence (the route scenarios run in `listenerset_routes`). Checked with the upstream
//! suite's semantics, listener statuses compared exactly, as for Gateways.

use std::sync::Arc;

use crate::expect::{check_all, Outcome, Req, Want};
use crate::harness::Env;
use crate::listenerset_routes as routes;
use crate::report::GATEWAY_HTTP;
use crate::scenarios::Scenario;
use crate::status::{
    conds, gateway_conditions, listeners_exactly, observed, route_parents, wait_status, Cond,
    Listener, Parent, Report,
};
use crate::INFRA;

/// The conformance feature of these scenarios.
pub const FEATURE: &str = "ListenerSet";

macro_rules! listener_set {
    ($name:literal, $file:literal, $run:path) => {
        Scenario {
            name: $name,
            profile: GATEWAY_HTTP,
            feature: Some(FEATURE),
            manifests: include_str!(concat!("manifests/", $file)),
            skip: None,
            run: Some(|env| Box::pin($run(env))),
        }
    };
}

/// The ListenerSet scenarios of v1.6.1.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        listener_set!(
            "ListenerSetDefaultNotAllowed",
            "ls-not-allowed.yaml",
            default_not_allowed
        ),
        listener_set!(
            "ListenerSetAllowedNamespaceNone",
            "ls-not-allowed.yaml",
            allowed_namespace_none
        ),
        listener_set!(
            "ListenerSetAllowedNamespaceSame",
            "ls-from-namespaces.yaml",
            allowed_namespace_same
        ),
        listener_set!(
            "ListenerSetAllowedNamespaceSelector",
            "ls-from-namespaces.yaml",
            allowed_namespace_selector
        ),
        listener_set!(
            "ListenerSetHTTPRouting",
            "ls-http-routing.yaml",
            routes::http_routing
        ),
        listener_set!(
            "ListenerSetHostnameConflict",
            "ls-conflicts.yaml",
            hostname_conflict
        ),
        listener_set!(
            "ListenerSetProtocolConflict",
            "ls-conflicts.yaml",
            protocol_conflict
        ),
        listener_set!(
            "ListenerSetAllowedRoutesNamespaces",
            "ls-allowed-routes.yaml",
            routes::allowed_routes_namespaces
        ),
        listener_set!(
            "ListenerSetDualParentRefIndependence",
            "ls-parent-refs.yaml",
            routes::dual_parent_ref_independence
        ),
        listener_set!(
            "ListenerSetRouteStatusScopedToParentRef",
            "ls-parent-refs.yaml",
            routes::route_status_scoped_to_parent_ref
        ),
        listener_set!(
            "ListenerSetGatewayParentSectionNameNotFound",
            "ls-parent-refs.yaml",
            routes::gateway_parent_section_name_not_found
        ),
        listener_set!(
            "ListenerSetAllowedRoutesSupportedKinds",
            "ls-route-kinds.yaml",
            routes::allowed_routes_supported_kinds
        ),
        listener_set!(
            "ListenerSetReferenceGrant",
            "ls-reference-grant.yaml",
            routes::reference_grant
        ),
    ]
}

/// `ListenerSetMustHaveCondition` for each of `expected`, at the ListenerSet's generation.
pub fn set_conditions(r: &Report, ns: &str, name: &str, expected: &[Cond]) -> Outcome {
    let (status, generation) = r.object("ListenerSet", Some(ns), name)?;
    observed(status, generation).map_err(|e| format!("ListenerSet {ns}/{name}: {e}"))?;
    conds(status, expected).map_err(|e| format!("ListenerSet {ns}/{name}: {e}"))
}

/// `ListenerSetStatusMustHaveListeners`: exactly `expected`.
pub fn set_listeners(r: &Report, ns: &str, name: &str, expected: &[Listener]) -> Outcome {
    let (status, _) = r.object("ListenerSet", Some(ns), name)?;
    listeners_exactly(&format!("ListenerSet {ns}/{name}"), status, expected)
}

/// `ListenerSetListenersMustHaveConditions` for one listener.
pub fn set_listener(
    r: &Report,
    ns: &str,
    name: &str,
    listener: &str,
    expected: &[Cond],
) -> Outcome {
    let (status, _) = r.object("ListenerSet", Some(ns), name)?;
    let l = status["listeners"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["name"] == listener))
        .ok_or_else(|| format!("ListenerSet {ns}/{name}: no listener {listener}"))?;
    conds(l, expected).map_err(|e| format!("ListenerSet {ns}/{name} listener {listener}: {e}"))
}

/// `GatewayListenersMustHaveConditions` for one listener of a Gateway in the infra namespace.
fn gateway_listener(r: &Report, gw: &str, listener: &str, expected: &[Cond]) -> Outcome {
    let status = r.gateway(INFRA, gw)?;
    let l = status["listeners"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["name"] == listener))
        .ok_or_else(|| format!("Gateway {gw}: no listener {listener}"))?;
    conds(l, expected).map_err(|e| format!("Gateway {gw} listener {listener}: {e}"))
}

/// `GatewayMustHaveAttachedListeners`: Accepted, and `attachedListenerSets` is `n`.
pub fn attached_sets(r: &Report, gw: &str, n: i64) -> Outcome {
    gateway_conditions(r, INFRA, gw, &[Cond("Accepted", "True", "")])?;
    let status = r.gateway(INFRA, gw)?;
    match status["attachedListenerSets"].as_i64() {
        Some(got) if got == n => Ok(()),
        _ => Err(format!(
            "Gateway {gw}: attachedListenerSets {}, want {n}",
            status["attachedListenerSets"]
        )),
    }
}

/// `generateAcceptedListenerConditions`.
pub const LISTENER_OK: [Cond; 4] = [
    Cond("ResolvedRefs", "True", ""),
    Cond("Accepted", "True", ""),
    Cond("Programmed", "True", ""),
    Cond("Conflicted", "False", ""),
];

/// A listener of an HTTP ListenerSet with the default kinds, `attached` routes, accepted.
pub fn ok_listener(name: &'static str, attached: i64) -> Listener {
    Listener::http_default_kinds(name, attached, &LISTENER_OK)
}

const SET_ACCEPTED: [Cond; 2] = [
    Cond("Accepted", "True", "Accepted"),
    Cond("Programmed", "True", "Programmed"),
];
const SET_NOT_ALLOWED: [Cond; 2] = [
    Cond("Accepted", "False", "NotAllowed"),
    Cond("Programmed", "False", "NotAllowed"),
];
pub const SET_NOT_VALID: [Cond; 2] = [
    Cond("Accepted", "False", "ListenersNotValid"),
    Cond("Programmed", "False", "ListenersNotValid"),
];
const SET_PARTLY: [Cond; 2] = [
    Cond("Accepted", "True", ""),
    Cond("Programmed", "True", "Programmed"),
];

/// An accepted route parent.
pub const ROUTE_OK: [Cond; 1] = [Cond("Accepted", "True", "")];

/// The Gateway refuses ListenerSets; its own listener serves, theirs answer 404.
async fn not_allowed(env: Arc<Env>, gw: &'static str, set: &'static str) -> Outcome {
    wait_status(&env, "ListenerSet refused", |r| {
        gateway_conditions(r, INFRA, gw, &[Cond("Programmed", "True", "")])?;
        attached_sets(r, gw, 0)?;
        set_conditions(r, INFRA, set, &SET_NOT_ALLOWED)?;
        let parent = Parent::gateway(INFRA, gw, &[Cond("Accepted", "True", "Accepted")]);
        route_parents(r, INFRA, "everywhere-closed", &[parent], false)
    })
    .await?;
    let cases = [
        (
            Req::get("/in").host("own.closed.test"),
            Want::ok("infra-backend-v1"),
        ),
        (Req::get("/in").host("a.knocks.test"), Want::status(404)),
        (Req::get("/in").host("b.knocks.test"), Want::status(404)),
    ];
    check_all(env.gw(gw), &cases).await
}

async fn default_not_allowed(env: Arc<Env>) -> Outcome {
    not_allowed(env, "ls-closed-default", "knocks-default").await
}

async fn allowed_namespace_none(env: Arc<Env>) -> Outcome {
    not_allowed(env, "ls-closed-none", "knocks-none").await
}

async fn allowed_namespace_same(env: Arc<Env>) -> Outcome {
    wait_status(&env, "ListenerSets by namespace", |r| {
        attached_sets(r, "ls-same-only", 1)?;
        set_conditions(r, INFRA, "neighbour", &SET_ACCEPTED)?;
        set_listener(r, INFRA, "neighbour", "neighbour-http", &LISTENER_OK)?;
        set_conditions(r, "ls-refused", "outsider", &SET_NOT_ALLOWED)
    })
    .await
}

async fn allowed_namespace_selector(env: Arc<Env>) -> Outcome {
    wait_status(&env, "ListenerSets by namespace labels", |r| {
        attached_sets(r, "ls-by-label", 1)?;
        set_conditions(r, "ls-admitted", "labelled", &SET_ACCEPTED)?;
        set_listener(r, "ls-admitted", "labelled", "labelled-http", &LISTENER_OK)?;
        set_conditions(r, "ls-refused", "unlabelled", &SET_NOT_ALLOWED)?;
        set_conditions(r, INFRA, "same-but-unlabelled", &SET_NOT_ALLOWED)
    })
    .await
}

/// Conditions of a listener that lost to an earlier one: any reason for Accepted and
/// Programmed (upstream names none for hostnames).
fn lost(reason: &'static str, programmed: &'static str) -> [Cond; 3] {
    [
        Cond("Accepted", "False", ""),
        Cond("Programmed", "False", programmed),
        Cond("Conflicted", "True", reason),
    ]
}

async fn hostname_conflict(env: Arc<Env>) -> Outcome {
    let gw = "ls-hostnames";
    let lost = lost("HostnameConflict", "");
    wait_status(&env, "hostname conflicts in precedence order", |r| {
        gateway_listener(r, gw, "gw-own", &LISTENER_OK)?;
        gateway_listener(r, gw, "gw-taken", &LISTENER_OK)?;
        attached_sets(r, gw, 2)?;
        set_conditions(r, INFRA, "z-first", &SET_PARTLY)?;
        set_listener(r, INFRA, "z-first", "first-own", &LISTENER_OK)?;
        set_listener(r, INFRA, "z-first", "wants-gw-host", &lost)?;
        set_listener(r, INFRA, "z-first", "shared-host", &LISTENER_OK)?;
        set_conditions(r, INFRA, "y-second", &SET_NOT_VALID)?;
        set_listener(r, INFRA, "y-second", "wants-gw-host", &lost)?;
        set_conditions(r, INFRA, "x-third", &SET_PARTLY)?;
        set_listener(r, INFRA, "x-third", "third-own", &LISTENER_OK)?;
        set_listener(r, INFRA, "x-third", "shared-host", &lost)?;
        set_conditions(r, INFRA, "w-fourth", &SET_NOT_VALID)?;
        set_listener(r, INFRA, "w-fourth", "shared-host", &lost)
    })
    .await
}

async fn protocol_conflict(env: Arc<Env>) -> Outcome {
    let gw = "ls-protocols";
    let lost = lost("ProtocolConflict", "ProtocolConflict");
    wait_status(&env, "protocol conflicts in precedence order", |r| {
        gateway_listener(r, gw, "gw-own", &LISTENER_OK)?;
        gateway_listener(r, gw, "gw-other", &LISTENER_OK)?;
        attached_sets(r, gw, 1)?;
        set_conditions(r, INFRA, "p-first", &SET_PARTLY)?;
        set_listener(r, INFRA, "p-first", "first-own", &LISTENER_OK)?;
        set_listener(r, INFRA, "p-first", "tcp-on-80", &lost)?;
        set_listener(r, INFRA, "p-first", "later-http", &LISTENER_OK)?;
        set_conditions(r, INFRA, "o-second", &SET_NOT_VALID)?;
        set_listener(r, INFRA, "o-second", "tcp-on-80", &lost)
    })
    .await
}
