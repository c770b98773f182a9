//! TLSRoute, TCPRoute and UDPRoute: attachment to TLS, TCP and UDP listeners (sectionName,
//! port, allowed kinds and namespaces, and for TLSRoutes hostname intersection), backend
//! resolution into one weighted set per route, and each route's `parents[]` status. L4 routes
//! are compiled in full on every translation. Pure.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::Arc;

use gateway_api::apis::experimental::httproutes::{
    HttpRouteStatus, HttpRouteStatusParents, HttpRouteStatusParentsParentRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::snapshot::{namespace_of, Snapshot};
use crate::status::{ObjectKind, ObjectStatus, StatusBody, StatusReport, GATEWAY_GROUP};
use crate::table::{BackendSet, BackendTarget, L4Route, RouteRef, RuleFilters, WeightedBackend};
use crate::translate::backends::resolve::{BackendRef, Backends};
use crate::translate::common::refgrant::RefSide;
use crate::translate::conditions::*;
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::gateways::listener::intersect_hostnames;
use crate::translate::routes::httproute::{AttachError, Attachment};
use crate::translate::routes::parents::GatewayIndex;
use crate::translate::TranslateOptions;

/// A parentRef of any L4 route kind, borrowed.
struct Parent<'a> {
    group: Option<&'a str>,
    kind: Option<&'a str>,
    name: &'a str,
    namespace: Option<&'a str>,
    port: Option<i32>,
    section_name: Option<&'a str>,
}

/// A backendRef of any L4 route kind, borrowed, with its weight.
struct Backend<'a> {
    reference: BackendRef<'a>,
    weight: Option<i32>,
}

/// One route of an L4 kind, as the rules read it.
struct View<'a> {
    kind: ObjectKind,
    meta: &'a ObjectMeta,
    /// TLSRoutes only; empty: every hostname of the listener.
    hostnames: &'a [String],
    parents: Vec<Parent<'a>>,
    backends: Vec<Backend<'a>>,
}

/// An L4 route accepted on at least one valid listener: what goes into the table.
#[derive(Debug)]
pub struct L4Attached {
    /// Creation time in seconds, then `namespace/name`: older routes win a hostname or a
    /// listener that several routes claim.
    pub created: i64,
    pub route: L4Route,
    pub attachments: Vec<Attachment>,
}

/// Every L4 route of the snapshot naming one of our Gateways: statuses go into `report`,
/// counted listeners into the Gateways' `attached`, and the attached routes are returned in
/// precedence order (oldest first, then `namespace/name`).
pub fn attach_l4_routes<'s>(
    snapshot: &'s Snapshot,
    gateways: &mut [GatewayModel<'s>],
    by_name: &GatewayIndex<'_>,
    labels: &HashMap<&str, BTreeMap<String, String>>,
    options: &TranslateOptions,
    report: &mut StatusReport,
) -> Vec<L4Attached> {
    let mut views = Vec::new();
    for r in &snapshot.tls_routes {
        views.push(View {
            kind: ObjectKind::TlsRoute,
            meta: &r.metadata,
            hostnames: &r.spec.hostnames,
            parents: r
                .spec
                .parent_refs
                .iter()
                .flatten()
                .map(|p| Parent {
                    group: p.group.as_deref(),
                    kind: p.kind.as_deref(),
                    name: &p.name,
                    namespace: p.namespace.as_deref(),
                    port: p.port,
                    section_name: p.section_name.as_deref(),
                })
                .collect(),
            backends: r
                .spec
                .rules
                .iter()
                .flat_map(|rule| &rule.backend_refs)
                .map(|b| Backend {
                    reference: BackendRef {
                        from_kind: ObjectKind::TlsRoute.as_str(),
                        group: b.group.as_deref(),
                        kind: b.kind.as_deref(),
                        name: &b.name,
                        namespace: b.namespace.as_deref(),
                        port: b.port,
                    },
                    weight: b.weight,
                })
                .collect(),
        });
    }
    let plain = snapshot
        .tcp_routes
        .iter()
        .map(|r| {
            (
                ObjectKind::TcpRoute,
                &r.metadata,
                &r.spec.parent_refs,
                &r.spec.rules,
            )
        })
        .chain(snapshot.udp_routes.iter().map(|r| {
            (
                ObjectKind::UdpRoute,
                &r.metadata,
                &r.spec.parent_refs,
                &r.spec.rules,
            )
        }));
    for (kind, meta, parents, rules) in plain {
        views.push(View {
            kind,
            meta,
            hostnames: &[],
            parents: parents
                .iter()
                .flatten()
                .map(|p| Parent {
                    group: p.group.as_deref(),
                    kind: p.kind.as_deref(),
                    name: &p.name,
                    namespace: p.namespace.as_deref(),
                    port: p.port,
                    section_name: p.section_name.as_deref(),
                })
                .collect(),
            backends: rules
                .iter()
                .flat_map(|rule| &rule.backend_refs)
                .map(|b| Backend {
                    reference: BackendRef {
                        from_kind: kind.as_str(),
                        group: b.group.as_deref(),
                        kind: b.kind.as_deref(),
                        name: &b.name,
                        namespace: b.namespace.as_deref(),
                        port: b.port,
                    },
                    weight: b.weight,
                })
                .collect(),
        });
    }
    let mut backends = Backends::with_cache(snapshot, Default::default(), false);
    let no_labels = BTreeMap::new();
    let mut out = Vec::new();
    for view in &views {
        let ns = namespace_of(view.meta);
        if !view.parents.iter().any(|p| {
            by_name
                .parent(p.group, p.kind, p.namespace.unwrap_or(ns), p.name)
                .is_some()
        }) {
            continue;
        }
        let route_labels = labels.get(ns).unwrap_or(&no_labels);
        let (route, unresolved) = compile(view, &mut backends);
        let stamp = Stamp {
            generation: view.meta.generation,
            now: options.now,
        };
        let mut parents = Vec::new();
        let mut attachments = Vec::new();
        for parent in &view.parents {
            let Some(target) = by_name.parent(
                parent.group,
                parent.kind,
                parent.namespace.unwrap_or(ns),
                parent.name,
            ) else {
                continue;
            };
            let gi = target.gateway;
            let accepted = match select(view, parent, &gateways[gi], target.set, route_labels) {
                Ok(selected) => {
                    for (li, hostnames) in selected {
                        let name = view.meta.name.as_deref().unwrap_or("");
                        let listener = &mut gateways[gi].listeners[li];
                        listener.attached.insert((view.kind.as_str(), ns, name));
                        if listener.valid() {
                            attachments.push(Attachment {
                                gateway: gi,
                                listener: li,
                                hostnames,
                                parent: parents.len(),
                            });
                        }
                    }
                    stamp.ok(ConditionType::Accepted, Reason::Accepted, "accepted")
                }
                Err(e) => stamp.fail(ConditionType::Accepted, e.reason(), e.to_string()),
            };
            let resolved = match &unresolved {
                None => stamp.ok(
                    ConditionType::ResolvedRefs,
                    Reason::ResolvedRefs,
                    "resolved",
                ),
                Some((reason, message)) => {
                    stamp.fail(ConditionType::ResolvedRefs, *reason, message.clone())
                }
            };
            parents.push(HttpRouteStatusParents {
                conditions: vec![accepted, resolved],
                controller_name: options.controller_name.clone(),
                parent_ref: HttpRouteStatusParentsParentRef {
                    group: parent.group.map(str::to_owned),
                    kind: parent.kind.map(str::to_owned),
                    name: parent.name.to_owned(),
                    namespace: parent.namespace.map(str::to_owned),
                    port: parent.port,
                    section_name: parent.section_name.map(str::to_owned),
                },
            });
        }
        if parents.is_empty() {
            continue;
        }
        report.entries.push(ObjectStatus::new(
            view.kind,
            Some(ns),
            view.meta.name.as_deref().unwrap_or(""),
            view.meta.generation,
            StatusBody::HttpRoute(Arc::new(HttpRouteStatus { parents })),
        ));
        if !attachments.is_empty() {
            let created = crate::translate::common::precedence::created(view.meta);
            out.push(L4Attached {
                created,
                route,
                attachments,
            });
        }
    }
    out.sort_by(|a, b| {
        (a.created, a.route.route.namespace(), a.route.route.name()).cmp(&(
            b.created,
            b.route.route.namespace(),
            b.route.route.name(),
        ))
    });
    out
}

