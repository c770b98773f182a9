//! GatewayClass and Gateway scenarios: status, observedGeneration, listener changes, route kinds
//! and attached-route counting.

use std::sync::Arc;

use crate::expect::{check, cond, gateway_ready, observed, wait_status, Outcome, Req, Want};
use crate::harness::Env;
use crate::INFRA;

/// GatewayClass accepted with supportedFeatures; a new generation is observed.
pub async fn class_generation(env: Arc<Env>) -> Outcome {
    wait_status(&env, "GatewayClass accepted at generation 1", |r| {
        let c = r.class("bumped-class")?;
        cond(c, "Accepted", "True", "Accepted")?;
        observed(c, 1)?;
        let mut want: Vec<&str> = edgeplane::translate::SUPPORTED_FEATURES.to_vec();
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
        let c = r.class("bumped-class")?;
        cond(c, "Accepted", "True", "Accepted")?;
        observed(c, 2)
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
        attached(r, "shrinks", "dropped", 1)
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
        attached(r, "grows", "second", 1)?;
        let n = r.gateway(INFRA, "shrinks")?["listeners"]
            .as_array()
            .map_or(0, Vec::len);
        if n != 1 {
            return Err(format!("shrinks has {n} listeners in status, want 1"));
        }
        Ok(())
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

/// Listener `listener` of Gateway `gw` counts `n` attached routes.
fn attached(r: &crate::expect::Report, gw: &str, listener: &str, n: i64) -> Outcome {
    let l = r.listener(INFRA, gw, listener)?;
    if l["attachedRoutes"] != n {
        return Err(format!(
            "{gw}/{listener} attachedRoutes {}, want {n}",
            l["attachedRoutes"]
        ));
    }
    Ok(())
}

/// Unknown route kinds make the listener's refs unresolved; known kinds stay supported.
pub async fn invalid_route_kinds(env: Arc<Env>) -> Outcome {
    wait_status(&env, "listeners report InvalidRouteKinds", |r| {
        let only = r.listener(INFRA, "only-bogus-kind", "web")?;
        cond(only, "ResolvedRefs", "False", "InvalidRouteKinds")?;
        if only["supportedKinds"]
            .as_array()
            .is_some_and(|k| !k.is_empty())
        {
            return Err(format!(
                "supportedKinds {}, want none",
                only["supportedKinds"]
            ));
        }
        let mixed = r.listener(INFRA, "bogus-and-http-kind", "web")?;
        cond(mixed, "ResolvedRefs", "False", "InvalidRouteKinds")?;
        let kinds = &mixed["supportedKinds"];
        if kinds.as_array().map_or(0, Vec::len) != 1 || kinds[0]["kind"] != "HTTPRoute" {
            return Err(format!("supportedKinds {kinds}, want [HTTPRoute]"));
        }
        Ok(())
    })
    .await
}

/// attachedRoutes counts accepted routes, unresolved ones included, and nothing else.
pub async fn attached_routes(env: Arc<Env>) -> Outcome {
    wait_status(&env, "attachedRoutes counted", |r| {
        attached(r, "one-route", "web", 1)?;
        attached(r, "two-routes", "web", 2)?;
        let p = r.parent(INFRA, "hostname-mismatch", "two-routes", None)?;
        cond(p, "Accepted", "False", "NoMatchingListenerHostname")?;
        // Routes count on a listener whose certificate does not resolve.
        attached(r, "unresolved-tls", "tls", 1)?;
        let l = r.listener(INFRA, "unresolved-tls", "tls")?;
        cond(l, "Programmed", "False", "")?;
        cond(l, "ResolvedRefs", "False", "")?;
        let p = r.parent(INFRA, "on-unresolved-tls", "unresolved-tls", Some("tls"))?;
        cond(p, "ResolvedRefs", "False", "")
    })
    .await
}
