//! The L4 route kinds (TLSRoute, TCPRoute, UDPRoute: the kinds whose listeners carry streams
//! or datagrams): each route's rule compiler (backend resolution into one weighted set per
//! route), attached by the one attachment of every route kind, with each route's `parents[]`
//! status. One pass generic over [`RouteKind`] serves every L4 kind `route_kinds!` declares.
//! The TLSRoutes of `ssl-passthrough` Ingresses go through the same compiler and attachment
//! as their Ingress. L4 routes are compiled in full on every translation. Pure.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::Arc;

use crate::kinds::ingress::{serving_gateway, NGINX_PREFIX};
use crate::kinds::routes::{RouteKind, RouteKindId, RouteVisitor};
use crate::kinds::KindSet;
use crate::snapshot::{namespace_of, Snapshot};
use crate::status::conditions::Reason;
use crate::status::{ObjectKind, ObjectStatus, StatusBody, StatusReport, GATEWAY_GROUP};
use crate::table::{BackendSet, BackendTarget, L4Route, RouteRef, RuleFilters, WeightedBackend};
use crate::translate::backends::resolve::{BackendRef, Backends};
use crate::translate::common::refgrant::RefSide;
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::gateways::protocol::ListenerProtocol;
use crate::translate::ingress::{passthrough, IngressProblems};
use crate::translate::routes::attach::{attach, Attachment, RuleOutcome};
use crate::translate::routes::parents::{names_our_gateway, GatewayIndex};
use crate::translate::TranslateOptions;

/// An L4 route accepted on at least one valid listener: what goes into the table.
#[derive(Debug)]
pub struct L4Attached {
    /// Creation time in seconds, then `namespace/name`: older routes win a hostname or a
    /// listener that several routes claim.
    pub created: i64,
    pub route: L4Route,
    pub attachments: Vec<Attachment>,
}

/// True for the route kinds whose listeners' protocols are all L4 ones (an Ingress, declared
/// without protocols, is HTTP-like).
fn is_l4(kind: RouteKindId) -> bool {
    let protocols = kind.protocols();
    !protocols.is_empty() && protocols.iter().all(|p| ListenerProtocol::parse(p).is_l4())
}

