//! What the Gateway Service keeper deletes, and the finalizers that guard it: a deleted
//! Gateway's Service and EndpointSlices before its cleanup finalizer is dropped, the Services
//! of older versions and of Gateways that moved on (`leftovers`), and the GatewayClass
//! finalizer while Gateways use the class. Apart from `gateway_service`, which creates and
//! updates, because deleting has rules of its own (404 is done, 409 retries the pass).

use std::collections::BTreeSet;
use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::{key, Keeper, ServiceError};
use crate::provider::kube::binding::{
    is_current, label_value, owner_gateway, service_name, CLASS_FINALIZER, GATEWAY_FINALIZER,
};
use crate::provider::kube::gateway_endpoints::owned_slices;
use crate::snapshot::namespace_of;

/// True when `obj` carries `finalizer`.
pub(super) fn has_finalizer<K: ResourceExt>(obj: &K, finalizer: &str) -> bool {
    obj.finalizers().iter().any(|f| f == finalizer)
}

/// Labelled Services that are not a live Gateway's current one: those older versions kept in
/// the controller's namespace, and those of Gateways of ours (of a class in `classes`) that
/// moved on. A Service whose Gateway is gone is left to the garbage collector (its owner
/// reference), as is one of a Gateway another installation serves.
pub(super) fn leftovers<'s>(
    services: &'s [Arc<Service>],
    gateways: &[Arc<Gateway>],
    classes: &[Arc<GatewayClass>],
    live: &BTreeSet<String>,
    controller_ns: &str,
) -> Vec<&'s Arc<Service>> {
    let ours = |gw: &Gateway| {
        classes
            .iter()
            .any(|c| c.name_any() == gw.spec.gateway_class_name)
    };
    services
        .iter()
        .filter(|s| {
            let Some((gw_ns, gw_name)) = owner_gateway(s) else {
                return false;
            };
            let svc_ns = namespace_of(&s.metadata);
            let is_ours = gateways
                .iter()
                .any(|g| namespace_of(&g.metadata) == gw_ns && g.name_any() == gw_name && ours(g));
            !live.contains(&key(svc_ns, &s.name_any()))
                && ((svc_ns == controller_ns && !is_current(s)) || is_ours)
        })
        .collect()
}

impl Keeper {
    pub(super) async fn clean_up(
        &mut self,
        gw: &Gateway,
        ns: &str,
        name: &str,
        slices: &[Arc<EndpointSlice>],
    ) -> Result<usize, ServiceError> {
        if !has_finalizer(gw, GATEWAY_FINALIZER) {
            return Ok(0);
        }
        let svc_name = service_name(name);
        let mut writes = self.delete_service(ns, &svc_name).await?;
        for slice in owned_slices(slices, ns, &svc_name) {
            writes += self.delete_slice(ns, &slice.name_any()).await?;
        }
        let finalizers: Vec<String> = gw
            .finalizers()
            .iter()
            .filter(|f| *f != GATEWAY_FINALIZER)
            .cloned()
            .collect();
        let api: Api<Gateway> = Api::namespaced(self.client.clone(), ns);
        writes += self
            .patch_finalizers(&api, name, gw.resource_version(), finalizers)
            .await?;
        tracing::info!(gateway = %label_value(ns, name), "Gateway cleaned up");
        Ok(writes)
    }

    pub(super) async fn delete_service(
        &mut self,
        ns: &str,
        svc_name: &str,
    ) -> Result<usize, ServiceError> {
        let svc_key = key(ns, svc_name);
        self.allocated.remove(&svc_key);
        self.patched.remove(&svc_key);
        let api: Api<Service> = Api::namespaced(self.client.clone(), ns);
        match api.delete(svc_name, &DeleteParams::default()).await {
            Ok(_) => Ok(1),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(0),
            Err(e) => Err(Self::api_err(format!("delete Service {svc_key}"))(e)),
        }
    }

    pub(super) async fn delete_slice(
        &mut self,
        ns: &str,
        name: &str,
    ) -> Result<usize, ServiceError> {
        let slice_key = key(ns, name);
        self.sliced.remove(&slice_key);
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), ns);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(1),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(0),
            Err(e) => Err(Self::api_err(format!("delete EndpointSlice {slice_key}"))(
                e,
            )),
        }
    }

    pub(super) async fn class_finalizer(
        &self,
        class: &GatewayClass,
        used: bool,
    ) -> Result<usize, ServiceError> {
        let has = has_finalizer(class, CLASS_FINALIZER);
        if has == used {
            return Ok(0);
        }
        let mut finalizers: Vec<String> = class
            .finalizers()
            .iter()
            .filter(|f| *f != CLASS_FINALIZER)
            .cloned()
            .collect();
        if used {
            finalizers.push(CLASS_FINALIZER.to_owned());
        }
        let api: Api<GatewayClass> = Api::all(self.client.clone());
        self.patch_finalizers(
            &api,
            &class.name_any(),
            class.resource_version(),
            finalizers,
        )
        .await
    }

    /// Replaces the finalizer list, guarded by the read `resourceVersion`; a conflict means the
    /// cache was stale and the next pass retries.
    pub(super) async fn patch_finalizers<K>(
        &self,
        api: &Api<K>,
        name: &str,
        resource_version: Option<String>,
        finalizers: Vec<String>,
    ) -> Result<usize, ServiceError>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let patch =
            json!({"metadata": {"finalizers": finalizers, "resourceVersion": resource_version}});
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(1),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(0),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Another writer (the status writer, say) changed the object since the cache
                // saw it. The rest of the pass goes on; the pass then counts as failed, so it
                // runs again after the retry delay instead of waiting for the next change.
                if let Ok(mut c) = self.conflicted.lock() {
                    *c = Some(name.to_owned());
                }
                Ok(0)
            }
            Err(e) => Err(Self::api_err(format!("finalizers of {name}"))(e)),
        }
    }
}
