//! The stages of one translation, in the order `translate_cached` runs them: GatewayClasses,
//! Gateways with their ListenerSets, HTTP-like routes, Gateway statuses, BackendTLSPolicies.
//! Each stage takes what the earlier ones produced and returns its own part, so the
//! orchestrator reads as the pipeline it is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use foldhash::HashMap;

use crate::snapshot::{namespace_of, Snapshot};
use crate::status::{conditions, ObjectKind, ObjectStatus, StatusBody, StatusReport};
use crate::table::{
    BackendTarget, BackendTlsEntry, ListenerSettings, ServedCertificates, ServiceKey,
};
use crate::translate::backends::tls::{resolve_policies, Secrets};
use crate::translate::cache::incremental::{Incremental, RouteCompiler};
use crate::translate::common::precedence;
use crate::translate::gateways::frontend::Frontends;
use crate::translate::gateways::gateway::{class_status, owns_class, GatewayModel};
use crate::translate::gateways::listener::namespace_labels;
use crate::translate::gateways::listenerset::{self, SetInput, SetModel};
use crate::translate::gateways::parameters::{
    gateway_parameters, resolve_parameters, InvalidParameters, ParametersRef, Resolved,
};
use crate::translate::gateways::{conflicts, tls::Certificates};
use crate::translate::routes::attach::Attached;
use crate::translate::routes::http_like;
use crate::translate::routes::kinds_conflict::{self, Counted};
use crate::translate::routes::parents::GatewayIndex;
use crate::translate::routes::rules::CompiledRoute;
use crate::translate::TranslateOptions;

/// Our GatewayClasses by name, each with its resolved `parametersRef`.
pub(super) type Classes<'s> = HashMap<&'s str, Result<Resolved, InvalidParameters>>;

/// The GatewayClasses we own: their status into `report`, their parameters returned.
pub(super) fn classes<'s>(
    snapshot: &'s Snapshot,
    options: &TranslateOptions,
    report: &mut StatusReport,
) -> Classes<'s> {
    let mut classes = HashMap::default();
    for class in &snapshot.gateway_classes {
        if !owns_class(class, options) {
            continue;
        }
        let name = class.metadata.name.as_deref().unwrap_or("");
        let resolved = match class.spec.parameters_ref.as_ref() {
            Some(r) => resolve_parameters(snapshot, &ParametersRef::of_class(r)),
            None => Ok(None),
        };
        let status = class_status(class, options, resolved.as_ref().err());
        classes.insert(name, resolved);
        report.entries.push(ObjectStatus::new(
            ObjectKind::GatewayClass,
            None,
            name,
            class.metadata.generation,
            StatusBody::GatewayClass(Box::new(status)),
        ));
    }
    classes
}

/// The Gateways stage's output: every later stage reads it.
pub(super) struct Front<'s> {
    /// Our Gateways, validated, sorted by namespace/name; their listeners include those of the
    /// ListenerSets they accepted.
    pub gateways: Vec<GatewayModel<'s>>,
    /// The ListenerSets naming one of our Gateways.
    pub sets: Vec<SetModel<'s>>,
    /// Every namespace's labels (for `allowedRoutes` selectors).
    pub labels: HashMap<&'s str, BTreeMap<String, String>>,
    /// Each Gateway's listener settings from its parameters (by index in `gateways`).
    pub settings: Vec<Option<Arc<ListenerSettings>>>,
    /// CA bundles read so far (client certificates), shared with BackendTLSPolicies.
    pub frontends: Frontends<'s>,
    /// Secrets parsed so far (listeners' and backends' certificates), shared with the
    /// client certificates of the BackendTLSPolicies made for Ingresses.
    pub certificates: Certificates<'s>,
}