/// Every L4 route of the snapshot naming one of our Gateways: statuses go into `report`,
/// counted listeners into the Gateways' `attached`, and the attached routes are returned in
/// precedence order (oldest first, then `namespace/name`). An `ssl-passthrough` host that no
/// listener of its serving Gateway (ours) passes through goes to `ingress_problems`.
pub fn attach_l4_routes<'s>(
    snapshot: &'s Snapshot,
    gateways: &mut [GatewayModel<'s>],
    by_name: &GatewayIndex<'_>,
    labels: &HashMap<&str, BTreeMap<String, String>>,
    options: &TranslateOptions,
    ingress_problems: Option<&mut IngressProblems>,
    report: &mut StatusReport,
) -> Vec<L4Attached> {
    let mut spare = IngressProblems::new();
    let mut pass = L4Pass {
        snapshot,
        gateways,
        by_name,
        labels,
        options,
        report,
        backends: Backends::with_cache(snapshot, Default::default(), false),
        out: Vec::new(),
        counted: Vec::new(),
        ingress_problems: ingress_problems.unwrap_or(&mut spare),
    };
    for &kind in RouteKindId::ALL.iter().filter(|&&k| is_l4(k)) {
        kind.visit(&mut pass);
    }
    pass.ingress_passthrough();
    let (mut out, counted) = (pass.out, pass.counted);
    for (kind, ns, name, gi, li) in counted {
        gateways[gi].listeners[li]
            .attached
            .insert((kind.as_str(), ns, name));
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

/// One translation's pass over the L4 routes, kind by kind.
struct L4Pass<'p, 's> {
    snapshot: &'s Snapshot,
    gateways: &'p [GatewayModel<'s>],
    by_name: &'p GatewayIndex<'p>,
    labels: &'p HashMap<&'p str, BTreeMap<String, String>>,
    options: &'p TranslateOptions,
    report: &'p mut StatusReport,
    backends: Backends<'s>,
    out: Vec<L4Attached>,
    /// `(kind, namespace, name, gateway, listener)` of each listener counting a route.
    counted: Vec<(RouteKindId, &'s str, &'s str, usize, usize)>,
    /// Each Ingress's problems: its hosts that are not passed through are added.
    ingress_problems: &'p mut IngressProblems,
}

impl L4Pass<'_, '_> {
    /// The TLSRoutes of the `ssl-passthrough` Ingresses ([`passthrough::routes`]), attached
    /// as the TLSRoutes they are and served and counted as their Ingress (metrics' `route` is
    /// `Ingress/<namespace>/<name>`); they have no status of their own.
    fn ingress_passthrough(&mut self) {
        let no_labels = BTreeMap::new();
        let snapshot = self.snapshot;
        for ingress in &snapshot.ingresses {
            let meta = &ingress.metadata;
            let ns = namespace_of(meta);
            let name = meta.name.as_deref().unwrap_or("");
            let serving = serving_gateway(ingress).filter(|&(gw_ns, gw)| {
                self.gateways
                    .iter()
                    .any(|g| g.namespace == gw_ns && g.name == gw)
            });
            for (target, route) in passthrough::routes(ingress) {
                let (mut compiled, unresolved) = compile(&route, &mut self.backends);
                compiled.route = Arc::new(RouteRef::new(RouteKindId::Ingress.as_str(), ns, name));
                let outcome = RuleOutcome {
                    kind: RouteKindId::TlsRoute,
                    invalid: &[],
                    all_invalid: false,
                    unresolved,
                    needs_accepted_gateway: false,
                };
                let labels = self.labels.get(ns).unwrap_or(&no_labels);
                let attached = attach(
                    &route,
                    &outcome,
                    self.gateways,
                    self.by_name,
                    labels,
                    self.options,
                );
                for &(gi, li) in &attached.counted {
                    self.counted.push((RouteKindId::Ingress, ns, name, gi, li));
                }
                if let (true, Some((gw_ns, gw))) = (attached.attachments.is_empty(), serving) {
                    // Nothing else would say so: its TLS is handled by the other listeners.
                    let key = (ns.to_owned(), name.to_owned());
                    self.ingress_problems.entry(key).or_default().push(format!(
                        "annotation {NGINX_PREFIX}{}: host {} is not passed through: Gateway \
                         {gw_ns}/{gw} has no TLS listener in Passthrough mode for it that admits \
                         TLSRoutes from namespace {ns} (its TLS is handled by the other listeners)",
                        passthrough::NAME,
                        target.host,
                    ));
                }
                if !attached.attachments.is_empty() {
                    self.out.push(L4Attached {
                        created: crate::translate::common::precedence::created(meta),
                        route: compiled,
                        attachments: attached.attachments,
                    });
                }
            }
        }
    }
}

impl RouteVisitor for &mut L4Pass<'_, '_> {
    type Out = ();

    fn route<K: RouteKind>(self) {
        let no_labels = BTreeMap::new();
        let snapshot = self.snapshot;
        for r in snapshot.objects::<K>() {
            let meta = r.meta();
            let ns = namespace_of(meta);
            if !names_our_gateway(meta, r.parent_refs(), self.by_name) {
                continue;
            }
            let (route, unresolved) = compile(&**r, &mut self.backends);
            let outcome = RuleOutcome {
                kind: K::ID,
                invalid: &[],
                all_invalid: false,
                unresolved,
                needs_accepted_gateway: false,
            };
            let labels = self.labels.get(ns).unwrap_or(&no_labels);
            let attached = attach(
                &**r,
                &outcome,
                self.gateways,
                self.by_name,
                labels,
                self.options,
            );
            let Some(status) = attached.status else {
                continue;
            };
            let name = meta.name.as_deref().unwrap_or("");
            for &(gi, li) in &attached.counted {
                self.counted.push((K::ID, ns, name, gi, li));
            }
            self.report.entries.push(ObjectStatus::new(
                ObjectKind::Route(K::ID),
                Some(ns),
                name,
                meta.generation,
                StatusBody::Route(status),
            ));
            if !attached.attachments.is_empty() {
                let created = crate::translate::common::precedence::created(meta);
                self.out.push(L4Attached {
                    created,
                    route,
                    attachments: attached.attachments,
                });
            }
        }
    }
}

/// The rule compiler of the L4 kinds: the route's weighted backends (every rule's), and the
/// first unresolved reference as `(reason, message)`. An unresolved backend keeps its weight:
/// its share of connections is refused.
fn compile<K: RouteKind>(
    route: &K,
    backends: &mut Backends<'_>,
) -> (L4Route, Option<(Reason, String)>) {
    let meta = route.meta();
    let ns = namespace_of(meta);
    let kind = K::ID.as_str();
    let from = RefSide {
        group: GATEWAY_GROUP,
        kind,
        namespace: ns,
    };
    let mut unresolved = None;
    let set = route
        .rules()
        .iter()
        .flat_map(K::backend_refs)
        .map(|b| {
            let weight = u32::try_from(b.weight.unwrap_or(1)).unwrap_or(0);
            let reference = BackendRef {
                from_kind: kind,
                group: b.group,
                kind: b.kind,
                name: b.name,
                namespace: b.namespace,
                port: b.port,
            };
            let target = match backends.resolve_from(from, &reference) {
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
            kind,
            ns,
            meta.name.as_deref().unwrap_or_default(),
        )),
        backends: Arc::new(BackendSet::new(set)),
    };
    (route, unresolved)
}

#[cfg(test)]
#[path = "l4route_tests.rs"]
mod tests;
