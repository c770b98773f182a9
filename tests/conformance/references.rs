//! HTTPRoute core scenarios about references and refusals: ReferenceGrants for backends,
//! unresolvable backends, parents that refuse the route (namespace, kind, sectionName, port).

use std::sync::Arc;

use crate::expect::{check, Outcome, Req, Want};
use crate::harness::Env;
use crate::status::{
    accepted, gateway_zero_routes, route_condition, route_not_accepted, routes_attached,
    wait_status, Cond,
};
use crate::{INFRA, WEB};

pub async fn partially_invalid_grant(env: Arc<Env>) -> Outcome {
    wait_status(&env, "route accepted with a refused reference", |r| {
        routes_attached(r, "same-namespace", &[(INFRA, "half-granted")])?;
        let c = Cond("ResolvedRefs", "False", "RefNotPermitted");
        route_condition(r, INFRA, "half-granted", INFRA, "same-namespace", c)
    })
    .await?;
    let gw = env.gw("same-namespace");
    check(gw, &Req::get("/"), &Want::ok("app-backend-v1")).await?;
    check(gw, &Req::get("/v2"), &Want::status(500)).await
}

pub async fn reference_grant(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "granted", &["same-namespace"]).await?;
    check(
        env.gw("same-namespace"),
        &Req::get("/"),
        &Want::ok("web-backend"),
    )
    .await
}

/// A route accepted on `same-namespace` whose backends do not resolve (`reason`).
async fn refused(env: &Env, route: &str, reason: &'static str) -> Outcome {
    wait_status(env, &format!("{route}: ResolvedRefs {reason}"), |r| {
        routes_attached(r, "same-namespace", &[(INFRA, route)])?;
        let c = Cond("ResolvedRefs", "False", reason);
        route_condition(r, INFRA, route, INFRA, "same-namespace", c)
    })
    .await
}

pub async fn invalid_reference_grant(env: Arc<Env>) -> Outcome {
    refused(&env, "not-granted", "RefNotPermitted").await?;
    check(env.gw("same-namespace"), &Req::get("/"), &Want::status(500)).await
}

pub async fn invalid_cross_namespace_backend(env: Arc<Env>) -> Outcome {
    refused(&env, "foreign-backend", "RefNotPermitted").await?;
    check(env.gw("same-namespace"), &Req::get("/"), &Want::status(500)).await
}

pub async fn invalid_cross_namespace_parent(env: Arc<Env>) -> Outcome {
    wait_status(&env, "route refused by the listener", |r| {
        refused_parent(
            r,
            WEB,
            "foreign-parent",
            "same-namespace",
            "NotAllowedByListeners",
        )
    })
    .await?;
    check(env.gw("same-namespace"), &Req::get("/"), &Want::status(404)).await
}

pub async fn disallowed_kind(env: Arc<Env>) -> Outcome {
    wait_status(
        &env,
        "HTTPRoute not allowed by a TLSRoute-only listener",
        |r| {
            refused_parent(
                r,
                INFRA,
                "wrong-kind",
                "tls-routes-only",
                "NotAllowedByListeners",
            )
        },
    )
    .await
}

/// A parentRef that names no listener of its Gateway: the route is not accepted there and
/// serves nothing.
async fn invalid_parent_ref(env: &Env, route: &str) -> Outcome {
    wait_status(
        env,
        &format!("{route}: parentRef matches no listener"),
        |r| {
            let c = Cond("Accepted", "False", "NoMatchingParent");
            route_condition(r, INFRA, route, INFRA, "parent-checks", c)?;
            route_not_accepted(r, INFRA, route)?;
            gateway_zero_routes(r, INFRA, "parent-checks")
        },
    )
    .await?;
    check(env.gw("parent-checks"), &Req::get("/"), &Want::status(404)).await
}

pub async fn parent_wrong_port(env: Arc<Env>) -> Outcome {
    invalid_parent_ref(&env, "wrong-port").await
}

pub async fn parent_wrong_section(env: Arc<Env>) -> Outcome {
    invalid_parent_ref(&env, "wrong-section").await
}

pub async fn parent_section_other_port(env: Arc<Env>) -> Outcome {
    invalid_parent_ref(&env, "section-other-port").await
}

pub async fn nonexistent_backend(env: Arc<Env>) -> Outcome {
    refused(&env, "missing-service", "BackendNotFound").await?;
    check(
        env.gw("same-namespace"),
        &Req::get("/missing"),
        &Want::status(500),
    )
    .await
}

pub async fn unknown_kind_backend(env: Arc<Env>) -> Outcome {
    refused(&env, "unknown-kind", "InvalidKind").await?;
    check(
        env.gw("same-namespace"),
        &Req::get("/unknown"),
        &Want::status(500),
    )
    .await
}

/// A parent that refused the route (`reason`) with its references resolved, no accepted
/// parent, and no route counted on the Gateway.
fn refused_parent(
    r: &crate::status::Report,
    ns: &str,
    route: &str,
    gw: &str,
    reason: &'static str,
) -> Outcome {
    let resolved = Cond("ResolvedRefs", "True", "ResolvedRefs");
    route_condition(r, ns, route, INFRA, gw, resolved)?;
    route_condition(r, ns, route, INFRA, gw, Cond("Accepted", "False", reason))?;
    route_not_accepted(r, ns, route)?;
    gateway_zero_routes(r, INFRA, gw)
}
