//! Identical route statuses held once. Most routes of a Gateway carry the same status: the
//! same parentRef, the same conditions (Accepted, ResolvedRefs), the same generation and the
//! same transition time when one translation computed them. A route status is a few hundred
//! bytes of strings (four per condition), so each distinct one is kept once and shared by
//! every route that carries it. Pure.

use std::collections::hash_map::Entry;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use crate::kinds::httproute::HttpRouteStatus;
use foldhash::HashMap;

/// The distinct route statuses that routes hold, by a digest of their content.
#[derive(Debug, Default)]
pub struct StatusPool {
    by_digest: HashMap<u64, Arc<HttpRouteStatus>>,
}

impl StatusPool {
    /// The pool's copy of `status` when it holds an equal one, else `status`, kept for the
    /// next route. Sharing is invisible to readers: statuses are immutable once built, and one
    /// that is changed later (its transition times carried over) is copied on write.
    pub fn share(&mut self, status: Arc<HttpRouteStatus>) -> Arc<HttpRouteStatus> {
        match self.by_digest.entry(digest(&status)) {
            Entry::Occupied(held) if **held.get() == *status => held.get().clone(),
            // Another status with the same digest: kept apart, not shared.
            Entry::Occupied(_) => status,
            Entry::Vacant(slot) => slot.insert(status).clone(),
        }
    }

    /// Forgets the statuses no route holds any more.
    pub fn prune(&mut self) {
        self.by_digest.retain(|_, s| Arc::strong_count(s) > 1);
    }

    /// Number of distinct statuses held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_digest.len()
    }
}

/// Hashes every field [`PartialEq`] compares, so equal statuses have equal digests.
fn digest(status: &HttpRouteStatus) -> u64 {
    let mut h = foldhash::fast::FixedState::default().build_hasher();
    status.parents.len().hash(&mut h);
    for p in &status.parents {
        p.controller_name.hash(&mut h);
        let r = &p.parent_ref;
        (
            &r.group,
            &r.kind,
            &r.name,
            &r.namespace,
            r.port,
            &r.section_name,
        )
            .hash(&mut h);
        p.conditions.len().hash(&mut h);
        for c in &p.conditions {
            (&c.type_, &c.status, &c.reason, &c.message).hash(&mut h);
            (c.observed_generation, c.last_transition_time.0).hash(&mut h);
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::httproute::{HttpRouteStatusParents, HttpRouteStatusParentsParentRef};
    use crate::status::conditions::{ConditionType, Reason, Stamp};

    fn status(gateway: &str, generation: i64, reason: Reason) -> Arc<HttpRouteStatus> {
        let stamp = Stamp {
            generation: Some(generation),
            now: jiff::Timestamp::from_second(1_700_000_000).unwrap(),
        };
        Arc::new(HttpRouteStatus {
            parents: vec![HttpRouteStatusParents {
                conditions: vec![
                    stamp.ok(ConditionType::Accepted, Reason::Accepted, "accepted"),
                    stamp.ok(ConditionType::ResolvedRefs, reason, "resolved"),
                ],
                controller_name: "example.com/gateway".into(),
                parent_ref: HttpRouteStatusParentsParentRef {
                    name: gateway.into(),
                    ..Default::default()
                },
            }],
        })
    }

    #[test]
    fn equal_statuses_are_one_and_different_ones_stay_apart() {
        let mut pool = StatusPool::default();
        let first = pool.share(status("gw", 1, Reason::ResolvedRefs));
        let same = pool.share(status("gw", 1, Reason::ResolvedRefs));
        assert!(Arc::ptr_eq(&first, &same));
        for other in [
            status("other", 1, Reason::ResolvedRefs),
            status("gw", 2, Reason::ResolvedRefs),
            status("gw", 1, Reason::BackendNotFound),
        ] {
            let kept = pool.share(other.clone());
            assert!(!Arc::ptr_eq(&kept, &first));
            assert_eq!(kept, other);
        }
        assert_eq!(pool.len(), 4);
    }

    #[test]
    fn statuses_no_route_holds_are_forgotten() {
        let mut pool = StatusPool::default();
        let held = pool.share(status("gw", 1, Reason::ResolvedRefs));
        drop(pool.share(status("gw", 2, Reason::ResolvedRefs)));
        pool.prune();
        assert_eq!(pool.len(), 1);
        assert!(Arc::ptr_eq(
            &pool.share(status("gw", 1, Reason::ResolvedRefs)),
            &held
        ));
    }
}
