//! Attachment, once for every route kind: which listeners each `parentRef` of a route selects
//! (sectionName, port), whether they allow the route (kind, namespace, hostnames), and the
//! route's `parents[]` status, for any [`RouteKind`]. What differs between kinds comes in as
//! data: the kind listeners must allow, and the outcome of compiling the route's rules. Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::kinds::httproute::HttpRouteStatusParents;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::kinds::routes::{ParentRef, RouteKind, RouteKindId, RouteStatus};
use crate::snapshot::namespace_of;
use crate::translate::conditions::{ConditionType, Reason, Stamp};
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::gateways::listener::intersect_hostnames;
use crate::translate::routes::parents::GatewayIndex;
use crate::translate::TranslateOptions;

/// A route accepted on a valid listener of an accepted Gateway: it goes into the table.
#[derive(Debug, Clone)]
pub struct Attachment {
    pub gateway: usize,
    pub listener: usize,
    /// Effective hostnames (route and listener hostnames intersected; `*` for kinds without
    /// hostnames).
    pub hostnames: Vec<String>,
    /// Index of the route status `parents[]` entry of the parentRef that selected the listener.
    pub parent: usize,
}

/// Why a parentRef does not attach; each is an `Accepted` False reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    #[error("no listener matches the parentRef's sectionName and port")]
    NoMatchingParent,
    #[error("the route's namespace or kind is not allowed by the selected listeners")]
    NotAllowedByListeners,
    #[error("no hostname of the route intersects the selected listeners' hostnames")]
    NoMatchingListenerHostname,
}

impl AttachError {
    /// The spec's reason.
    pub fn reason(&self) -> Reason {
        match self {
            Self::NoMatchingParent => Reason::NoMatchingParent,
            Self::NotAllowedByListeners => Reason::NotAllowedByListeners,
            Self::NoMatchingListenerHostname => Reason::NoMatchingListenerHostname,
        }
    }
}

/// Where one route attached and what its status says.
#[derive(Debug, Clone)]
pub struct Attached {
    /// Its status; None when no parentRef names one of our Gateways.
    pub status: Option<Arc<RouteStatus>>,
    /// The attachments that go into the table.
    pub attachments: Vec<Attachment>,
    /// `(gateway, listener)` indexes of the listeners whose `attachedRoutes` count the route.
    pub counted: Vec<(usize, usize)>,
}

/// What the compilation of a route's rules says in each `parents[]` entry, and what
/// attachment asks of a Gateway: the part of attachment that differs between route kinds.
#[derive(Debug)]
pub struct RuleOutcome<'c> {
    /// The kind listeners must allow (a GRPCRoute attached in its lowered HTTPRoute form is
    /// still a GRPCRoute).
    pub kind: RouteKindId,
    /// Messages of invalid rules (`Accepted` False when every rule is, else
    /// `PartiallyInvalid`).
    pub invalid: &'c [String],
    /// True when every rule is invalid.
    pub all_invalid: bool,
    /// The first unresolved backendRef, as `(reason, message)`.
    pub unresolved: Option<(Reason, String)>,
    /// True when the table takes attachments only on accepted Gateways (HTTP kinds); L4
    /// kinds attach to the valid listeners of any Gateway that has them.
    pub needs_accepted_gateway: bool,
}

