//! The ListenerSet scenarios about routes: HTTP routing through Gateway and ListenerSet
//! parentRefs, allowedRoutes of ListenerSet listeners, parentRefs judged apart, route kinds,
//! and certificate ReferenceGrants from ListenerSets (listed in `listenerset`).

use std::sync::Arc;

use serde_json::Value;

use crate::expect::{check_all, Outcome, Req, Want};
use crate::harness::Env;
use crate::listenerset::{
    attached_sets, ok_listener, set_conditions, set_listener, set_listeners, ROUTE_OK,
    SET_NOT_VALID,
};
use crate::status::{
    cond, gateway_conditions, route_parents, wait_status, Cond, Listener, Parent, Report,
};
use crate::INFRA;

pub async fn http_routing(env: Arc<Env>) -> Outcome {
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

pub async fn allowed_routes_namespaces(env: Arc<Env>) -> Outcome {
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

pub async fn dual_parent_ref_independence(env: Arc<Env>) -> Outcome {
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

pub async fn route_status_scoped_to_parent_ref(env: Arc<Env>) -> Outcome {
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

pub async fn gateway_parent_section_name_not_found(env: Arc<Env>) -> Outcome {
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

pub async fn reference_grant(env: Arc<Env>) -> Outcome {
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

pub async fn allowed_routes_supported_kinds(env: Arc<Env>) -> Outcome {
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
