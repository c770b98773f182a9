//! Secrets: watched metadata-only (names, resourceVersions; never the data of every Secret in
//! the cluster). Only Secrets that a listener's `tls.certificateRefs` may use (through a
//! ReferenceGrant when cross-namespace; `translate::referenced_secrets` decides) are fetched,
//! and fetched again only when their resourceVersion changes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};

/// Metadata of every Secret in the cluster.
pub type SecretMetaStore = Store<PartialObjectMeta<Secret>>;

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
