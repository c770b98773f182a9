//! The replay in Kubernetes mode: the same scenario definitions and expectations as the
//! standalone replay, run through the API emulator against `serve --kubernetes` (see
//! `kube_env`), plus the scenario only this mode can run (`GatewayInfrastructure`: the
//! Gateway's generated Service, found in the Gateway's namespace by its
//! `gateway.networking.k8s.io/gateway-name` label, carries `spec.infrastructure`).
//!
//! Each scenario starts its own emulator and binary, so by default a representative subset
//! runs ([`DEFAULT`]: both features that depend on the mode and core HTTPRoute and Gateway
//! scenarios); `CONFORMANCE_KUBE=all` runs every scenario of the standalone list.

use std::sync::Arc;

use crate::expect::{Outcome, CONSISTENCY_TIMEOUT};
use crate::harness::Env;
use crate::scenarios::Scenario;
use crate::status::{gateway_ready, wait_status};
use crate::INFRA;

/// Scenarios run by default in Kubernetes mode.
pub const DEFAULT: &[&str] = &[
    "GatewayInfrastructure",
    "GatewayStaticAddresses",
    "GatewayModifyListeners",
    "GatewayWithAttachedRoutes",
    "GatewayObservedGenerationBump",
    "HTTPRouteSimpleSameNamespace",
    "HTTPRouteCrossNamespace",
    "HTTPRouteExactPathMatching",
    "HTTPRouteHeaderMatching",
    "HTTPRouteHostnameIntersection",
    "HTTPRouteListenerHostnameMatching",
    "HTTPRouteMatching",
    "HTTPRouteMultipleGateways",
    "HTTPRouteReferenceGrant",
    "HTTPRouteInvalidCrossNamespaceParentRef",
    "HTTPRouteRequestHeaderModifier",
    "HTTPRouteObservedGenerationBump",
    "GatewayWithAttachedRoutesWithPort8080",
];

/// The scenarios of this run: [`DEFAULT`], or all with `CONFORMANCE_KUBE=all`; the standalone
/// list's `GatewayInfrastructure` (skipped there) is replaced by the runnable one.
pub fn all() -> Vec<Scenario> {
    let everything = std::env::var("CONFORMANCE_KUBE").is_ok_and(|v| v == "all");
    crate::scenarios::all()
        .into_iter()
        .map(|s| {
            if s.name == "GatewayInfrastructure" {
                infrastructure_scenario()
            } else {
                s
            }
        })
        .filter(|s| everything || DEFAULT.contains(&s.name))
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
