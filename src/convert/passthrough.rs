//! The written TLSRoutes of an `ssl-passthrough` Ingress: the ones serving attaches
//! ([`passthrough::routes`]), each attached by `sectionName` to the TLS Passthrough listener
//! of its host on the IngressClass's Gateway, named after the Ingress (plus the host when it
//! has several). Pure.

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use super::gateway::Gateways;
use super::names::{host_part, joined};
use super::routes::{Written, CONVERTED_FROM};
use crate::kinds::ingress::serving_gateway;
use crate::snapshot::namespace_of;
use crate::translate::ingress::passthrough;

/// Adds to `out` a TLSRoute per host the prepared Ingress `ingress` passes through.
pub fn add_routes(out: &mut Written, ingress: &Ingress, gateways: &Gateways) {
    let routes = passthrough::routes(ingress);
    let class = serving_gateway(ingress).map(|(_, class)| class);
    let Some((gateway, listeners)) = class.and_then(|c| gateways.of(c)) else {
        return;
    };
    let ns = namespace_of(&ingress.metadata);
    let name = ingress.metadata.name.clone().unwrap_or_default();
    for (target, route) in &routes {
        let parents: Vec<Value> = listeners
            .iter()
            .filter(|l| l.passthrough && l.hostname.as_deref() == Some(target.host.as_str()))
            .map(|l| gateway.reference(ns, Some(&l.name)))
            .collect();
        if parents.is_empty() {
            continue;
        }
        let route_name = if routes.len() == 1 {
            name.clone()
        } else {
            joined(&name, &host_part(&target.host))
        };
        let mut spec = serde_json::to_value(&route.spec).unwrap_or_default();
        spec["parentRefs"] = json!(parents);
        out.names.push(format!("TLSRoute {ns}/{route_name}"));
        out.objects.push(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "TLSRoute",
            "metadata": {"name": route_name, "namespace": ns,
                         "annotations": {CONVERTED_FROM: format!("Ingress/{ns}/{name}")}},
            "spec": spec,
        }));
    }
}
