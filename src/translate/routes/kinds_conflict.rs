//! HTTPRoute and GRPCRoute on one listener: the GRPCRoute spec lets only one of two routes of
//! the two kinds serve a listener when their hostnames intersect: the oldest by creation
//! timestamp, then the first by `{namespace}/{name}`; the other is not accepted on that
//! listener. Applied after attachment, over every route's attachments, so the per-route
//! memory of incremental translation is untouched (a route's outcome here depends on other
//! routes). Pure.
//!
//! A reused route status carries the transition times of the translation that computed it,
//! which holds only while its published conditions did not change since; this pass changes
//! them. So the status of every route that loses a listener now, or lost one in the previous
//! translation, is stamped with this translation's time throughout: sealing then carries the
//! previous publication's time over every condition that did not change, exactly as after a
//! full translation.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::kinds::routes::RouteKindId;
use crate::translate::conditions::{ConditionType, Reason, Stamp};
use crate::translate::routes::attach::Attached;
use crate::translate::routes::rules::CompiledRoute;
use crate::translate::TranslateOptions;

/// One route of the translation and where it attached.
#[derive(Debug)]
pub struct Counted<'a> {
    pub kind: RouteKindId,
    pub namespace: &'a str,
    pub name: &'a str,
    pub generation: Option<i64>,
    /// Creation time ([`crate::translate::common::precedence::created`]).
    pub created: i64,
    pub attached: Arc<Attached>,
}

impl Counted<'_> {
    /// The spec's order between conflicting routes ([`crate::translate::common::precedence`]).
    fn order(&self) -> crate::translate::common::precedence::Precedence<'_> {
        (self.created, self.namespace, self.name)
    }
}

use crate::table::hostname::overlap;

/// A route (its index) attached to one listener, with its hostnames there.
type OnListener<'a> = (usize, Vec<&'a str>);

/// `(kind, namespace, name)` of the routes that lost a listener in one translation.
pub type Losers = HashSet<(RouteKindId, String, String)>;

/// Takes every listener away from the route that loses it to an older route of the other kind
/// with an intersecting hostname; a parentRef left with no listener gets `Accepted` False.
/// `compiled` is parallel to `counted` and receives the same attachments. `before` are the
/// losers of the previous translation; returns this one's.
pub fn resolve(
    counted: &mut [Counted<'_>],
    compiled: &mut [(Arc<Attached>, Arc<CompiledRoute>)],
    options: &TranslateOptions,
    before: &Losers,
) -> Losers {
    let has_grpc = counted
        .iter()
        .any(|c| c.kind == RouteKindId::GrpcRoute && !c.attached.attachments.is_empty());
    if !has_grpc && before.is_empty() {
        return Losers::new();
    }
    let listeners = shared_listeners(counted);
    let lost = lost_on(counted, listeners);
    withdraw(counted, compiled, &lost, options);
    let losers: Losers = lost
        .iter()
        .map(|&(r, ..)| {
            let c = &counted[r];
            (c.kind, c.namespace.to_owned(), c.name.to_owned())
        })
        .collect();
    if losers.is_empty() && before.is_empty() {
        return losers;
    }
    for (r, c) in counted.iter_mut().enumerate() {
        let key = (c.kind, c.namespace.to_owned(), c.name.to_owned());
        if !(losers.contains(&key) || before.contains(&key)) {
            continue;
        }
        let mut attached = (*c.attached).clone();
        if let Some(status) = &mut attached.status {
            for p in &mut Arc::make_mut(status).parents {
                for condition in &mut p.conditions {
                    condition.last_transition_time = Time(options.now);
                }
            }
        }
        let attached = Arc::new(attached);
        c.attached = attached.clone();
        compiled[r].0 = attached;
    }
    losers
}

/// The listeners where a route of each kind may meet: those with a GRPCRoute attached, each
/// with its routes (index in `counted`) and their hostnames there.
fn shared_listeners<'a>(
    counted: &'a [Counted<'_>],
) -> BTreeMap<(usize, usize), Vec<OnListener<'a>>> {
    // Only listeners with a GRPCRoute can have a conflict.
    let with_grpc: HashSet<(usize, usize)> = counted
        .iter()
        .filter(|c| c.kind == RouteKindId::GrpcRoute)
        .flat_map(|c| {
            c.attached
                .attachments
                .iter()
                .map(|a| (a.gateway, a.listener))
        })
        .collect();
    let mut listeners: BTreeMap<(usize, usize), Vec<OnListener<'a>>> = BTreeMap::new();
    for (i, c) in counted.iter().enumerate() {
        for a in &c.attached.attachments {
            if !with_grpc.contains(&(a.gateway, a.listener)) {
                continue;
            }
            let routes = listeners.entry((a.gateway, a.listener)).or_default();
            let hosts = a.hostnames.iter().map(String::as_str);
            // A route's attachments are visited together: its entry, if any, is the last.
            match routes.last_mut().filter(|(r, _)| *r == i) {
                Some((_, h)) => h.extend(hosts),
                None => routes.push((i, hosts.collect())),
            }
        }
    }
    listeners
}

