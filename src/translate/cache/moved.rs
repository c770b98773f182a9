//! What changed, between two translations, among the objects backend resolution reads:
//! Services, EndpointSlices and ReferenceGrants. A cached route whose references name none of
//! the changed Services resolves them exactly as before, so it need not resolve them again;
//! that keeps a small change from costing a resolution per route. Pure.

use std::sync::Arc;

use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::snapshot::{or_default_namespace, Snapshot};
use crate::translate::backends::resolve::{BackendRef, SERVICE_NAME_LABEL};
use crate::translate::backends::ServiceOverlays;

/// More changed Services than this and every reference is resolved again.
const MAX_MOVED: usize = 64;

/// The objects backend resolution read in one translation (shared with its snapshot).
#[derive(Debug, Default)]
pub struct Resolvable {
    services: Vec<Arc<Service>>,
    slices: Vec<Arc<EndpointSlice>>,
    grants: Vec<Arc<ReferenceGrant>>,
    /// What TrafficPolicies put on Service ports.
    overlays: Arc<ServiceOverlays>,
}

/// The Services (namespace, name) whose resolution may differ from the previous translation:
/// a Service or an EndpointSlice of it changed. `None` means anything may differ.
pub type Moved = Option<Vec<(String, String)>>;

/// Same object, or an equal one (providers may re-create unchanged objects).
fn same<T: PartialEq>(a: &Arc<T>, b: &Arc<T>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

impl Resolvable {
    /// What `snapshot` holds of them.
    pub fn of(snapshot: &Snapshot, overlays: Arc<ServiceOverlays>) -> Self {
        Self {
            services: snapshot.services.clone(),
            slices: snapshot.endpoint_slices.clone(),
            grants: snapshot.reference_grants.clone(),
            overlays,
        }
    }

    /// What moved from `self` (the previous translation's) to `now`. Objects are compared
    /// position by position, so an object added or removed (the lists change length), or any
    /// change to a ReferenceGrant, gives `None`, as do many changes.
    pub fn moved(&self, now: &Self) -> Moved {
        let same_list = |a: &[Arc<ReferenceGrant>], b: &[Arc<ReferenceGrant>]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        };
        if !same_list(&self.grants, &now.grants)
            || self.services.len() != now.services.len()
            || self.slices.len() != now.slices.len()
        {
            return None;
        }
        let mut out = Vec::new();
        // A Service whose policy overlay changed resolves differently.
        if !Arc::ptr_eq(&self.overlays, &now.overlays) {
            let (a, b) = (&*self.overlays, &*now.overlays);
            for key in a.keys().chain(b.keys()) {
                if a.get(key) != b.get(key) {
                    out.push((key.0.clone(), key.1.clone()));
                }
            }
        }
        for (a, b) in self.services.iter().zip(&now.services) {
            if !same(a, b) {
                for s in [a, b] {
                    let ns = or_default_namespace(s.metadata.namespace.as_deref());
                    let name = s.metadata.name.clone().unwrap_or_default();
                    out.push((ns.to_owned(), name));
                }
            }
        }
        for (a, b) in self.slices.iter().zip(&now.slices) {
            if !same(a, b) {
                for e in [a, b] {
                    let ns = or_default_namespace(e.metadata.namespace.as_deref());
                    let labels = e.metadata.labels.as_ref();
                    if let Some(svc) = labels.and_then(|l| l.get(SERVICE_NAME_LABEL)) {
                        out.push((ns.to_owned(), svc.clone()));
                    }
                }
            }
            if out.len() > MAX_MOVED {
                return None;
            }
        }
        (out.len() <= MAX_MOVED).then_some(out)
    }
}

/// Whether resolving `r` of a route in `route_ns` reads one of the `moved` Services.
pub fn touches(moved: &[(String, String)], route_ns: &str, r: &BackendRef<'_>) -> bool {
    let ns = r.namespace.unwrap_or(route_ns);
    moved.iter().any(|(n, m)| n == ns && m == r.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(name: &str, port: i32) -> Arc<Service> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "a"},
                "spec": {"ports": [{"port": port}]}}))
            .unwrap(),
        )
    }

    #[test]
    fn changed_services_are_named_and_equal_copies_are_not() {
        let before = Resolvable {
            services: vec![service("s0", 80), service("s1", 80)],
            ..Default::default()
        };
        let mut now = Resolvable {
            services: vec![service("s0", 80), before.services[1].clone()],
            ..Default::default()
        };
        assert_eq!(
            before.moved(&now),
            Some(vec![]),
            "an equal copy did not move"
        );
        now.services[0] = service("s0", 81);
        let moved = before.moved(&now).unwrap();
        assert!(moved.contains(&("a".into(), "s0".into())), "{moved:?}");
        let r = BackendRef {
            from_kind: "HTTPRoute",
            group: None,
            kind: None,
            name: "s0",
            namespace: None,
            port: Some(80),
        };
        assert!(touches(&moved, "a", &r));
        assert!(!touches(&moved, "b", &r));
        now.services.pop();
        assert_eq!(before.moved(&now), None, "a removal moves everything");
    }
}
