//! Scenarios of the profile that the replay does not run, each with the reason: features not
//! implemented, and a feature the standalone replay cannot observe (tested in Kubernetes mode).

use crate::scenarios::Scenario;

/// A scenario of a feature the product does not implement yet, with the reason.
fn skipped(name: &'static str, feature: Option<&'static str>, reason: &'static str) -> Scenario {
    Scenario {
        name,
        profile: crate::report::GATEWAY_HTTP,
        feature,
        manifests: "",
        skip: Some(reason),
        run: None,
    }
}

/// Why `GatewayInfrastructure` does not run here: upstream checks the labels and annotations
/// on the Service and Pods the implementation made for the Gateway, and standalone mode makes
/// none. The Kubernetes-mode replay runs it (`kube_scenarios`).
const INFRASTRUCTURE_NOTE: &str = "standalone mode creates no Service or Pod for a Gateway to \
     carry spec.infrastructure labels and annotations; run by the Kubernetes-mode replay";

/// The scenarios that do not run here, in upstream order of appearance.
pub fn all() -> Vec<Scenario> {
    vec![skipped(
        "GatewayInfrastructure",
        Some("GatewayInfrastructurePropagation"),
        INFRASTRUCTURE_NOTE,
    )]
}
