//! GatewayClass and Gateway scenarios: status, observedGeneration, listener changes, route kinds
//! and attached-route counting.

use std::sync::Arc;

use crate::expect::{check, Outcome, Req, Want};
use crate::harness::Env;
use crate::status::{
    class_accepted, gateway_conditions, gateway_listeners, gateway_ready, observed,
    route_condition, wait_status, Cond, Listener, Report,
};
use crate::INFRA;

/// GatewayClass accepted with supportedFeatures; a new generation is observed.
pub async fn class_generation(env: Arc<Env>) -> Outcome {
    wait_status(&env, "GatewayClass accepted at generation 1", |r| {
        class_accepted(r, "bumped-class", "")?;
        let c = r.class("bumped-class")?;
        observed(c, 1)?;
        let mut want: Vec<&str> = env.claimed();
        want.sort_unstable();
        let got: Vec<&str> = c["supportedFeatures"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["name"].as_str())
            .collect();
        if got != want {
            return Err(format!("supportedFeatures {got:?}, want {want:?}"));
        }
        Ok(())
    })
    .await?;
    env.apply(
        "scenario.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\n\
         metadata: {name: bumped-class, generation: 2}\n\
         spec: {controllerName: edgeplane.dev/gateway-controller, description: second}\n",
    )?;
    wait_status(&env, "GatewayClass observes generation 2", |r| {
        class_accepted(r, "bumped-class", "")?;
        observed(r.class("bumped-class")?, 2)
    })
    .await
}

/// A Gateway's conditions follow its generation when a listener is added.
pub async fn gateway_generation(env: Arc<Env>) -> Outcome {
    wait_status(&env, "Gateway ready at generation 1", |r| {
        gateway_ready(r, INFRA, "bumped-gateway")?;
        observed(r.gateway(INFRA, "bumped-gateway")?, 1)
    })
    .await?;
    env.apply(
        "scenario.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n\
         metadata: {name: bumped-gateway, namespace: gateway-conformance-infra, generation: 2}\n\
         spec:\n  gatewayClassName: edgeplane-conformance\n  listeners:\n\
         \x20 - {name: web, port: 80, protocol: HTTP, hostname: gen.test, allowedRoutes: {namespaces: {from: All}}}\n\
         \x20 - {name: web-two, port: 80, protocol: HTTP, hostname: gen-two.test, allowedRoutes: {namespaces: {from: All}}}\n",
    )?;
    wait_status(&env, "Gateway observes generation 2", |r| {
        gateway_ready(r, INFRA, "bumped-gateway")?;
        let g = r.gateway(INFRA, "bumped-gateway")?;
        observed(g, 2)?;
        let n = g["listeners"].as_array().map_or(0, Vec::len);
        if n != 2 {
            return Err(format!("{n} listeners in status, want 2"));
        }
        for l in g["listeners"].as_array().into_iter().flatten() {
            observed(l, 2)?;
        }
        Ok(())
    })
    .await
}

/// Listeners added to and removed from live Gateways show up in status and traffic.
pub async fn modify_listeners(env: Arc<Env>) -> Outcome {
    wait_status(&env, "both Gateways ready", |r| {
        gateway_ready(r, INFRA, "grows")?;
        gateway_ready(r, INFRA, "shrinks")?;
        gateway_listeners(r, INFRA, "shrinks", &[serving("kept"), serving("dropped")])
    })
    .await?;
    let (grows, shrinks) = (env.gw("grows"), env.gw("shrinks"));
    check(
        grows,
        &Req::get("/").host("second.grow.test"),
        &Want::status(404),
    )
    .await?;
    check(
        shrinks,
        &Req::get("/").host("dropped.shrink.test"),
        &Want::ok("infra-backend-v2"),
    )
    .await?;
    env.apply(
        "scenario.yaml",
        include_str!("manifests/modify-listeners-after.yaml"),
    )?;
    wait_status(&env, "listener added and removed", |r| {
        gateway_ready(r, INFRA, "grows")?;
        gateway_ready(r, INFRA, "shrinks")?;
        gateway_listeners(r, INFRA, "grows", &[serving("first"), serving("second")])?;
        gateway_listeners(r, INFRA, "shrinks", &[serving("kept")])
    })
    .await?;
    check(
        grows,
        &Req::get("/").host("second.grow.test"),
        &Want::ok("infra-backend-v1"),
    )
    .await?;
    check(
        shrinks,
        &Req::get("/").host("dropped.shrink.test"),
        &Want::status(404),
    )
    .await?;
    check(
        shrinks,
        &Req::get("/").host("kept.shrink.test"),
        &Want::ok("infra-backend-v2"),
    )
    .await
}

