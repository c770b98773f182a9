//! The ListenerSet scenarios (GEP-1713), listed and run: which ListenerSets a Gateway takes,
//! their status and `attachedListenerSets`, listener precedence, and routes attached through
//! parentRefs of kind ListenerSet, checked with the upstream suite's semantics (listener
//! statuses compared exactly, as for Gateways).

use std::sync::Arc;

use serde_json::Value;

use crate::expect::{check_all, Outcome, Req, Want};
use crate::harness::Env;
use crate::report::GATEWAY_HTTP;
use crate::scenarios::Scenario;
use crate::status::{
    cond, conds, gateway_conditions, listeners_exactly, observed, route_parents, wait_status, Cond,
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
            http_routing
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
            allowed_routes_namespaces
        ),
        listener_set!(
            "ListenerSetDualParentRefIndependence",
            "ls-parent-refs.yaml",
            dual_parent_ref_independence
        ),
        listener_set!(
            "ListenerSetRouteStatusScopedToParentRef",
            "ls-parent-refs.yaml",
            route_status_scoped_to_parent_ref
        ),
        listener_set!(
            "ListenerSetGatewayParentSectionNameNotFound",
            "ls-parent-refs.yaml",
            gateway_parent_section_name_not_found
        ),
        listener_set!(
            "ListenerSetAllowedRoutesSupportedKinds",
            "ls-route-kinds.yaml",
            allowed_routes_supported_kinds
        ),
        listener_set!(
            "ListenerSetReferenceGrant",
            "ls-reference-grant.yaml",
            reference_grant
        ),
    ]
}

/// `ListenerSetMustHaveCondition` for each of `expected`, at the ListenerSet's generation.
fn set_conditions(r: &Report, ns: &str, name: &str, expected: &[Cond]) -> Outcome {
    let (status, generation) = r.object("ListenerSet", Some(ns), name)?;
    observed(status, generation).map_err(|e| format!("ListenerSet {ns}/{name}: {e}"))?;
    conds(status, expected).map_err(|e| format!("ListenerSet {ns}/{name}: {e}"))
}

/// `ListenerSetStatusMustHaveListeners`: exactly `expected`.
fn set_listeners(r: &Report, ns: &str, name: &str, expected: &[Listener]) -> Outcome {
    let (status, _) = r.object("ListenerSet", Some(ns), name)?;
    listeners_exactly(&format!("ListenerSet {ns}/{name}"), status, expected)
}

