//! HTTPRoute (and lowered GRPCRoute) attachment: which listeners each `parentRef` selects (sectionName, port), whether
//! they allow the route (namespaces, kinds, hostnames), and the route's `parents[]` status. Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use gateway_api::apis::experimental::httproutes::{
    HttpRoute, HttpRouteParentRefs, HttpRouteStatus, HttpRouteStatusParents,
    HttpRouteStatusParentsParentRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::snapshot::namespace_of;
use crate::translate::conditions::*;
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::gateways::listener::intersect_hostnames;
use crate::translate::routes::parents::GatewayIndex;
use crate::translate::routes::rules::CompiledRoute;
use crate::translate::TranslateOptions;

/// A route accepted on a valid listener of an accepted Gateway: it goes into the table.
#[derive(Debug, Clone)]
pub struct Attachment {
    pub gateway: usize,
    pub listener: usize,
    /// Effective hostnames (route and listener hostnames intersected).
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
    pub status: Option<Arc<HttpRouteStatus>>,
    /// The attachments that go into the table.
    pub attachments: Vec<Attachment>,
    /// `(gateway, listener)` indexes of the listeners whose `attachedRoutes` count the route.
    pub counted: Vec<(usize, usize)>,
}

/// Attaches one route to the Gateways its parentRefs name: its status, its attachments, and
/// the listeners that count it in `attachedRoutes`. Reads the Gateways, changes none of them.
pub fn attach_route(
    route: &HttpRoute,
    compiled: &CompiledRoute,
    gateways: &[GatewayModel<'_>],
    by_name: &GatewayIndex<'_>,
    labels: &BTreeMap<String, String>,
    options: &TranslateOptions,
) -> Attached {
    let route_ns = namespace_of(&route.metadata);
    let mut counted = Vec::new();
    let hostnames = route.spec.hostnames.as_deref().unwrap_or_default();
    let stamp = Stamp {
        generation: route.metadata.generation,
        now: options.now,
    };
    let mut parents = Vec::new();
    let mut attachments = Vec::new();
    for parent in route.spec.parent_refs.iter().flatten() {
        let gw_ns = parent.namespace.as_deref().unwrap_or(route_ns);
        let Some(target) = by_name.parent(
            parent.group.as_deref(),
            parent.kind.as_deref(),
            gw_ns,
            &parent.name,
        ) else {
            continue;
        };
        let gi = target.gateway;
        let gateway = &gateways[gi];
        let gateway_accepted = gateway.accepted();
        let result = select_listeners(
            parent,
            gateway,
            target.set,
            route_ns,
            hostnames,
            labels,
            compiled.kind,
        );
        let accepted = match result {
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
                if compiled.all_invalid() {
                    stamp.fail(
                        ConditionType::Accepted,
                        Reason::UnsupportedValue,
                        compiled.invalid.join("; "),
                    )
                } else {
                    stamp.ok(ConditionType::Accepted, Reason::Accepted, "accepted")
                }
            }
            Err(e) => stamp.fail(ConditionType::Accepted, e.reason(), e.to_string()),
        };
        let mut conditions = vec![accepted, resolved_refs(compiled, &stamp)];
        if !compiled.invalid.is_empty() && !compiled.all_invalid() {
            conditions.push(stamp.ok(
                ConditionType::PartiallyInvalid,
                Reason::UnsupportedValue,
                compiled.invalid.join("; "),
            ));
        }
        parents.push(HttpRouteStatusParents {
            conditions,
            controller_name: options.controller_name.clone(),
            parent_ref: HttpRouteStatusParentsParentRef {
                group: parent.group.clone(),
                kind: parent.kind.clone(),
                name: parent.name.clone(),
                namespace: parent.namespace.clone(),
                port: parent.port,
                section_name: parent.section_name.clone(),
            },
        });
    }
    // Kept per route until it changes: no spare capacity.
    parents.shrink_to_fit();
    attachments.shrink_to_fit();
    counted.shrink_to_fit();
    Attached {
        status: (!parents.is_empty()).then(|| Arc::new(HttpRouteStatus { parents })),
        attachments,
        counted,
    }
}

fn resolved_refs(compiled: &CompiledRoute, stamp: &Stamp) -> Condition {
    match &compiled.unresolved {
        None => stamp.ok(
            ConditionType::ResolvedRefs,
            Reason::ResolvedRefs,
            "resolved",
        ),
        Some(e) => stamp.fail(ConditionType::ResolvedRefs, e.reason(), e.to_string()),
    }
}

/// The listeners a parentRef attaches to, with the effective hostnames on each; or why none.
/// The most telling failure wins: no selected listener, then none allowing the route, then
/// none with an intersecting hostname.
#[allow(clippy::too_many_arguments)]
fn select_listeners(
    parent: &HttpRouteParentRefs,
    gateway: &GatewayModel<'_>,
    set: Option<usize>,
    route_ns: &str,
    hostnames: &[String],
    labels: &BTreeMap<String, String>,
    kind: &str,
) -> Result<Vec<(usize, Vec<String>)>, AttachError> {
    let selected: Vec<usize> = gateway
        .listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.set() == set
                && parent
                    .section_name
                    .as_deref()
                    .is_none_or(|s| s == l.spec.name)
                && parent.port.is_none_or(|p| p == l.spec.port)
        })
        .map(|(i, _)| i)
        .collect();
    if selected.is_empty() {
        return Err(AttachError::NoMatchingParent);
    }
    let allowed: Vec<usize> = selected
        .into_iter()
        .filter(|&i| {
            let l = &gateway.listeners[i];
            l.accepts(kind) && l.allows_namespace(gateway.namespace, route_ns, labels)
        })
        .collect();
    if allowed.is_empty() {
        return Err(AttachError::NotAllowedByListeners);
    }
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