/// Our Gateways (those of a class in `classes`) and their ListenerSets, validated, with socket
/// conflicts marked.
pub(super) fn gateways<'s>(
    snapshot: &'s Snapshot,
    options: &'s TranslateOptions,
    served: &'s ServedCertificates,
    classes: &Classes<'s>,
    set_inputs: &'s [SetInput<'s>],
) -> Front<'s> {
    let mut certificates = Certificates::new(snapshot, served);
    let mut frontends = Frontends::new(snapshot);
    let mut settings = HashMap::default();
    let mut gateways: Vec<GatewayModel<'_>> = snapshot
        .gateways
        .iter()
        .filter_map(|g| {
            let class = g.spec.gateway_class_name.as_str();
            let invalid = match gateway_parameters(snapshot, g, class, classes.get(class)?) {
                Ok(s) => {
                    let key = (
                        namespace_of(&g.metadata),
                        g.metadata.name.as_deref().unwrap_or(""),
                    );
                    settings.insert(key, s);
                    None
                }
                Err(e) => Some(e),
            };
            // An Ingress class's implicit Gateway binds its own ports in a cluster too.
            let bindings = snapshot.gateway_bindings.as_deref();
            let bindings = bindings.filter(|_| !crate::translate::ingress::is_implicit(g));
            Some(GatewayModel::new(
                g,
                options,
                &mut certificates,
                &mut frontends,
                bindings,
                invalid,
            ))
        })
        .collect();
    gateways.sort_by(|a, b| (a.namespace, a.name).cmp(&(b.namespace, b.name)));
    let labels = namespace_labels(snapshot);
    let sets = listenerset::join(
        set_inputs,
        &mut gateways,
        &labels,
        &mut certificates,
        &mut frontends,
    );
    conflicts::mark_socket_conflicts(&mut gateways);
    let settings = gateways
        .iter()
        .map(|g| settings.get(&(g.namespace, g.name)).cloned().flatten())
        .collect();
    Front {
        gateways,
        sets,
        labels,
        settings,
        frontends,
        certificates,
    }
}

/// A route attached and compiled: the pair the table is built from.
pub(super) type CompiledPair = (Arc<Attached>, Arc<CompiledRoute>);

/// The HTTP-like routes stage's output.
pub(super) struct HttpRoutes<'s> {
    /// Every route naming one of our Gateways, attached and compiled (conflict losers emptied).
    pub compiled: Vec<CompiledPair>,
    /// The same routes with their names and attachments, as the conflict and policy rules
    /// count them.
    pub counted: Vec<Counted<'s>>,
    /// The routes with a status (indexes into `counted`, with their positions among the
    /// snapshot's routes), in report order.
    pub listed: Vec<(usize, usize)>,
}

/// HTTPRoutes and GRPCRoutes: attached to the Gateways' listeners and compiled (reusing the
/// cache's work for routes that did not change), HTTPRoute/GRPCRoute conflicts resolved,
/// their counts onto the listeners. Their statuses go into the report later
/// ([`route_statuses`]), after the Gateways' which the counts complete, so that the report
/// is sorted without moving them.
pub(super) fn http_routes<'s>(
    snapshot: &'s Snapshot,
    options: &TranslateOptions,
    front: &mut Front<'s>,
    by_name: &GatewayIndex<'_>,
    cache: &mut Incremental,
    compiler: &mut RouteCompiler<'_>,
) -> HttpRoutes<'s> {
    let tokens = cache
        .faces()
        .tokens(&front.gateways, &front.sets, &front.labels, options);
    let routes = http_like::count(snapshot);
    let mut compiled = Vec::with_capacity(routes);
    let mut counted = Vec::with_capacity(routes);
    // The position of each of `counted` among the snapshot's routes.
    let mut positions = Vec::with_capacity(routes);
    {
        let inputs = crate::translate::cache::reattach::AttachInputs {
            gateways: &front.gateways,
            by_name,
            labels: &front.labels,
            tokens: &tokens,
            options,
        };
        if compiler.parallel() {
            let ours: Vec<_> = http_like::sources(snapshot)
                .enumerate()
                .filter(|(_, (_, route))| route.names_our_gateway(by_name))
                .map(|(position, (_, route))| (position, route))
                .collect();
            compiler.compile_ahead(&ours);
        }
        for (position, (meta, route)) in http_like::sources(snapshot).enumerate() {
            if !compiler.known_ours(position, &route, &tokens) && !route.names_our_gateway(by_name)
            {
                continue;
            }
            let (c, attached) = compiler.compile(position, &route, &inputs);
            counted.push(Counted {
                kind: c.kind,
                namespace: namespace_of(meta),
                name: meta.name.as_deref().unwrap_or(""),
                generation: meta.generation,
                created: precedence::created(meta),
                attached: attached.clone(),
            });
            positions.push(position);
            compiled.push((attached, c));
        }
    }
    let losers = kinds_conflict::resolve(&mut counted, &mut compiled, options, cache.losers());
    *cache.losers_mut() = losers;
    let mut at = vec![None; routes];
    for (i, &p) in positions.iter().enumerate() {
        at[p] = Some(i);
    }
    // In report order, so that sorting the report finds the routes sorted already.
    let mut listed = Vec::with_capacity(counted.len());
    for &p in cache.order().of(snapshot) {
        let Some(i) = at.get(p).copied().flatten() else {
            continue;
        };
        let route = &counted[i];
        if route.attached.status.is_some() {
            listed.push((i, p));
        }
        // Counted in report order, where a route listed twice comes twice in a row.
        for &(gi, li) in &route.attached.counted {
            let key = (route.kind.as_str(), route.namespace, route.name);
            front.gateways[gi].listeners[li]
                .attached
                .count_in_order(key);
        }
    }
    HttpRoutes {
        compiled,
        counted,
        listed,
    }
}

