//! Scenarios of profile GATEWAY-TCP: TCPRoutes attached by sectionName and port, across
//! namespaces with and without a ReferenceGrant, with a missing backend, and on a listener
//! that does not carry them. The echo pods speak HTTP, so traffic is checked with HTTP requests
//! sent to the TCP listeners' ports.

use std::sync::Arc;

use crate::expect::{check, distribution, Outcome, Req, Want};
use crate::harness::Env;
use crate::status::{gateway_listeners, route_condition_of, wait_status, Cond, Listener, Report};
use crate::INFRA;

const KIND: &str = "TCPRoute";
const GW: &str = "tcp-gateway";

/// The Gateway's listeners: each TCP listener with one route, the HTTP one with none (the
/// TCPRoute naming it is not allowed there).
fn listeners_ready(r: &Report) -> Outcome {
    let ok = vec![
        Cond("Accepted", "True", "Accepted"),
        Cond("Programmed", "True", "Programmed"),
        Cond("ResolvedRefs", "True", "ResolvedRefs"),
    ];
    let tcp = |name: &'static str| Listener {
        name,
        kinds: &["TCPRoute"],
        attached: 1,
        conditions: ok.clone(),
    };
    let http = Listener::http_default_kinds("http", 0, &ok);
    let all = [
        tcp("tcp-1"),
        tcp("tcp-2"),
        tcp("tcp-3"),
        tcp("tcp-4"),
        tcp("tcp-5"),
        tcp("tcp-6"),
        Listener {
            attached: 2,
            ..tcp("tcp-7")
        },
        http,
    ];
    gateway_listeners(r, INFRA, GW, &all)
}

fn route(r: &Report, route: &str, c: Cond) -> Outcome {
    route_condition_of(r, KIND, INFRA, route, INFRA, GW, c)
}

/// Route accepted with its references resolved.
fn accepted(r: &Report, name: &str) -> Outcome {
    route(r, name, Cond("Accepted", "True", "Accepted"))?;
    route(r, name, Cond("ResolvedRefs", "True", "ResolvedRefs"))
}

async fn over_port(env: &Env, port: u16, backend: &str) -> Outcome {
    check(env.gw(GW), &Req::get("/").port(port), &Want::ok(backend)).await
}

pub async fn parent_ref_port_and_section_name(env: Arc<Env>) -> Outcome {
    wait_status(&env, "routes attached by sectionName and port", |r| {
        listeners_ready(r)?;
        accepted(r, "by-section")?;
        accepted(r, "by-port")
    })
    .await?;
    over_port(&env, 9001, "infra-backend-v1").await?;
    over_port(&env, 9002, "infra-backend-v2").await
}

pub async fn reference_grant(env: Arc<Env>) -> Outcome {
    wait_status(&env, "granted route resolved", |r| {
        listeners_ready(r)?;
        accepted(r, "granted")
    })
    .await?;
    over_port(&env, 9003, "app-backend-v1").await
}

pub async fn invalid_backend_nonexistent(env: Arc<Env>) -> Outcome {
    wait_status(&env, "nonexistent-backend: BackendNotFound", |r| {
        listeners_ready(r)?;
        route(
            r,
            "nonexistent-backend",
            Cond("Accepted", "True", "Accepted"),
        )?;
        let c = Cond("ResolvedRefs", "False", "BackendNotFound");
        route(r, "nonexistent-backend", c)
    })
    .await
}

pub async fn invalid_cross_namespace_backend(env: Arc<Env>) -> Outcome {
    wait_status(&env, "not-granted: RefNotPermitted", |r| {
        listeners_ready(r)?;
        route(r, "not-granted", Cond("Accepted", "True", "Accepted"))?;
        route(
            r,
            "not-granted",
            Cond("ResolvedRefs", "False", "RefNotPermitted"),
        )
    })
    .await
}

pub async fn invalid_non_tcp_listener(env: Arc<Env>) -> Outcome {
    wait_status(&env, "on-http-listener: NotAllowedByListeners", |r| {
        listeners_ready(r)?;
        let c = Cond("Accepted", "False", "NotAllowedByListeners");
        route(r, "on-http-listener", c)
    })
    .await
}

/// Shares of 1,000 connections (`Connection: close` makes each request a new one) within 5
/// points of the weights 70/30/0.
pub async fn weighted_routing(env: Arc<Env>) -> Outcome {
    wait_status(&env, "weighted route resolved", |r| {
        listeners_ready(r)?;
        accepted(r, "weighted")
    })
    .await?;
    let req = Req::get("/").port(9006).header("Connection", "close");
    check(env.gw(GW), &req, &Want::status(200)).await?;
    let n = 1000;
    let counts = distribution(env.gw(GW), &req, n).await;
    weights_hold(&counts, n)
}

/// 70/30/0 within 5 points over `n`, and nothing else.
pub fn weights_hold(counts: &std::collections::BTreeMap<String, usize>, n: usize) -> Outcome {
    let share = |svc: &str| counts.get(svc).copied().unwrap_or(0) as f64 / n as f64;
    let others: usize = counts
        .iter()
        .filter(|(k, _)| !k.starts_with("infra-backend-v"))
        .map(|(_, v)| v)
        .sum();
    if others > 0
        || (share("infra-backend-v1") - 0.7).abs() > 0.05
        || (share("infra-backend-v2") - 0.3).abs() > 0.05
        || share("infra-backend-v3") > 0.0
    {
        return Err(format!("distribution {counts:?}, want 70/30/0 within 5%"));
    }
    Ok(())
}

/// A parentRef without sectionName or port attaches to every TCP listener of the Gateway.
pub async fn parent_ref_attach_all(env: Arc<Env>) -> Outcome {
    wait_status(&env, "everywhere attached to both listeners", |r| {
        let ok = vec![
            Cond("Accepted", "True", "Accepted"),
            Cond("Programmed", "True", "Programmed"),
            Cond("ResolvedRefs", "True", "ResolvedRefs"),
        ];
        let l = |name: &'static str| Listener {
            name,
            kinds: &["TCPRoute"],
            attached: 1,
            conditions: ok.clone(),
        };
        gateway_listeners(r, INFRA, "tcp-all", &[l("first"), l("second")])?;
        let a = Cond("Accepted", "True", "Accepted");
        route_condition_of(r, KIND, INFRA, "everywhere", INFRA, "tcp-all", a)
    })
    .await?;
    for port in [9202, 9203] {
        check(
            env.gw("tcp-all"),
            &Req::get("/").port(port),
            &Want::ok("infra-backend-v1"),
        )
        .await?;
    }
    Ok(())
}

/// Two routes on one listener: both accepted and counted; the older one serves it.
pub async fn multiple_routes_attachment(env: Arc<Env>) -> Outcome {
    wait_status(&env, "older and newer accepted", |r| {
        listeners_ready(r)?;
        accepted(r, "older")?;
        accepted(r, "newer")
    })
    .await?;
    check(
        env.gw(GW),
        &Req::get("/").port(9007),
        &Want::ok("infra-backend-v1"),
    )
    .await
}
