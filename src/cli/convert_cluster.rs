//! `convert ingress --from-cluster`: the objects a conversion reads (Ingresses,
//! IngressClasses, Services, EndpointSlices, Secrets, ConfigMaps), listed in every namespace
//! of the cluster the kubeconfig names (`KUBECONFIG`, `~/.kube/config`, or in-cluster, as
//! `serve --kubernetes` finds it), as one manifest stream: the conversion and `--verify` then
//! read them exactly as they read files.

use std::fmt::Debug;

use anyhow::Context;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Api, ListParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// The objects of the cluster a conversion reads, as a YAML stream (managed fields left out).
pub async fn manifests() -> anyhow::Result<String> {
    let client = kube::Client::try_default()
        .await
        .context("Kubernetes client (in-cluster or KUBECONFIG)")?;
    let mut out = String::new();
    list::<IngressClass>(&client, &mut out).await?;
    list::<Ingress>(&client, &mut out).await?;
    list::<Service>(&client, &mut out).await?;
    list::<EndpointSlice>(&client, &mut out).await?;
    list::<Secret>(&client, &mut out).await?;
    list::<ConfigMap>(&client, &mut out).await?;
    Ok(out)
}

/// Appends every object of kind `K` (all namespaces) to `out`.
async fn list<K>(client: &kube::Client, out: &mut String) -> anyhow::Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let kind = K::kind(&());
    let objects = api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("list {kind}s"))?;
    for o in objects.items {
        let mut value = serde_json::to_value(&o).with_context(|| format!("a {kind}"))?;
        // Typed lists carry no apiVersion and kind on their items.
        value["apiVersion"] = Value::from(K::api_version(&()).into_owned());
        value["kind"] = Value::from(kind.clone().into_owned());
        if let Some(m) = value["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
        out.push_str("---\n");
        out.push_str(&crate::yaml_out::to_string(&value).with_context(|| format!("a {kind}"))?);
    }
    Ok(())
}