/// `ListenerSetListenersMustHaveConditions` for one listener.
fn set_listener(r: &Report, ns: &str, name: &str, listener: &str, expected: &[Cond]) -> Outcome {
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
fn attached_sets(r: &Report, gw: &str, n: i64) -> Outcome {
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
const LISTENER_OK: [Cond; 4] = [
    Cond("ResolvedRefs", "True", ""),
    Cond("Accepted", "True", ""),
    Cond("Programmed", "True", ""),
    Cond("Conflicted", "False", ""),
];

/// A listener of an HTTP ListenerSet with the default kinds, `attached` routes, accepted.
fn ok_listener(name: &'static str, attached: i64) -> Listener {
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
const SET_NOT_VALID: [Cond; 2] = [
    Cond("Accepted", "False", "ListenersNotValid"),
    Cond("Programmed", "False", "ListenersNotValid"),
];
const SET_PARTLY: [Cond; 2] = [
    Cond("Accepted", "True", ""),
    Cond("Programmed", "True", "Programmed"),
];

/// An accepted route parent.
const ROUTE_OK: [Cond; 1] = [Cond("Accepted", "True", "")];

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

async fn http_routing(env: Arc<Env>) -> Outcome {
    let gw = "ls-routing";
    wait_status(&env, "routes on the Gateway and its ListenerSets", |r| {
        attached_sets(r, gw, 2)?;
        gateway_conditions(r, INFRA, gw, &[Cond("Programmed", "True", "")])?;
        for route in ["on-all-parents", "on-gateway"] {
            route_parents(
                r,
                INFRA,
                route,
                &[Parent::gateway(INFRA, gw, &ROUTE_OK)],
                false,
            )?;
        }
        let one = Parent::gateway(INFRA, gw, &ROUTE_OK).section("gw-one");
        route_parents(r, INFRA, "on-gateway-one", &[one], false)?;
        for (set, routes) in [
            ("set-red", &["on-all-parents", "on-red"][..]),
            ("set-blue", &["on-all-parents", "on-blue"][..]),
        ] {
            for route in routes {
                let p = Parent::listener_set(INFRA, set, &ROUTE_OK);
                route_parents(r, INFRA, route, &[p], false)?;
            }
        }
        let red_one = Parent::listener_set(INFRA, "set-red", &ROUTE_OK).section("red-one");
        route_parents(r, INFRA, "on-red-one", &[red_one], false)?;
        set_listeners(
            r,
            INFRA,
            "set-red",
            &[ok_listener("red-one", 3), ok_listener("red-two", 2)],
        )?;
        set_listeners(
            r,
            INFRA,
            "set-blue",
            &[ok_listener("blue-one", 2), ok_listener("blue-two", 2)],
        )
    })
    .await?;
    let hosts = [
        "one.gw.test",
        "two.gw.test",
        "one.red.test",
        "two.red.test",
        "one.blue.test",
        "two.blue.test",
    ];
    // Which hosts serve each path, and from which backend; every other host answers 404.
    let paths: [(&str, &[&str], &str); 5] = [
        ("/all", &hosts, "infra-backend-v1"),
        ("/gw", &hosts[..2], "infra-backend-v2"),
        ("/gw-one", &hosts[..1], "infra-backend-v3"),
        ("/red", &hosts[2..4], "infra-backend-v2"),
        ("/blue", &hosts[4..], "infra-backend-v2"),
    ];
    let mut cases = Vec::new();
    for (path, serving, backend) in paths {
        for host in hosts {
            let want = if serving.contains(&host) {
                Want::ok(backend)
            } else {
                Want::status(404)
            };
            cases.push((Req::get(path).host(host), want));
        }
    }
    for host in hosts {
        // `/red` is a path prefix by segment: it does not take `/red-one`.
        let want = if host == "one.red.test" {
            Want::ok("infra-backend-v3")
        } else {
            Want::status(404)
        };
        cases.push((Req::get("/red-one").host(host), want));
    }
    check_all(env.gw(gw), &cases).await
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

async fn allowed_routes_namespaces(env: Arc<Env>) -> Outcome {
    let gw = "ls-route-namespaces";
    let set = "route-policies";
    wait_status(&env, "allowedRoutes of ListenerSet listeners", |r| {
        attached_sets(r, gw, 2)?;
        for (ns, route) in [
            (INFRA, "from-infra"),
            ("ls-routes-picked", "from-picked"),
            ("ls-routes-other", "from-other"),
        ] {
            let p = Parent::listener_set(INFRA, set, &ROUTE_OK);
            route_parents(r, ns, route, &[p], ns != INFRA)?;
        }
        set_listeners(
            r,
            INFRA,
            set,
            &[
                ok_listener("from-all", 3),
                ok_listener("from-same", 1),
                ok_listener("from-picked", 1),
            ],
        )?;
        let home = Parent::listener_set("ls-home", "away", &ROUTE_OK);
        route_parents(r, "ls-home", "at-home", &[home], false)?;
        let refused = [Cond("Accepted", "False", "NotAllowedByListeners")];
        let elsewhere = Parent::listener_set("ls-home", "away", &refused);
        route_parents(r, INFRA, "not-at-home", &[elsewhere], true)?;
        set_listeners(r, "ls-home", "away", &[ok_listener("away-same", 1)])
    })
    .await?;
    let get = |path: &str, host: &str| Req::get(path).host(host);
    let cases = [
        (
            get("/infra", "all.routes.test"),
            Want::ok("infra-backend-v1"),
        ),
        (
            get("/picked", "all.routes.test"),
            Want::ok("infra-backend-v2"),
        ),
        (
            get("/other", "all.routes.test"),
            Want::ok("infra-backend-v3"),
        ),
        (
            get("/infra", "same.routes.test"),
            Want::ok("infra-backend-v1"),
        ),
        (get("/picked", "same.routes.test"), Want::status(404)),
        (get("/other", "same.routes.test"), Want::status(404)),
        (get("/infra", "picked.routes.test"), Want::status(404)),
        (
            get("/picked", "picked.routes.test"),
            Want::ok("infra-backend-v2"),
        ),
        (get("/other", "picked.routes.test"), Want::status(404)),
        (
            get("/home", "away.routes.test"),
            Want::ok("infra-backend-v1"),
        ),
        (get("/not-home", "away.routes.test"), Want::status(404)),
    ];
    check_all(env.gw(gw), &cases).await
}

/// The Gateway, its ListenerSet, and the set's listener counting its routes.
fn parents_ready(r: &Report, set_routes: i64) -> Outcome {
    attached_sets(r, "ls-parents", 1)?;
    set_listeners(
        r,
        INFRA,
        "parents-set",
        &[ok_listener("set-http", set_routes)],
    )
}

async fn dual_parent_ref_independence(env: Arc<Env>) -> Outcome {
    wait_status(&env, "each parentRef judged on its own", |r| {
        parents_ready(r, 3)?;
        let gw = Parent::gateway(INFRA, "ls-parents", &ROUTE_OK);
        let set = Parent::listener_set(INFRA, "parents-set", &ROUTE_OK);
        route_parents(r, INFRA, "both-parents", &[gw, set], true)?;
        let no_match = [Cond("Accepted", "False", "NoMatchingParent")];
        let gw = Parent::gateway(INFRA, "ls-parents", &no_match).section("set-http");
        let set = Parent::listener_set(INFRA, "parents-set", &ROUTE_OK).section("set-http");
        route_parents(r, INFRA, "set-section-both-ways", &[gw, set], true)
    })
    .await?;
    let get = |path: &str, host: &str| Req::get(path).host(host);
    let cases = [
        (
            get("/both", "gw.parents.test"),
            Want::ok("infra-backend-v1"),
        ),
        (
            get("/both", "set.parents.test"),
            Want::ok("infra-backend-v1"),
        ),
        (
            get("/section", "set.parents.test"),
            Want::ok("infra-backend-v2"),
        ),
        (get("/section", "gw.parents.test"), Want::status(404)),
    ];
    check_all(env.gw("ls-parents"), &cases).await
}

/// Exactly one `parents[]` entry, of `kind`.
fn one_parent_of(r: &Report, route: &str, kind: &str) -> Outcome {
    let status = r.route(INFRA, route)?;
    let parents: Vec<&Value> = status["parents"].as_array().into_iter().flatten().collect();
    match parents.as_slice() {
        [p] if p["parentRef"]["kind"] == kind => cond(p, "Accepted", "True", ""),
        _ => Err(format!(
            "HTTPRoute {route}: parents {parents:?}, want one of kind {kind}"
        )),
    }
}

async fn route_status_scoped_to_parent_ref(env: Arc<Env>) -> Outcome {
    wait_status(&env, "parents[] only for declared parentRefs", |r| {
        parents_ready(r, 3)?;
        let gw = Parent::gateway(INFRA, "ls-parents", &ROUTE_OK);
        route_parents(r, INFRA, "gateway-only", &[gw], true)?;
        one_parent_of(r, "gateway-only", "Gateway")?;
        let set = Parent::listener_set(INFRA, "parents-set", &ROUTE_OK);
        route_parents(r, INFRA, "set-only", &[set], true)?;
        one_parent_of(r, "set-only", "ListenerSet")
    })
    .await?;
    let get = |path: &str, host: &str| Req::get(path).host(host);
    let cases = [
        (
            get("/gateway-only", "gw.parents.test"),
            Want::ok("infra-backend-v1"),
        ),
        (get("/gateway-only", "set.parents.test"), Want::status(404)),
        (
            get("/set-only", "set.parents.test"),
            Want::ok("infra-backend-v2"),
        ),
        (get("/set-only", "gw.parents.test"), Want::status(404)),
    ];
    check_all(env.gw("ls-parents"), &cases).await
}

async fn gateway_parent_section_name_not_found(env: Arc<Env>) -> Outcome {
    wait_status(
        &env,
        "a ListenerSet sectionName is not the Gateway's",
        |r| {
            parents_ready(r, 3)?;
            let no_match = [Cond("Accepted", "False", "NoMatchingParent")];
            let gw = Parent::gateway(INFRA, "ls-parents", &no_match).section("set-http");
            route_parents(r, INFRA, "set-section-via-gateway", &[gw], true)
        },
    )
    .await?;
    let get = |path: &str, host: &str| Req::get(path).host(host);
    let cases = [
        (
            get("/section", "set.parents.test"),
            Want::ok("infra-backend-v2"),
        ),
        (get("/via-gateway", "gw.parents.test"), Want::status(404)),
        (get("/via-gateway", "set.parents.test"), Want::status(404)),
    ];
    check_all(env.gw("ls-parents"), &cases).await
}

async fn reference_grant(env: Arc<Env>) -> Outcome {
    wait_status(&env, "certificate grants from ListenerSets", |r| {
        gateway_conditions(r, INFRA, "ls-grants", &[Cond("Accepted", "True", "")])?;
        set_conditions(
            r,
            INFRA,
            "granted",
            &[Cond("Accepted", "True", ""), Cond("Programmed", "True", "")],
        )?;
        let resolved = [Cond("ResolvedRefs", "True", "")];
        set_listener(r, INFRA, "granted", "granted-https", &resolved)?;
        set_conditions(r, "ls-no-grant", "ungranted", &SET_NOT_VALID)?;
        let refused = [Cond("ResolvedRefs", "False", "RefNotPermitted")];
        set_listener(r, "ls-no-grant", "ungranted", "ungranted-https", &refused)
    })
    .await
}

async fn allowed_routes_supported_kinds(env: Arc<Env>) -> Outcome {
    wait_status(
        &env,
        "a ListenerSet listener allowing no kind it carries",
        |r| {
            gateway_conditions(r, INFRA, "ls-route-kinds", &[Cond("Accepted", "True", "")])?;
            let invalid = [Cond("ResolvedRefs", "False", "InvalidRouteKinds")];
            set_listeners(
                r,
                INFRA,
                "wrong-kinds",
                &[Listener::no_kinds("passthrough-for-http", &invalid)],
            )
        },
    )
    .await
}
