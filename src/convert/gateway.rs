//! The written Gateways: one per IngressClass, from the implicit Gateway serving its
//! Ingresses (`translate::ingress`), so listeners and certificates are the ones served:
//! listener `http` on port 80, an HTTPS listener per TLS host with the Ingress's Secret and a
//! TLS Passthrough listener per `ssl-passthrough` host, in the chosen namespace and
//! GatewayClass. Past 64 listeners (the most a Gateway takes) the
//! rest go into ListenerSets of the Gateway; a Secret in another namespace comes with a
//! ReferenceGrant naming only it. The client certificate the Ingresses' `proxy-ssl-secret`
//! presents to their verified TLS backends becomes the Gateway's
//! `spec.tls.backend.clientCertificateRef` when they agree on one Secret (Gateway API has one
//! per Gateway). Pure.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::names::{host_part, joined, Parent};
use super::ConvertOptions;
use crate::kinds::ingress::serving_gateway;
use crate::snapshot::{find_named, namespace_of, Snapshot};
use crate::translate::ingress::{is_implicit, upstream, IMPLICIT_NAMESPACE};

/// The most listeners a Gateway (or a ListenerSet) takes.
pub const MAX_LISTENERS: usize = 64;

/// One written listener.
#[derive(Debug, Clone)]
pub struct Listener {
    /// The Gateway or ListenerSet holding it.
    pub parent: Parent,
    pub name: String,
    pub hostname: Option<String>,
    pub https: bool,
    /// A TLS listener in Passthrough mode (an `ssl-passthrough` host): TLSRoutes only.
    pub passthrough: bool,
}

/// The written Gateways of every IngressClass, with their listeners.
#[derive(Debug, Default)]
pub struct Gateways {
    pub objects: Vec<Value>,
    /// By IngressClass (the implicit Gateway's name): its Gateway and its listeners.
    pub classes: Vec<(String, Parent, Vec<Listener>)>,
    /// By Ingress (`namespace`, `name`) presenting a client certificate to verified TLS
    /// backends: what became of it.
    pub client_certificates: BTreeMap<(String, String), ClientCertificate>,
}

/// What became of an Ingress's `proxy-ssl-secret` client certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCertificate {
    /// The Gateway's `clientCertificateRef`: Secret `namespace/name`.
    Written(String),
    /// Not written, and why.
    NotWritten(String),
}

impl Gateways {
    /// The Gateway and listeners of the IngressClass `class`.
    pub fn of(&self, class: &str) -> Option<(&Parent, &[Listener])> {
        self.classes
            .iter()
            .find(|(c, _, _)| c == class)
            .map(|(_, p, l)| (p, l.as_slice()))
    }
}