/// The route's weighted backends, and the first unresolved reference as `(reason, message)`.
/// An unresolved backend keeps its weight: its share of connections is refused.
fn compile(view: &View<'_>, backends: &mut Backends<'_>) -> (L4Route, Option<(Reason, String)>) {
    let ns = namespace_of(view.meta);
    let from = RefSide {
        group: GATEWAY_GROUP,
        kind: view.kind.as_str(),
        namespace: ns,
    };
    let mut unresolved = None;
    let set = view
        .backends
        .iter()
        .map(|b| {
            let weight = u32::try_from(b.weight.unwrap_or(1)).unwrap_or(0);
            let target = match backends.resolve_from(from, &b.reference) {
                Ok(service) => BackendTarget::Service(service),
                Err(e) => {
                    unresolved.get_or_insert((e.reason(), e.to_string()));
                    BackendTarget::Invalid {
                        reason: e.to_string(),
                    }
                }
            };
            WeightedBackend {
                weight,
                target,
                filters: RuleFilters::none(),
            }
        })
        .collect();
    let route = L4Route {
        route: Arc::new(RouteRef::new(
            view.kind.as_str(),
            ns,
            view.meta.name.as_deref().unwrap_or_default(),
        )),
        backends: Arc::new(BackendSet::new(set)),
    };
    (route, unresolved)
}

/// The listeners a parentRef attaches to, with the effective hostnames on each (`*` for TCP
/// and UDP); or why none. The most telling failure wins, as for HTTPRoutes.
fn select(
    view: &View<'_>,
    parent: &Parent<'_>,
    gateway: &GatewayModel<'_>,
    set: Option<usize>,
    labels: &BTreeMap<String, String>,
) -> Result<Vec<(usize, Vec<String>)>, AttachError> {
    let route_ns = namespace_of(view.meta);
    let selected: Vec<usize> = gateway
        .listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.set() == set
                && parent.section_name.is_none_or(|s| s == l.spec.name)
                && parent.port.is_none_or(|p| p == l.spec.port)
        })
        .map(|(i, _)| i)
        .collect();
    if selected.is_empty() {
        return Err(AttachError::NoMatchingParent);
    }
    let kind = view.kind.as_str();
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
    if view.kind != ObjectKind::TlsRoute {
        return Ok(allowed
            .into_iter()
            .map(|i| (i, vec!["*".to_owned()]))
            .collect());
    }
    let matched: Vec<(usize, Vec<String>)> = allowed
        .into_iter()
        .filter_map(|i| {
            let h = intersect_hostnames(gateway.listeners[i].hostname, view.hostnames);
            (!h.is_empty()).then_some((i, h))
        })
        .collect();
    if matched.is_empty() {
        return Err(AttachError::NoMatchingListenerHostname);
    }
    Ok(matched)
}

#[cfg(test)]
#[path = "l4route_tests.rs"]
mod tests;