/// The statuses of the routes of `http` into `report`, in report order; returned, where
/// they are.
pub(super) fn route_statuses(
    http: &HttpRoutes<'_>,
    compiler: &RouteCompiler<'_>,
    report: &mut StatusReport,
) -> std::ops::Range<usize> {
    let first = report.entries.len();
    report.entries.reserve(http.listed.len());
    for &(i, position) in &http.listed {
        let route = &http.counted[i];
        let Some(status) = &route.attached.status else {
            continue;
        };
        // The names the route's cache entry holds: shared, not copied.
        let (namespace, name) = match compiler.names(position) {
            Some((namespace, name)) => (namespace.clone(), name.clone()),
            None => (Arc::from(route.namespace), Arc::from(route.name)),
        };
        report.entries.push(ObjectStatus::shared(
            ObjectKind::Route(route.kind),
            Some(namespace),
            name,
            route.generation,
            StatusBody::Route(status.clone()),
        ));
    }
    first..report.entries.len()
}

/// The status of every ListenerSet and Gateway, once every route kind has been counted on
/// their listeners.
pub(super) fn gateway_statuses(
    front: &Front<'_>,
    options: &TranslateOptions,
    report: &mut StatusReport,
) {
    for set in &front.sets {
        let status = set.status(&front.gateways[set.gateway], options);
        report.entries.push(ObjectStatus::new(
            ObjectKind::ListenerSet,
            Some(set.namespace),
            set.name,
            set.generation,
            StatusBody::ListenerSet(Box::new(status)),
        ));
    }
    for g in &front.gateways {
        report.entries.push(ObjectStatus::new(
            ObjectKind::Gateway,
            Some(g.namespace),
            g.name,
            g.gateway.metadata.generation,
            StatusBody::Gateway(Box::new(g.status())),
        ));
    }
}

/// Every Service port the rules of attached routes send traffic to, with the Gateways (by
/// index) whose listeners the routes are attached to.
pub(super) fn services_used(compiled: &[CompiledPair]) -> BTreeMap<ServiceKey, BTreeSet<usize>> {
    let mut used: BTreeMap<ServiceKey, BTreeSet<usize>> = BTreeMap::new();
    for (attached, route) in compiled {
        if attached.attachments.is_empty() {
            continue;
        }
        for rule in &route.rules {
            for b in &rule.backends.backends {
                if let BackendTarget::Service(s) = &b.target {
                    let gateways = used.entry(s.service.clone()).or_default();
                    gateways.extend(attached.attachments.iter().map(|a| a.gateway));
                }
            }
        }
    }
    used
}

/// BackendTLSPolicies: their status into `report`; returned, the TLS settings of each Service
/// port they apply to, as the table carries them.
pub(super) fn backend_tls(
    snapshot: &Snapshot,
    options: &TranslateOptions,
    front: &mut Front<'_>,
    used: &BTreeMap<ServiceKey, BTreeSet<usize>>,
    report: &mut StatusReport,
) -> BTreeMap<ServiceKey, Arc<BackendTlsEntry>> {
    let resolved = resolve_policies(
        &snapshot.backend_tls_policies,
        &snapshot.services,
        used,
        &front.gateways,
        Secrets {
            frontends: &mut front.frontends,
            certificates: &mut front.certificates,
        },
        |generation| conditions::Stamp {
            generation,
            now: options.now,
        },
        &options.controller_name,
    );
    // The policies `prepare` made for Ingresses' backends are no objects: no status.
    let statuses = resolved.statuses.into_iter();
    for (policy, status) in statuses.filter(|(p, _)| !crate::translate::backends::tls::is_made(p)) {
        report.entries.push(ObjectStatus::new(
            ObjectKind::BackendTlsPolicy,
            Some(namespace_of(&policy.metadata)),
            policy.metadata.name.as_deref().unwrap_or(""),
            policy.metadata.generation,
            StatusBody::BackendTlsPolicy(Box::new(status)),
        ));
    }
    resolved.by_port
}