/// Attaches one route of any kind to the Gateways its parentRefs name: its status, its
/// attachments, and the listeners that count it in `attachedRoutes`. Reads the Gateways,
/// changes none of them.
pub fn attach<K: RouteKind>(
    route: &K,
    outcome: &RuleOutcome<'_>,
    gateways: &[GatewayModel<'_>],
    by_name: &GatewayIndex<'_>,
    labels: &BTreeMap<String, String>,
    options: &TranslateOptions,
) -> Attached {
    let meta = route.meta();
    let route_ns = namespace_of(meta);
    // Most parentRefs name one listener each: sized for that, nothing to shrink below.
    let refs = route.parent_refs().count();
    let mut counted = Vec::with_capacity(refs);
    let hostnames = route.hostnames();
    let stamp = Stamp {
        generation: meta.generation,
        now: options.now,
    };
    let mut parents = Vec::with_capacity(refs);
    let mut attachments = Vec::with_capacity(refs);
    for parent in route.parent_refs() {
        let gw_ns = parent.namespace.unwrap_or(route_ns);
        let Some(target) = by_name.parent(parent.group, parent.kind, gw_ns, parent.name) else {
            continue;
        };
        let gi = target.gateway;
        let gateway = &gateways[gi];
        let gateway_accepted = !outcome.needs_accepted_gateway || gateway.accepted();
        let selection = Selection {
            parent: &parent,
            set: target.set,
            route_ns,
            hostnames,
            labels,
            kind: outcome.kind,
        };
        let accepted = match selection.select(gateway) {
            Ok(selected) => {
                for (li, effective) in selected {
                    let listener = &gateway.listeners[li];
                    if !counted.contains(&(gi, li)) {
                        counted.push((gi, li));
                    }
                    if gateway_accepted && listener.valid() {
                        attachments.push(Attachment {
                            gateway: gi,
                            listener: li,
                            hostnames: effective,
                            parent: parents.len(),
                        });
                    }
                }
                if outcome.all_invalid {
                    stamp.fail(
                        ConditionType::Accepted,
                        Reason::UnsupportedValue,
                        outcome.invalid.join("; "),
                    )
                } else {
                    stamp.ok(ConditionType::Accepted, Reason::Accepted, "accepted")
                }
            }
            Err(e) => stamp.fail(ConditionType::Accepted, e.reason(), e.to_string()),
        };
        let mut conditions = vec![accepted, resolved_refs(outcome, &stamp)];
        if !outcome.invalid.is_empty() && !outcome.all_invalid {
            conditions.push(stamp.ok(
                ConditionType::PartiallyInvalid,
                Reason::UnsupportedValue,
                outcome.invalid.join("; "),
            ));
        }
        parents.push(HttpRouteStatusParents {
            conditions,
            controller_name: options.controller_name.clone(),
            parent_ref: parent.to_status(),
        });
    }
    // Kept per route until it changes: no spare capacity.
    parents.shrink_to_fit();
    attachments.shrink_to_fit();
    counted.shrink_to_fit();
    Attached {
        status: (!parents.is_empty()).then(|| Arc::new(RouteStatus { parents })),
        attachments,
        counted,
    }
}

fn resolved_refs(outcome: &RuleOutcome<'_>, stamp: &Stamp) -> Condition {
    match &outcome.unresolved {
        None => stamp.ok(
            ConditionType::ResolvedRefs,
            Reason::ResolvedRefs,
            "resolved",
        ),
        Some((reason, message)) => {
            stamp.fail(ConditionType::ResolvedRefs, *reason, message.clone())
        }
    }
}

/// One parentRef of a route, and what of the route decides which listeners it selects.
struct Selection<'a> {
    parent: &'a ParentRef<'a>,
    /// The ListenerSet the parentRef names, if it names one.
    set: Option<usize>,
    route_ns: &'a str,
    /// `None`: a kind without hostnames, on every hostname of a listener (`*`).
    hostnames: Option<&'a [String]>,
    labels: &'a BTreeMap<String, String>,
    kind: RouteKindId,
}

impl Selection<'_> {
    /// The listeners the parentRef attaches to, with the effective hostnames on each; or why
    /// none. The most telling failure wins: no selected listener, then none allowing the
    /// route, then none with an intersecting hostname.
    fn select(&self, gateway: &GatewayModel<'_>) -> Result<Vec<(usize, Vec<String>)>, AttachError> {
        let parent = self.parent;
        let selected: Vec<usize> = gateway
            .listeners_of(self.set)
            .filter(|&i| {
                let l = &gateway.listeners[i];
                parent.section_name.is_none_or(|s| s == l.spec.name)
                    && parent.port.is_none_or(|p| p == l.spec.port)
            })
            .collect();
        if selected.is_empty() {
            return Err(AttachError::NoMatchingParent);
        }
        let kind = self.kind.as_str();
        let allowed: Vec<usize> = selected
            .into_iter()
            .filter(|&i| {
                let l = &gateway.listeners[i];
                l.accepts(kind) && l.allows_namespace(gateway.namespace, self.route_ns, self.labels)
            })
            .collect();
        if allowed.is_empty() {
            return Err(AttachError::NotAllowedByListeners);
        }
        let Some(hostnames) = self.hostnames else {
            return Ok(allowed
                .into_iter()
                .map(|i| (i, vec!["*".to_owned()]))
                .collect());
        };
        let matched: Vec<(usize, Vec<String>)> = allowed
            .into_iter()
            .filter_map(|i| {
                let h = intersect_hostnames(gateway.listeners[i].hostname, hostnames);
                (!h.is_empty()).then_some((i, h))
            })
            .collect();
        if matched.is_empty() {
            return Err(AttachError::NoMatchingListenerHostname);
        }
        Ok(matched)
    }
}
