//! The implicit Gateway of an IngressClass: what serves our Ingresses unless
//! `--ingress-gateway` names a Gateway. One per class with Ingresses, named after the class in
//! the namespace [`IMPLICIT_NAMESPACE`] (not a valid Kubernetes name, so it never collides with
//! a Gateway of the cluster or of the files), of the GatewayClass [`IMPLICIT_CLASS`] (ours):
//! listener `http` on port 80 and, per host of the Ingresses' `tls[]`, an HTTPS listener on
//! port 443 for that host with its Secret, so the certificate is chosen by SNI; per host of
//! an `ssl-passthrough` Ingress, a TLS Passthrough listener on port 443 instead. The Secrets
//! are in the Ingresses' namespaces: each comes with a ReferenceGrant from this namespace,
//! naming only that Secret. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use super::{passthrough, IngressProblems};
use crate::snapshot::{find_named, namespace_of, Snapshot};
use crate::translate::TranslateOptions;

/// Namespace of the implicit Gateways. The colon makes it no valid namespace: no object of a
/// cluster or a config directory can be there, name one of these Gateways, or use their grants.
pub const IMPLICIT_NAMESPACE: &str = "edgeplane:ingress";

/// GatewayClass of the implicit Gateways (ours; not a valid name either).
pub const IMPLICIT_CLASS: &str = "edgeplane:ingress";

/// The class of Ingresses naming none, when `--watch-ingress-without-class` serves them and
/// no IngressClass of ours exists (no IngressClass can have this name).
pub const NO_CLASS: &str = "_";

/// True for a Gateway `add_implicit` made: it binds as in standalone mode in a cluster too
/// (no Service of the cluster routes to it).
pub fn is_implicit(gateway: &Gateway) -> bool {
    gateway.metadata.namespace.as_deref() == Some(IMPLICIT_NAMESPACE)
}

/// Adds the implicit GatewayClass, one Gateway per class in `by_class` and the grants their
/// certificates need; TLS hosts that cannot be served become problems of their Ingress.
pub fn add_implicit(
    out: &mut Snapshot,
    by_class: &BTreeMap<&str, Vec<Arc<Ingress>>>,
    options: &TranslateOptions,
    problems: &mut IngressProblems,
) {
    if by_class.is_empty() {
        return;
    }
    let class = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": IMPLICIT_CLASS},
        "spec": {"controllerName": options.controller_name},
    });
    if let Ok(class) = serde_json::from_value::<GatewayClass>(class) {
        out.gateway_classes.push(Arc::new(class));
    }
    for (class, ingresses) in by_class {
        let mut sorted: Vec<&Arc<Ingress>> = ingresses.iter().collect();
        sorted.sort_by_key(|i| {
            let created = i.metadata.creation_timestamp.as_ref().map(|t| t.0);
            (
                created,
                namespace_of(&i.metadata).to_owned(),
                i.metadata.name.clone(),
            )
        });
        let passed = passthrough_hosts(&sorted);
        let tls = tls_hosts(&sorted, &passed, out, problems);
        let mut listeners = vec![json!({
            "name": "http", "port": 80, "protocol": "HTTP",
            "allowedRoutes": {"namespaces": {"from": "All"}},
        })];
        for (i, host) in passed.iter().enumerate() {
            listeners.push(json!({
                "name": format!("passthrough-{i}"), "port": 443, "protocol": "TLS",
                "hostname": host,
                "tls": {"mode": "Passthrough"},
                "allowedRoutes": {"namespaces": {"from": "All"}},
            }));
        }
        for (i, (host, (ns, secret))) in tls.iter().enumerate() {
            listeners.push(json!({
                "name": format!("https-{i}"), "port": 443, "protocol": "HTTPS",
                "hostname": host,
                "tls": {"mode": "Terminate", "certificateRefs": [
                    {"group": "", "kind": "Secret", "namespace": ns, "name": secret}]},
                "allowedRoutes": {"namespaces": {"from": "All"}},
            }));
            out.reference_grants.extend(grant(ns, secret));
        }
        let gateway = json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": class, "namespace": IMPLICIT_NAMESPACE, "generation": 1},
            "spec": {"gatewayClassName": IMPLICIT_CLASS, "listeners": listeners},
        });
        if let Ok(gateway) = serde_json::from_value::<Gateway>(gateway) {
            out.gateways.push(Arc::new(gateway));
        }
    }
}

