//! Secrets: watched metadata-only (names, labels, resourceVersions; never the data of every
//! Secret in the cluster), and fetched one by one when a listener references them.

use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};

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

/// Whether the metadata store knows the Secret (no API call).
pub fn exists(store: &SecretMetaStore, namespace: &str, name: &str) -> bool {
    store.get(&ObjectRef::new(name).within(namespace)).is_some()
}

/// Fetches one referenced Secret with its data. `Ok(None)` when the metadata store does not
/// know it (so a missing Secret costs no API call) or the API server no longer has it.
pub async fn fetch_referenced(
    client: &Client,
    store: &SecretMetaStore,
    namespace: &str,
    name: &str,
) -> Result<Option<Secret>, SecretError> {
    if !exists(store, namespace, name) {
        return Ok(None);
    }
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
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    #[test]
    fn metadata_store_answers_existence() {
        let (store, mut writer) = reflector::store::<PartialObjectMeta<Secret>>();
        let mut meta = PartialObjectMeta::<Secret>::default();
        meta.metadata.name = Some("tls".into());
        meta.metadata.namespace = Some("web".into());
        writer.apply_watcher_event(&Event::Apply(meta));
        assert!(exists(&store, "web", "tls"));
        assert!(!exists(&store, "other", "tls"));
    }
}
