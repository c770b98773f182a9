//! Secrets: watched metadata-only (names, resourceVersions; never the data of every Secret in
//! the cluster). Only Secrets that a listener's `tls.certificateRefs` names (through a
//! ReferenceGrant when cross-namespace) are fetched, and fetched again only when their
//! resourceVersion changes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::snapshot::namespace_of;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};

/// Metadata of every Secret in the cluster.
pub type SecretMetaStore = Store<PartialObjectMeta<Secret>>;

const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// A referenced Secret could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("fetch Secret {namespace}/{name}: {source}")]
    Fetch {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// True when a ReferenceGrant in `to_ns` lets Gateways of `from_ns` reference Secret `name`.
fn granted(grants: &[Arc<ReferenceGrant>], from_ns: &str, to_ns: &str, name: &str) -> bool {
    grants
        .iter()
        .filter(|g| g.metadata.namespace.as_deref() == Some(to_ns))
        .any(|g| {
            let from =
                g.spec.from.iter().any(|f| {
                    f.group == GATEWAY_GROUP && f.kind == "Gateway" && f.namespace == from_ns
                });
            let to = g.spec.to.iter().any(|t| {
                t.group.is_empty()
                    && t.kind == "Secret"
                    && t.name.as_deref().is_none_or(|n| n == name)
            });
            from && to
        })
}

/// `(namespace, name)` of every Secret a listener may use: core Secrets named in
/// `tls.certificateRefs`, in the Gateway's namespace or granted by a ReferenceGrant.
pub fn referenced_secrets(
    gateways: &[Arc<Gateway>],
    grants: &[Arc<ReferenceGrant>],
) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for gw in gateways {
        let gw_ns = namespace_of(&gw.metadata);
        let refs = gw
            .spec
            .listeners
            .iter()
            .filter_map(|l| l.tls.as_ref()?.certificate_refs.as_ref())
            .flatten();
        for r in refs {
            let core = r.group.as_deref().unwrap_or("").is_empty();
            if !core || r.kind.as_deref().unwrap_or("Secret") != "Secret" {
                continue;
            }
            let ns = r.namespace.as_deref().unwrap_or(gw_ns);
            if ns == gw_ns || granted(grants, gw_ns, ns, &r.name) {
                out.insert((ns.to_owned(), r.name.clone()));
            }
        }
    }
    out
}

/// Fetched Secrets by `(namespace, name)`, each with the resourceVersion it was fetched at.
pub struct SecretCache {
    client: Client,
    store: SecretMetaStore,
    fetched: HashMap<(String, String), Arc<Secret>>,
}

impl SecretCache {
    pub fn new(client: Client, store: SecretMetaStore) -> Self {
        Self {
            client,
            store,
            fetched: HashMap::new(),
        }
    }

    /// The referenced Secrets that exist. A Secret is fetched when first referenced and again
    /// when the metadata store shows a new resourceVersion; if a fetch fails, the copy fetched
    /// before is kept (a transient API error must not unbind a certificate).
    pub async fn referenced(&mut self, wanted: &BTreeSet<(String, String)>) -> Vec<Arc<Secret>> {
        self.fetched.retain(|k, _| wanted.contains(k));
        let mut out = Vec::new();
        for key @ (ns, name) in wanted {
            let Some(meta) = self.store.get(&ObjectRef::new(name).within(ns)) else {
                self.fetched.remove(key);
                continue;
            };
            let cached = self.fetched.get(key);
            if cached.is_some_and(|s| s.resource_version() == meta.resource_version()) {
                out.extend(cached.cloned());
                continue;
            }
            match fetch(&self.client, ns, name).await {
                Ok(Some(secret)) => {
                    let secret = Arc::new(secret);
                    self.fetched.insert(key.clone(), secret.clone());
                    out.push(secret);
                }
                Ok(None) => {
                    self.fetched.remove(key);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "keeping the Secret fetched before");
                    out.extend(self.fetched.get(key).cloned());
                }
            }
        }
        out
    }
}

/// Fetches one Secret with its data; `Ok(None)` when it no longer exists.
pub async fn fetch(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Secret>, SecretError> {
    Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|source| SecretError::Fetch {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source: Box::new(source),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_same_namespace_or_granted_secrets_are_referenced() {
        let gw: Gateway = serde_json::from_value(json!({
            "metadata": {"namespace": "web", "name": "gw"},
            "spec": {"gatewayClassName": "c", "listeners": [
                {"name": "a", "port": 443, "protocol": "HTTPS", "tls": {"certificateRefs": [
                    {"name": "local"},
                    {"name": "shared", "namespace": "certs"},
                    {"name": "other", "namespace": "certs"},
                    {"name": "denied", "namespace": "secret-ns"},
                    {"name": "cm", "kind": "ConfigMap"}]}},
                {"name": "b", "port": 80, "protocol": "HTTP"}]}
        }))
        .unwrap();
        let grant: ReferenceGrant = serde_json::from_value(json!({
            "metadata": {"namespace": "certs", "name": "g"},
            "spec": {"from": [{"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": "web"}],
                "to": [{"group": "", "kind": "Secret", "name": "shared"}]}
        }))
        .unwrap();
        let got = referenced_secrets(&[Arc::new(gw)], &[Arc::new(grant)]);
        let want: BTreeSet<(String, String)> = [("certs", "shared"), ("web", "local")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }
}