/// A listener with the default route kinds, accepted and resolved, with one attached route
/// (upstream's expectation after listeners are added or removed).
fn serving(name: &'static str) -> Listener {
    Listener::http_default_kinds(name, 1, &ACCEPTED_AND_RESOLVED)
}

const ACCEPTED_AND_RESOLVED: [Cond; 2] = [
    Cond("Accepted", "True", ""),
    Cond("ResolvedRefs", "True", ""),
];

/// Unknown route kinds make the listener's refs unresolved; known kinds stay supported.
pub async fn invalid_route_kinds(env: Arc<Env>) -> Outcome {
    let invalid = Cond("ResolvedRefs", "False", "InvalidRouteKinds");
    wait_status(&env, "listeners report InvalidRouteKinds", |r| {
        gateway_listeners(
            r,
            INFRA,
            "only-bogus-kind",
            &[Listener::no_kinds("web", &[invalid])],
        )?;
        gateway_listeners(
            r,
            INFRA,
            "bogus-and-http-kind",
            &[Listener::http("web", 0, &[invalid])],
        )
    })
    .await
}

/// attachedRoutes counts accepted routes, unresolved ones included, and nothing else.
pub async fn attached_routes(env: Arc<Env>) -> Outcome {
    wait_status(&env, "attachedRoutes counted", |r: &Report| {
        let one = Listener::http("web", 1, &ACCEPTED_AND_RESOLVED);
        gateway_listeners(r, INFRA, "one-route", &[one])?;
        let two = Listener::http("web", 2, &ACCEPTED_AND_RESOLVED);
        gateway_listeners(r, INFRA, "two-routes", &[two])?;
        let refused = Cond("Accepted", "False", "NoMatchingListenerHostname");
        route_condition(r, INFRA, "hostname-mismatch", INFRA, "two-routes", refused)?;
        // Routes count on a listener whose certificate does not resolve.
        let unresolved = [
            Cond("Programmed", "False", ""),
            Cond("ResolvedRefs", "False", ""),
        ];
        let tls = Listener::http("tls", 1, &unresolved);
        gateway_listeners(r, INFRA, "unresolved-tls", &[tls])?;
        let c = Cond("ResolvedRefs", "False", "");
        route_condition(r, INFRA, "on-unresolved-tls", INFRA, "unresolved-tls", c)
    })
    .await
}

/// A Gateway whose `spec.infrastructure.parametersRef` cannot be used is not accepted
/// (InvalidParameters) at its latest generation.
pub async fn invalid_parameters_ref(env: Arc<Env>) -> Outcome {
    wait_status(&env, "Gateway refused for its parametersRef", |r| {
        let refused = Cond("Accepted", "False", "InvalidParameters");
        gateway_conditions(r, INFRA, "unknown-parameters", &[refused])
    })
    .await?;
    // Nothing of it is served: its address does not listen (on the local port of 80).
    let addr = crate::harness::socket_addr(env.gw("unknown-parameters"), 80);
    match tokio::net::TcpStream::connect(addr).await {
        Ok(_) => Err(format!("the refused Gateway listens on {addr}")),
        Err(_) => Ok(()),
    }
}
