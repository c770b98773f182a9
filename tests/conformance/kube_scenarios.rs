//! The replay in Kubernetes mode: the same scenario definitions and expectations as the
//! standalone replay, run through the API emulator against `serve --kubernetes` (see
//! `kube_env`), plus the scenario only this mode can run (`GatewayInfrastructure`: the
//! Gateway's generated Service, found in the Gateway's namespace by its
//! `gateway.networking.k8s.io/gateway-name` label, carries `spec.infrastructure`).
//!
//! Every scenario runs (about two minutes in all: each starts its own emulator and binary),
//! except those in [`CREATION_ORDER`], which are reported as skipped with the reason.

use std::sync::Arc;

use crate::expect::{Outcome, CONSISTENCY_TIMEOUT};
use crate::harness::Env;
use crate::scenarios::Scenario;
use crate::status::{gateway_ready, wait_status};
use crate::INFRA;

/// Scenarios whose fixtures order objects by `metadata.creationTimestamp` ("the oldest route
/// wins", ListenerSet precedence): the API server sets that field when it creates an object,
/// ignoring the fixture's, and the fixtures' objects are created within one second, so the
/// order they check is not the order they wrote. Not run in Kubernetes mode.
pub const CREATION_ORDER: &[&str] = &[
    "ListenerSetHostnameConflict",
    "TCPRouteMultipleRoutesAttachment",
    "UDPRouteMultipleRoutesAttachment",
];

const CREATION_ORDER_NOTE: &str = "orders objects by the creationTimestamp its fixture sets, \
     which the API server replaces at creation (objects created within one second tie); run \
     by the standalone replay";

/// Every scenario of the standalone list, with its `GatewayInfrastructure` (skipped there)
/// replaced by the runnable one and [`CREATION_ORDER`] skipped.
pub fn all() -> Vec<Scenario> {
    crate::scenarios::all()
        .into_iter()
        .map(|mut s| {
            if s.name == "GatewayInfrastructure" {
                return infrastructure_scenario();
            }
            if CREATION_ORDER.contains(&s.name) {
                s.run = None;
                s.skip = Some(CREATION_ORDER_NOTE);
            }
            s
        })
        .collect()
}

fn infrastructure_scenario() -> Scenario {
    Scenario {
        name: "GatewayInfrastructure",
        profile: crate::report::GATEWAY_HTTP,
        feature: Some("GatewayInfrastructurePropagation"),
        manifests: include_str!("manifests/infrastructure.yaml"),
        skip: None,
        run: Some(|env| Box::pin(infrastructure(env))),
    }
}

/// Upstream's check: every resource in the Gateway's namespace labelled with the Gateway's name
/// (here its Service; there are no per-Gateway Pods) carries the infrastructure labels and
/// annotations, and there is at least one.
async fn infrastructure(env: Arc<Env>) -> Outcome {
    let gw = "with-infrastructure";
    wait_status(&env, "Gateway ready", |r| gateway_ready(r, INFRA, gw)).await?;
    let kube = env
        .kube
        .clone()
        .ok_or("GatewayInfrastructure runs in Kubernetes mode only")?;
    let deadline = std::time::Instant::now() + CONSISTENCY_TIMEOUT;
    loop {
        let services = kube.gateway_services(INFRA, gw);
        let last = if services.is_empty() {
            Err(format!(
                "no Service in {INFRA} labelled gateway.networking.k8s.io/gateway-name={gw}"
            ))
        } else {
            services.iter().try_for_each(|s| {
                let m = &s["metadata"];
                if m["labels"]["team"] != "edge-conformance" {
                    return Err(format!("Service {} labels {}", m["name"], m["labels"]));
                }
                if m["annotations"]["cost-center"] != "1762" {
                    return Err(format!(
                        "Service {} annotations {}",
                        m["name"], m["annotations"]
                    ));
                }
                Ok(())
            })
        };
        match last {
            Ok(()) => return Ok(()),
            Err(e) if std::time::Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
}
