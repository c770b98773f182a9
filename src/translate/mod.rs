//! The pure translator: `Snapshot -> (RouteTable, StatusReport)`. Every Gateway API rule lives
//! here (class ownership, listeners, attachment, ReferenceGrants, backends, filters, and which
//! condition each object gets). Condition types, reasons and their builder belong to the status
//! module; its `conditions` is imported below so the rules name them `super::conditions`.
//! No I/O, no tokio, no kube client.

mod address;
mod backend_tls;
mod backends;
mod bind;
mod build;
mod conflicts;
mod duration;
mod endpoints;
mod features;
mod filters;
mod frontend;
mod gateway;
#[cfg(test)]
mod grpc_tests;
mod grpcroute;
mod hosts;
mod httproute;
mod incremental;
mod kinds_conflict;
mod l4build;
mod l4route;
mod listener;
mod listenerset;
#[cfg(test)]
mod listenerset_tests;
mod moved;
mod order;
mod parameters;
mod policy;
mod ports;
pub mod precedence;
mod protocol;
mod proxy_config;
mod reattach;
mod refgrant;
mod relink;
mod resilience;
mod rules;
mod statuses;
#[cfg(test)]
mod testing;
mod tls;

use std::collections::{BTreeMap, BTreeSet};

use foldhash::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use crate::snapshot::namespace_of;
use crate::snapshot::Snapshot;
use crate::status::{conditions, ObjectKind, ObjectStatus, StatusBody, StatusReport};
use crate::table::{RouteTable, ServedCertificates};

pub use address::AddressError;
pub use backends::BackendError;
pub use bind::{apply_bind_failures, apply_udp_bind_failures};
pub use duration::{parse_duration, DurationError, TimeoutError};
pub use features::{supported_features, Capabilities, SUPPORTED_FEATURES};
pub use filters::FilterError;
pub use frontend::{referenced_ca_objects, CaRefError};
pub use httproute::AttachError;
use incremental::Source;
pub use incremental::{Incremental, Reuse};
pub use listener::intersect_hostnames;
pub use parameters::{
    gateway_service_config, resolve_parameters, InvalidParameters, ParametersRef,
};
pub use policy::referenced_policy_objects;
pub use policy::{parse_htpasswd, parse_jwks};
pub use ports::{PortMap, PortMapError};
pub use rules::MatchError;
pub use tls::{referenced_listener_set_secrets, referenced_secrets, TlsRefError};

/// The controller name a GatewayClass must carry in `spec.controllerName` for us to own it.
pub const DEFAULT_CONTROLLER_NAME: &str = "edgeplane.dev/gateway-controller";

/// Inputs of a translation besides the snapshot.
#[derive(Debug, Clone)]
pub struct TranslateOptions {
    /// GatewayClasses with this `spec.controllerName` are ours.
    pub controller_name: String,
    /// Address listeners bind on when a Gateway has no `IPAddress` in `spec.addresses`.
    pub bind_address: IpAddr,
    /// Stamped as `lastTransitionTime` on new conditions (the caller carries older times over).
    pub now: jiff::Timestamp,
    /// Generation number of the table being built.
    pub generation: u64,
    /// Standalone placement: the local port each listener port binds (Gateways placed by
    /// `Snapshot::gateway_bindings` ignore it).
    pub port_map: PortMap,
    /// What the running mode can do; decides the GatewayClass's `supportedFeatures`.
    pub capabilities: Capabilities,
}

/// The output of one translation.
#[derive(Debug)]
pub struct Translation {
    pub table: RouteTable,
    pub status: StatusReport,
}

/// Translates a snapshot into a route table and the status of every owned object.
pub fn translate(snapshot: &Snapshot, options: &TranslateOptions) -> Translation {
    translate_with(snapshot, options, &ServedCertificates::default())
}

/// [`translate`], given the certificates the live table serves: a listener whose Secret was
/// updated to contents that are not a usable certificate keeps serving the certificate the
/// live table has for that Secret (`ResolvedRefs` False, still `Programmed`) instead of going
/// dark. The previous certificates are an input like the snapshot, so the translation stays
/// a pure function of its inputs.
pub fn translate_with(
    snapshot: &Snapshot,
    options: &TranslateOptions,
    served: &ServedCertificates,
) -> Translation {
    Incremental::default().translate(snapshot, options, served)
}