/// `(route, gateway, listener, winner)` of each route that loses a listener in `listeners`
/// to an older route of the other kind with an intersecting hostname.
fn lost_on(
    counted: &[Counted<'_>],
    listeners: BTreeMap<(usize, usize), Vec<OnListener<'_>>>,
) -> Vec<(usize, usize, usize, usize)> {
    let mut lost: Vec<(usize, usize, usize, usize)> = Vec::new();
    for ((gi, li), mut routes) in listeners {
        if routes
            .iter()
            .all(|(r, _)| counted[*r].kind == RouteKindId::GrpcRoute)
        {
            continue;
        }
        routes.sort_by(|(a, _), (b, _)| counted[*a].order().cmp(&counted[*b].order()));
        // Accepted routes so far, HTTPRoutes and GRPCRoutes apart: a route is checked against
        // the other kind's only.
        let mut kept: [Vec<(usize, &Vec<&str>)>; 2] = [Vec::new(), Vec::new()];
        for (r, hosts) in &routes {
            let grpc = usize::from(counted[*r].kind == RouteKindId::GrpcRoute);
            let winner = kept[1 - grpc]
                .iter()
                .find(|(_, khosts)| khosts.iter().any(|a| hosts.iter().any(|b| overlap(a, b))));
            match winner {
                Some(&(k, _)) => lost.push((*r, gi, li, k)),
                None => kept[grpc].push((*r, hosts)),
            }
        }
    }
    lost
}

/// Takes each lost listener away from its route (in `counted` and `compiled`), and sets
/// `Accepted` False (`Conflicted`) on the parentRefs left with no listener.
fn withdraw(
    counted: &mut [Counted<'_>],
    compiled: &mut [(Arc<Attached>, Arc<CompiledRoute>)],
    lost: &[(usize, usize, usize, usize)],
    options: &TranslateOptions,
) {
    for &(r, gi, li, winner) in lost {
        let mut attached = (*counted[r].attached).clone();
        let before: Vec<usize> = attached.attachments.iter().map(|a| a.parent).collect();
        attached
            .attachments
            .retain(|a| (a.gateway, a.listener) != (gi, li));
        attached.counted.retain(|&l| l != (gi, li));
        let w = &counted[winner];
        let message = format!(
            "listener serves {} {}/{} on an intersecting hostname; of the two kinds the older route (then the first by namespace/name) is accepted",
            w.kind, w.namespace, w.name
        );
        let stamp = Stamp {
            generation: counted[r].generation,
            now: options.now,
        };
        if let Some(status) = &mut attached.status {
            let status = Arc::make_mut(status);
            for parent in before {
                if attached.attachments.iter().any(|a| a.parent == parent) {
                    continue;
                }
                let Some(p) = status.parents.get_mut(parent) else {
                    continue;
                };
                for c in &mut p.conditions {
                    if c.type_ == ConditionType::Accepted {
                        *c = stamp.fail(
                            ConditionType::Accepted,
                            Reason::Conflicted,
                            message.clone(),
                        );
                    }
                }
            }
        }
        let attached = Arc::new(attached);
        counted[r].attached = attached.clone();
        compiled[r].0 = attached;
    }
}

#[cfg(test)]
mod tests {
    use super::overlap;

    #[test]
    fn hostnames_overlap_by_wildcards() {
        assert!(overlap("a.com", "a.com"));
        assert!(overlap("*", "a.com"));
        assert!(overlap("*.a.com", "x.a.com"));
        assert!(overlap("x.a.com", "*.a.com"));
        assert!(overlap("*.a.com", "*.x.a.com"));
        assert!(!overlap("*.a.com", "a.com"));
        assert!(!overlap("a.com", "b.com"));
    }
}
