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
use crate::translate::common::changed::changed_middle;

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
/// a Service or an EndpointSlice of it changed, was added or removed. `None` means anything
/// may differ.
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

    /// What moved from `self` (the previous translation's) to `now`. The Service and
    /// EndpointSlice lists are compared from both ends, so an object added or removed moves
    /// only its own Service (as a provider's store keeps the others in place); within a middle
    /// that kept its length, object by object. Any change to a ReferenceGrant, or many
    /// changes, give `None`.
    pub fn moved(&self, now: &Self) -> Option<Changes> {
        let same_list = |a: &[Arc<ReferenceGrant>], b: &[Arc<ReferenceGrant>]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        };
        if !same_list(&self.grants, &now.grants) {
            return None;
        }
        let mut out = Changes::default();
        // A Service whose policy overlay changed resolves differently.
        if !Arc::ptr_eq(&self.overlays, &now.overlays) {
            let (a, b) = (&*self.overlays, &*now.overlays);
            for key in a.keys().chain(b.keys()) {
                if a.get(key) != b.get(key) {
                    out.moved.push((key.0.clone(), key.1.clone()));
                }
            }
        }
        let service = |s: &Service| {
            let ns = or_default_namespace(s.metadata.namespace.as_deref());
            Some((ns.to_owned(), s.metadata.name.clone().unwrap_or_default()))
        };
        let (before, after) = middles(&self.services, &now.services)?;
        let kept: Vec<_> = after.iter().filter_map(|s| service(s)).collect();
        for s in before.iter().filter_map(|s| service(s)) {
            if !kept.contains(&s) {
                out.removed.push(s.clone());
            }
            out.moved.push(s);
        }
        out.moved.extend(kept);
        let (before, after) = middles(&self.slices, &now.slices)?;
        out.moved
            .extend(before.iter().chain(&after).filter_map(|e| service_of(e)));
        (out.moved.len() <= MAX_MOVED).then_some(out)
    }
}

/// What moved between two translations ([`Resolvable::moved`]).
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    /// The Services whose resolution may differ.
    pub moved: Vec<(String, String)>,
    /// Services of the previous translation that are gone (no Service of their name took
    /// their place): the ports resolved from them are not kept.
    pub removed: Vec<(String, String)>,
}

/// The objects of `old` and of `now` that differ, when there are at most [`MAX_MOVED`]: the
/// changed middle of the two lists, or, where it kept its length, the objects that differ
/// position by position in it.
#[allow(clippy::type_complexity)]
fn middles<'a, T: PartialEq>(
    old: &'a [Arc<T>],
    now: &'a [Arc<T>],
) -> Option<(Vec<&'a Arc<T>>, Vec<&'a Arc<T>>)> {
    let (start, old_end, new_end) = changed_middle(old, now, same);
    let (old, now) = (&old[start..old_end], &now[start..new_end]);
    let (before, after): (Vec<_>, Vec<_>) = if old.len() == now.len() {
        old.iter().zip(now).filter(|(a, b)| !same(a, b)).unzip()
    } else {
        (old.iter().collect(), now.iter().collect())
    };
    (before.len() + after.len() <= 2 * MAX_MOVED).then_some((before, after))
}

/// The Service (namespace, name) an EndpointSlice belongs to.
fn service_of(e: &EndpointSlice) -> Option<(String, String)> {
    let ns = or_default_namespace(e.metadata.namespace.as_deref());
    let labels = e.metadata.labels.as_ref();
    let svc = labels.and_then(|l| l.get(SERVICE_NAME_LABEL))?;
    Some((ns.to_owned(), svc.clone()))
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
            Some(Changes::default()),
            "an equal copy did not move"
        );
        now.services[0] = service("s0", 81);
        let moved = before.moved(&now).unwrap().moved;
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
    }

    /// An object added or removed moves its own Service only; a removed Service is named as
    /// possibly gone.
    #[test]
    fn added_and_removed_objects_move_their_own_service() {
        let names = |c: &Changes| c.moved.iter().map(|(_, n)| n.clone()).collect::<Vec<_>>();
        let before = Resolvable {
            services: (0..5).map(|i| service(&format!("s{i}"), 80)).collect(),
            ..Default::default()
        };
        let mut now = Resolvable {
            services: before.services.clone(),
            ..Default::default()
        };
        now.services.remove(2);
        let changes = before.moved(&now).unwrap();
        assert_eq!(names(&changes), ["s2"]);
        assert_eq!(changes.removed, [("a".to_owned(), "s2".to_owned())]);
        now.services.insert(1, service("new", 80));
        let changes = before.moved(&now).unwrap();
        assert_eq!(names(&changes), ["s1", "s2", "new", "s1"]);
        assert_eq!(changes.removed, [("a".to_owned(), "s2".to_owned())]);
        let slice = |name: &str, service: &str| {
            Arc::new(
                serde_json::from_value::<EndpointSlice>(json!({"metadata": {"name": name,
                    "namespace": "a", "labels": {"kubernetes.io/service-name": service}},
                    "addressType": "IPv4", "endpoints": []}))
                .unwrap(),
            )
        };
        let before = Resolvable {
            slices: vec![slice("e0", "s0"), slice("e1", "s1")],
            ..Default::default()
        };
        let mut now = Resolvable {
            slices: before.slices.clone(),
            ..Default::default()
        };
        now.slices.push(slice("e2", "s2"));
        let changes = before.moved(&now).unwrap();
        assert_eq!(
            (names(&changes), changes.removed),
            (vec!["s2".into()], vec![])
        );
        // Many changes: everything may have moved.
        now.slices = (0..2 * MAX_MOVED)
            .map(|i| slice(&format!("e{i}"), &format!("x{i}")))
            .collect();
        assert_eq!(before.moved(&now), None);
    }
}
