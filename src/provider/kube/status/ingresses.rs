//! The status writer's part for Ingresses: `status.loadBalancer.ingress` of each Ingress of
//! ours (compared on every pass, as the Gateway's addresses may change while the report entry
//! does not), cleared where edgeplane wrote it once an Ingress stops being ours, and the
//! Warning Event of a new `Unsupported` message. Apart from the route statuses because an
//! Ingress's status is written by other rules (no `parents[]`, no revision).

use std::collections::HashSet;

use k8s_openapi::api::networking::v1::Ingress;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use super::memory::{ObjectKey, Write};
use super::StatusWriter;
use crate::kinds::routes::RouteKindId;
use crate::status::ingress;
use crate::status::ObjectKind;

impl StatusWriter {
    /// The write that makes Ingress `ns/name` carry `desired` as `status.loadBalancer.ingress`,
    /// if it does not already. Compared on every pass (the Gateway's addresses may change
    /// while the Ingress's entry does not); a write the cache has not shown yet is not repeated.
    /// A new `unsupported` message is recorded as a Warning Event once.
    pub(super) fn plan_ingress(
        &mut self,
        key: ObjectKey,
        ns: &str,
        name: &str,
        desired: Vec<Value>,
        unsupported: Option<String>,
    ) -> Option<Write> {
        let o = self
            .stores
            .find::<Ingress>()?
            .get(&ObjectRef::new(name).within(ns))?;
        match unsupported {
            Some(note) if self.ingress_events.get(&key) != Some(&note) => {
                self.ingress_events.insert(key.clone(), note.clone());
                self.pending_events.push((o.object_ref(&()), note));
            }
            Some(_) => {}
            None => {
                self.ingress_events.remove(&key);
            }
        }
        let current = o.status.as_ref().and_then(|s| s.load_balancer.as_ref());
        let current = current.and_then(|l| serde_json::to_value(&l.ingress).ok());
        let version = o.resource_version();
        if !desired.is_empty() {
            self.ingress_written.insert(key.clone(), desired.clone());
        }
        let Some(patch) = ingress::patch(current.as_ref(), desired) else {
            self.memory.matched(key, version, None);
            return None;
        };
        if self
            .memory
            .already_written(&key, &version, None, patch.status())
        {
            return None;
        }
        Some(Write {
            reference: o.object_ref(&()),
            key,
            revision: None,
            version,
            patch,
        })
    }

    /// The writes that clear `status.loadBalancer.ingress` of the Ingresses not in the report
    /// (not ours, or no more) where it holds what edgeplane wrote ([`ingress::written_by_us`]).
    pub(super) fn release_ingresses(
        &mut self,
        reported: &HashSet<ObjectKey>,
        ours: &ingress::GatewayAddresses,
    ) -> Vec<Write> {
        let Some(store) = self.stores.find::<Ingress>() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for o in store.state() {
            let key = ObjectKey {
                kind: ObjectKind::Route(RouteKindId::Ingress),
                namespace: o.namespace(),
                name: o.name_any(),
            };
            if reported.contains(&key) {
                continue;
            }
            let current = o.status.as_ref().and_then(|s| s.load_balancer.as_ref());
            let current = current
                .and_then(|l| serde_json::to_value(&l.ingress).ok())
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default();
            if !ingress::written_by_us(&current, self.ingress_written.get(&key), ours) {
                continue;
            }
            let version = o.resource_version();
            let Some(patch) = ingress::patch(Some(&Value::from(current)), Vec::new()) else {
                continue;
            };
            if self
                .memory
                .already_written(&key, &version, None, patch.status())
            {
                continue;
            }
            out.push(Write {
                reference: o.object_ref(&()),
                key,
                revision: None,
                version,
                patch,
            });
        }
        out
    }
}
