//! The ReferenceGrants of canaries folded across namespaces: a canary Ingress whose path is
//! served by a main Ingress of another namespace becomes backendRefs, in the main Ingress's
//! written routes, to the canary's Service in the canary's namespace, which Gateway API
//! allows only with a ReferenceGrant there. One grant per canary Ingress and namespace of
//! referring routes, from the route kinds written (HTTPRoute, GRPCRoute) to the canary's
//! Services only; none twice. Pure.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use super::names::joined;
use super::routes::CONVERTED_FROM;
use crate::snapshot::namespace_of;
use crate::translate::ingress::canary;

/// One grant: the canary Ingress (`namespace`, `name`) and the namespace of the routes
/// referring to its Services.
type Key = (String, String, String);

/// The grants the written routes need, gathered Ingress by Ingress.
#[derive(Debug, Default)]
pub struct Grants {
    /// By [`Key`]: the referring route kinds and the Services they reach.
    wanted: BTreeMap<Key, (BTreeSet<String>, BTreeSet<String>)>,
}

impl Grants {
    /// Notes the grants the `routes` written for the prepared main Ingress `ingress` need:
    /// each backendRef to a Service of a canary folded into it from another namespace.
    pub fn note(&mut self, ingress: &Ingress, routes: &[Value]) {
        let ns = namespace_of(&ingress.metadata);
        for c in canary::of(ingress) {
            let canary_ns = c.namespace();
            let Some(service) = c.backend.service.as_ref().map(|s| s.name.as_str()) else {
                continue;
            };
            if canary_ns == ns {
                continue;
            }
            let name = c.from.split_once('/').map_or("", |(_, n)| n);
            for route in routes {
                let refers = route["spec"]["rules"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|r| r["backendRefs"].as_array().into_iter().flatten())
                    .any(|b| b["namespace"] == canary_ns && b["name"] == service);
                let Some(kind) = route["kind"].as_str().filter(|_| refers) else {
                    continue;
                };
                let key = (canary_ns.to_owned(), name.to_owned(), ns.to_owned());
                let (kinds, services) = self.wanted.entry(key).or_default();
                kinds.insert(kind.to_owned());
                services.insert(service.to_owned());
            }
        }
    }

    /// The ReferenceGrants, each with the `namespace/name` of its canary Ingress: in the
    /// canary's namespace, named `<canary>-canary-from-<route namespace>`.
    pub fn write(&self) -> Vec<(String, Value)> {
        self.wanted
            .iter()
            .map(|((ns, name, from_ns), (kinds, services))| {
                let from: Vec<Value> = kinds
                    .iter()
                    .map(|k| {
                        json!({"group": "gateway.networking.k8s.io", "kind": k,
                               "namespace": from_ns})
                    })
                    .collect();
                let to: Vec<Value> = services
                    .iter()
                    .map(|s| json!({"group": "", "kind": "Service", "name": s}))
                    .collect();
                let grant = joined(name, &format!("canary-from-{from_ns}"));
                let object = json!({
                    "apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                    "metadata": {"name": grant, "namespace": ns,
                                 "annotations": {CONVERTED_FROM: format!("Ingress/{ns}/{name}")}},
                    "spec": {"from": from, "to": to},
                });
                (format!("{ns}/{name}"), object)
            })
            .collect()
    }
}