/// The one translation: a full one when `cache` is empty, else reusing what it holds from
/// unchanged inputs (see [`Incremental`]).
fn translate_cached(
    snapshot: &Snapshot,
    options: &TranslateOptions,
    served: &ServedCertificates,
    cache: &mut Incremental,
) -> Translation {
    let mut report = StatusReport::default();
    let mut classes = HashMap::default();
    for class in &snapshot.gateway_classes {
        if gateway::owns_class(class, options) {
            let name = class.metadata.name.as_deref().unwrap_or("");
            let resolved = match class.spec.parameters_ref.as_ref() {
                Some(r) => resolve_parameters(snapshot, &ParametersRef::of_class(r)),
                None => Ok(None),
            };
            let status = gateway::class_status(class, options, resolved.as_ref().err());
            classes.insert(name, resolved);
            report.entries.push(ObjectStatus::new(
                ObjectKind::GatewayClass,
                None,
                name,
                class.metadata.generation,
                StatusBody::GatewayClass(status),
            ));
        }
    }
    let set_inputs = listenerset::inputs(snapshot);
    let mut certificates = tls::Certificates::new(snapshot, served);
    let mut frontends = frontend::Frontends::new(snapshot);
    let mut settings = HashMap::default();
    let mut gateways: Vec<gateway::GatewayModel<'_>> = snapshot
        .gateways
        .iter()
        .filter_map(|g| {
            let class = g.spec.gateway_class_name.as_str();
            let invalid =
                match parameters::gateway_parameters(snapshot, g, class, classes.get(class)?) {
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
            Some(gateway::GatewayModel::new(
                g,
                options,
                &mut certificates,
                &mut frontends,
                snapshot.gateway_bindings.as_deref(),
                invalid,
            ))
        })
        .collect();
    gateways.sort_by(|a, b| (a.namespace, a.name).cmp(&(b.namespace, b.name)));
    let labels = namespace_labels(snapshot);
    let sets = listenerset::join(
        &set_inputs,
        &mut gateways,
        &labels,
        &mut certificates,
        &mut frontends,
    );
    conflicts::mark_socket_conflicts(&mut gateways);
    let by_name = GatewayIndex::new(&gateways, &sets);

    let gateway_settings: Vec<_> = gateways
        .iter()
        .map(|g| settings.get(&(g.namespace, g.name)).cloned().flatten())
        .collect();
    let policies = policy::Policies::new(snapshot);
    let overlays = Arc::new(policies.service_overlays(snapshot));
    let tokens = cache.faces().tokens(&gateways, &labels, options);
    let mut compiler = cache.begin(snapshot, &overlays);
    let routes = snapshot.http_routes.len() + snapshot.grpc_routes.len();
    let mut compiled = Vec::with_capacity(routes);
    let mut counted = Vec::with_capacity(routes);
    // The position of each of `counted` among the snapshot's routes.
    let mut positions = Vec::with_capacity(routes);
    report.entries.reserve(routes + snapshot.gateways.len());
    {
        let inputs = reattach::AttachInputs {
            gateways: &gateways,
            by_name: &by_name,
            labels: &labels,
            tokens: &tokens,
            options,
        };
        let http = snapshot.http_routes.iter().map(|r| {
            let parents = r.spec.parent_refs.iter().flatten();
            let names = parents.map(|p| {
                (
                    p.group.as_deref(),
                    p.kind.as_deref(),
                    p.namespace.as_deref(),
                    p.name.as_str(),
                )
            });
            (
                Source::Http(r),
                &r.metadata,
                names_our_gateway(&r.metadata, names, &by_name),
            )
        });
        let grpc = snapshot.grpc_routes.iter().map(|r| {
            let parents = r.spec.parent_refs.iter().flatten();
            let names = parents.map(|p| {
                (
                    p.group.as_deref(),
                    p.kind.as_deref(),
                    p.namespace.as_deref(),
                    p.name.as_str(),
                )
            });
            (
                Source::Grpc(r),
                &r.metadata,
                names_our_gateway(&r.metadata, names, &by_name),
            )
        });
        for (position, (route, meta, ours)) in http.chain(grpc).enumerate() {
            if !ours {
                continue;
            }
            let (c, attached) = compiler.compile(position, route, &inputs);
            let ns = namespace_of(meta);
            let name = meta.name.as_deref().unwrap_or("");
            let created = precedence::created(meta);
            counted.push(kinds_conflict::Counted {
                kind: c.kind,
                namespace: ns,
                name,
                generation: meta.generation,
                created,
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
    for &p in cache.order().of(snapshot) {
        let Some(route) = at.get(p).copied().flatten().map(|i| &counted[i]) else {
            continue;
        };
        if let Some(status) = &route.attached.status {
            let (kind, body) = if route.kind == grpcroute::GRPC_ROUTE {
                (ObjectKind::GrpcRoute, StatusBody::GrpcRoute(status.clone()))
            } else {
                (ObjectKind::HttpRoute, StatusBody::HttpRoute(status.clone()))
            };
            report.entries.push(ObjectStatus::new(
                kind,
                Some(route.namespace),
                route.name,
                route.generation,
                body,
            ));
        }
    }
    for route in &counted {
        for &(gi, li) in &route.attached.counted {
            let key = (route.kind, route.namespace, route.name);
            gateways[gi].listeners[li].attached.insert(key);
        }
    }
    let l4 = l4route::attach_l4_routes(
        snapshot,
        &mut gateways,
        &by_name,
        &labels,
        options,
        &mut report,
    );
    for set in &sets {
        let status = set.status(&gateways[set.gateway], options);
        report.entries.push(ObjectStatus::new(
            ObjectKind::ListenerSet,
            Some(set.namespace),
            set.name,
            set.generation,
            StatusBody::ListenerSet(status),
        ));
    }
    for g in &gateways {
        let status = g.status();
        report.entries.push(ObjectStatus::new(
            ObjectKind::Gateway,
            Some(g.namespace),
            g.name,
            g.gateway.metadata.generation,
            StatusBody::Gateway(status),
        ));
    }
    cache.finish(compiler);
    // Which Gateways reach which Service ports matters only for policies' ancestors: without
    // policies, no pass over every route's backends.
    let used = if snapshot.backend_tls_policies.is_empty() && policies.is_empty() {
        BTreeMap::new()
    } else {
        services_used(&compiled)
    };
    let tls_policies = backend_tls::resolve_policies(
        &snapshot.backend_tls_policies,
        &snapshot.services,
        &used,
        &gateways,
        &mut frontends,
        |generation| conditions::Stamp {
            generation,
            now: options.now,
        },
        &options.controller_name,
    );
    for (policy, status) in tls_policies.statuses {
        report.entries.push(ObjectStatus::new(
            ObjectKind::BackendTlsPolicy,
            Some(namespace_of(&policy.metadata)),
            policy.metadata.name.as_deref().unwrap_or(""),
            policy.metadata.generation,
            StatusBody::BackendTlsPolicy(status),
        ));
    }
    let applied = policy::translate_policies(
        &policies,
        snapshot,
        &gateways,
        &counted,
        &compiled,
        &used,
        options,
        &mut report,
        cache.policy_routes(),
    );
    let extras = build::Extras {
        hosts: &applied.hosts,
        settings: &gateway_settings,
    };
    let routes = if policies.is_empty() {
        &compiled
    } else {
        &applied.routes
    };
    let mut table = build::build_table(
        &gateways,
        routes,
        &extras,
        options.generation,
        cache.hosts(),
    );
    table.backend_tls = tls_policies.by_port;
    l4build::add_l4_sockets(
        &mut table,
        &gateways,
        &l4,
        &applied.hosts,
        &gateway_settings,
    );
    report.sort();
    Translation {
        table,
        status: report,
    }
}

/// Every Service port the rules of attached routes send traffic to, with the Gateways (by
/// index) whose listeners the routes are attached to.
fn services_used(
    compiled: &[(Arc<httproute::Attached>, Arc<rules::CompiledRoute>)],
) -> BTreeMap<crate::table::ServiceKey, BTreeSet<usize>> {
    let mut used: BTreeMap<crate::table::ServiceKey, BTreeSet<usize>> = BTreeMap::new();
    for (attached, route) in compiled {
        if attached.attachments.is_empty() {
            continue;
        }
        for rule in &route.rules {
            for b in &rule.backends.backends {
                if let crate::table::BackendTarget::Service(s) = &b.target {
                    let gateways = used.entry(s.service.clone()).or_default();
                    gateways.extend(attached.attachments.iter().map(|a| a.gateway));
                }
            }
        }
    }
    used
}

/// A parentRef as `(group, kind, namespace, name)`, unset fields `None`.
type ParentName<'p> = (Option<&'p str>, Option<&'p str>, Option<&'p str>, &'p str);

/// True when some parentRef of the route names one of our Gateways or a ListenerSet on one
/// (cheap pre-check, so routes of other controllers cost nothing).
fn names_our_gateway<'p>(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    mut parents: impl Iterator<Item = ParentName<'p>>,
    by_name: &GatewayIndex<'_>,
) -> bool {
    let ns = namespace_of(meta);
    parents.any(|(group, kind, namespace, name)| {
        by_name
            .parent(group, kind, namespace.unwrap_or(ns), name)
            .is_some()
    })
}

/// The Gateway a parentRef reaches, and the ListenerSet (its index) when it names one: routes
/// attach only to the listeners of the object they name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParentTarget {
    pub gateway: usize,
    pub set: Option<usize>,
}

/// Gateways scanned in a list up to this many; hashed beyond.
const GATEWAYS_SCANNED: usize = 8;

/// Our Gateways' indexes by namespace and name, looked up for every parentRef of every route:
/// with a few Gateways, comparing names in a list is cheaper than hashing two strings.
pub(crate) struct GatewayIndex<'a> {
    list: Vec<(&'a str, &'a str)>,
    map: HashMap<(&'a str, &'a str), usize>,
    /// ListenerSets naming one of our Gateways: `(namespace, name)` -> (Gateway, set index).
    sets: HashMap<(&'a str, &'a str), (usize, usize)>,
}

impl<'a> GatewayIndex<'a> {
    fn new(gateways: &[gateway::GatewayModel<'a>], sets: &[listenerset::SetModel<'a>]) -> Self {
        let sets = sets
            .iter()
            .map(|s| ((s.namespace, s.name), (s.gateway, s.index)))
            .collect();
        let list: Vec<(&str, &str)> = gateways.iter().map(|g| (g.namespace, g.name)).collect();
        let map = if list.len() > GATEWAYS_SCANNED {
            list.iter().enumerate().map(|(i, &k)| (k, i)).collect()
        } else {
            HashMap::default()
        };
        Self { list, map, sets }
    }

    /// What a parentRef `group`/`kind` `namespace/name` reaches: one of our Gateways, or a
    /// ListenerSet naming one; `None` for anything else.
    pub(crate) fn parent(
        &self,
        group: Option<&str>,
        kind: Option<&str>,
        namespace: &str,
        name: &str,
    ) -> Option<ParentTarget> {
        if group.unwrap_or(crate::status::GATEWAY_GROUP) != crate::status::GATEWAY_GROUP {
            return None;
        }
        match kind.unwrap_or("Gateway") {
            "Gateway" => self
                .get(namespace, name)
                .map(|gateway| ParentTarget { gateway, set: None }),
            listenerset::LISTENER_SET => {
                let &(gateway, set) = self.sets.get(&(namespace, name))?;
                Some(ParentTarget {
                    gateway,
                    set: Some(set),
                })
            }
            _ => None,
        }
    }

    /// The index of Gateway `namespace/name` (the last one, should the name repeat).
    pub(crate) fn get(&self, namespace: &str, name: &str) -> Option<usize> {
        if self.list.len() > GATEWAYS_SCANNED {
            return self.map.get(&(namespace, name)).copied();
        }
        self.list
            .iter()
            .rposition(|&(ns, n)| n == name && ns == namespace)
    }
}

/// Labels of a namespace the snapshot does not have: only its name.
fn default_labels(ns: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(listener::NAMESPACE_NAME_LABEL.to_owned(), ns.to_owned())])
}

/// Labels of every known namespace, with the `kubernetes.io/metadata.name` label always set.
fn namespace_labels(snapshot: &Snapshot) -> HashMap<&str, BTreeMap<String, String>> {
    snapshot
        .namespaces
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.as_deref()?;
            let mut labels = n.metadata.labels.clone().unwrap_or_default();
            labels.insert(listener::NAMESPACE_NAME_LABEL.to_owned(), name.to_owned());
            Some((name, labels))
        })
        .collect()
}