/// The hosts of a class's Ingresses passed through (`ssl-passthrough`): nginx turns it on for
/// a host when any Ingress of the host sets it. Their HTTPS listeners are left out: the TLS
/// Passthrough listener of the host takes its connections.
fn passthrough_hosts(ingresses: &[&Arc<Ingress>]) -> BTreeSet<String> {
    ingresses
        .iter()
        .flat_map(|i| passthrough::targets(i).0)
        .map(|t| t.host)
        .collect()
}

/// The TLS hosts of a class's Ingresses (oldest first) with the Secret serving each: the
/// first Ingress naming a host gives its Secret. Entries without hosts or Secret, a Secret
/// that is missing, and a host another Ingress already gave are reported. Hosts `passed`
/// through are never terminated: they are left out, and a Secret only they name is not
/// looked for.
fn tls_hosts(
    ingresses: &[&Arc<Ingress>],
    passed: &BTreeSet<String>,
    snapshot: &Snapshot,
    problems: &mut IngressProblems,
) -> BTreeMap<String, (String, String)> {
    let mut hosts: BTreeMap<String, (String, String)> = BTreeMap::new();
    for ingress in ingresses {
        let ns = namespace_of(&ingress.metadata).to_owned();
        let key = (
            ns.clone(),
            ingress.metadata.name.clone().unwrap_or_default(),
        );
        let mut found = Vec::new();
        let entries = ingress.spec.as_ref().and_then(|s| s.tls.as_deref());
        for entry in entries.unwrap_or_default() {
            let Some(secret) = entry.secret_name.as_deref().filter(|s| !s.is_empty()) else {
                found.push("a tls entry without secretName is not served".to_owned());
                continue;
            };
            let all_hosts = entry.hosts.as_deref().unwrap_or_default();
            let entry_hosts: Vec<&String> =
                all_hosts.iter().filter(|h| !passed.contains(*h)).collect();
            if !all_hosts.is_empty() && entry_hosts.is_empty() {
                continue;
            }
            if all_hosts.is_empty() {
                found.push(format!(
                    "tls entry with Secret {secret} lists no hosts: not served (no default certificate)"
                ));
            }
            if find_named(&snapshot.secrets, &ns, secret).is_none() {
                found.push(format!("TLS Secret {ns}/{secret} not found"));
            }
            for host in entry_hosts {
                match hosts.get(host.as_str()) {
                    Some((n, s)) if (n, s.as_str()) != (&ns, secret) => found.push(format!(
                        "TLS host {host} is served with Secret {n}/{s} of an older Ingress"
                    )),
                    Some(_) => {}
                    None => {
                        hosts.insert((*host).clone(), (ns.clone(), secret.to_owned()));
                    }
                }
            }
        }
        if !found.is_empty() {
            problems.entry(key).or_default().extend(found);
        }
    }
    hosts
}

/// The ReferenceGrant that lets the implicit Gateways use Secret `ns/name`, and nothing else.
fn grant(ns: &str, name: &str) -> Option<Arc<ReferenceGrant>> {
    let grant: Value = json!({
        "apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
        "metadata": {"name": format!("edgeplane-ingress-{name}"), "namespace": ns},
        "spec": {
            "from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                      "namespace": IMPLICIT_NAMESPACE}],
            "to": [{"group": "", "kind": "Secret", "name": name}],
        },
    });
    serde_json::from_value(grant).ok().map(Arc::new)
}