/// The Gateways (ListenerSets, ReferenceGrants) for the implicit Gateways of `prepared`.
pub fn write(prepared: &Snapshot, options: &ConvertOptions) -> Gateways {
    let ns = options.gateway_namespace.as_str();
    let mut out = Gateways::default();
    let mut grants: BTreeSet<(String, String)> = BTreeSet::new();
    let mut sets = Vec::new();
    for implicit in prepared.gateways.iter().filter(|g| is_implicit(g)) {
        let class = implicit.metadata.name.clone().unwrap_or_default();
        let gateway = Parent {
            kind: "Gateway",
            namespace: ns.to_owned(),
            name: class.clone(),
        };
        let implicit = serde_json::to_value(&implicit.spec).unwrap_or_default();
        let mut listeners: Vec<Value> = implicit["listeners"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for l in &mut listeners {
            rewrite_listener(l, ns, &mut grants);
        }
        let mut written = Vec::new();
        let mut chunks = listeners.chunks(MAX_LISTENERS);
        let first: Vec<Value> = chunks.next().map(<[Value]>::to_vec).unwrap_or_default();
        written.extend(first.iter().map(|l| listener(&gateway, l)));
        let mut spec = json!({"gatewayClassName": options.gateway_class, "listeners": first});
        let wanted = presented(prepared, &class);
        let secrets: BTreeSet<&(String, String)> = wanted.iter().map(|(_, s)| s).collect();
        let outcome = match secrets.iter().next() {
            Some((secret_ns, secret)) if secrets.len() == 1 => {
                let mut r = json!({"group": "", "kind": "Secret", "name": secret});
                if secret_ns != ns {
                    r["namespace"] = json!(secret_ns);
                    grants.insert((secret_ns.clone(), secret.clone()));
                }
                spec["tls"] = json!({"backend": {"clientCertificateRef": r}});
                ClientCertificate::Written(format!("{secret_ns}/{secret}"))
            }
            _ => {
                let names: Vec<String> = secrets.iter().map(|(n, s)| format!("{n}/{s}")).collect();
                ClientCertificate::NotWritten(format!(
                    "the Ingresses of Gateway {ns}/{class} present different Secrets ({}), and a \
                     Gateway has one client certificate for its backends",
                    names.join(", ")
                ))
            }
        };
        for (ingress, _) in wanted {
            out.client_certificates.insert(ingress, outcome.clone());
        }
        for (i, chunk) in chunks.enumerate() {
            let set = Parent {
                kind: "ListenerSet",
                namespace: ns.to_owned(),
                name: joined(&class, &format!("listeners-{}", i + 1)),
            };
            written.extend(chunk.iter().map(|l| listener(&set, l)));
            sets.push(json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
                "metadata": {"name": set.name, "namespace": ns},
                "spec": {"parentRef": gateway.reference(ns, None), "listeners": chunk},
            }));
            spec["allowedListeners"] = json!({"namespaces": {"from": "Same"}});
        }
        out.objects.push(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": class, "namespace": ns},
            "spec": spec,
        }));
        out.classes.push((class, gateway, written));
    }
    out.objects.extend(sets.iter().cloned());
    let from_sets = !sets.is_empty();
    for (secret_ns, secret) in grants {
        let mut from = vec![
            json!({"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                   "namespace": ns}),
        ];
        if from_sets {
            from.push(
                json!({"group": "gateway.networking.k8s.io", "kind": "ListenerSet",
                             "namespace": ns}),
            );
        }
        out.objects.push(json!({
            "apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": joined("edgeplane-gateway", &secret), "namespace": secret_ns},
            "spec": {"from": from, "to": [{"group": "", "kind": "Secret", "name": secret}]},
        }));
    }
    out
}

/// The Ingresses served by the implicit Gateway `class` whose verified TLS backends (the
/// BackendTLSPolicies written for them) get a client certificate, with its Secret
/// (`namespace`, `name`).
fn presented(prepared: &Snapshot, class: &str) -> Vec<((String, String), (String, String))> {
    let served = |i: &&std::sync::Arc<k8s_openapi::api::networking::v1::Ingress>| {
        serving_gateway(i) == Some((IMPLICIT_NAMESPACE, class))
    };
    prepared
        .ingresses
        .iter()
        .filter(served)
        .filter_map(|i| {
            let ns = namespace_of(&i.metadata);
            let name = i.metadata.name.as_deref()?;
            let made = format!("{}{name}", upstream::MADE_PREFIX);
            let policy = find_named(&prepared.backend_tls_policies, ns, &made)?;
            upstream::convertible(policy)?;
            let secret = upstream::presented_secret(policy)?;
            Some((
                (ns.to_owned(), name.to_owned()),
                (ns.to_owned(), secret.to_owned()),
            ))
        })
        .collect()
}

/// Names an HTTPS listener (a TLS Passthrough one) after its host, `https-<host>`
/// (`tls-<host>`), and makes its certificateRefs relative to `ns`, noting each Secret of
/// another namespace in `grants`.
fn rewrite_listener(l: &mut Value, ns: &str, grants: &mut BTreeSet<(String, String)>) {
    let prefix = if l["protocol"] == "TLS" {
        "tls"
    } else {
        "https"
    };
    if let Some(host) = l["hostname"].as_str() {
        l["name"] = json!(joined(prefix, &host_part(host)));
    }
    let Some(refs) = l
        .pointer_mut("/tls/certificateRefs")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for r in refs {
        let (Some(secret_ns), Some(name)) = (r["namespace"].as_str(), r["name"].as_str()) else {
            continue;
        };
        if secret_ns == ns {
            if let Some(m) = r.as_object_mut() {
                m.remove("namespace");
            }
        } else {
            grants.insert((secret_ns.to_owned(), name.to_owned()));
        }
    }
}

fn listener(parent: &Parent, l: &Value) -> Listener {
    Listener {
        parent: parent.clone(),
        name: l["name"].as_str().unwrap_or_default().to_owned(),
        hostname: l["hostname"].as_str().map(str::to_owned),
        https: l["protocol"] == "HTTPS",
        passthrough: l["protocol"] == "TLS",
    }
}
