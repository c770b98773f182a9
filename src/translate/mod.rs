//! The pure translator: `Snapshot -> (RouteTable, StatusReport)`. Every Gateway API rule lives
//! here (class ownership, listeners, attachment, ReferenceGrants, backends, filters, and which
//! condition each object gets). Condition types, reasons and their builder belong to the status
//! module; its `conditions` is imported below so the rules name them `super::conditions`.
//! No I/O, no tokio, no kube client.

mod backends;
mod build;
mod cache;
pub mod common;
mod gateways;
mod policy;
mod routes;
mod snapshot_rules;
#[cfg(test)]
mod testing;

use std::collections::{BTreeMap, BTreeSet};

use foldhash::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use crate::snapshot::namespace_of;
use crate::snapshot::Snapshot;
use crate::status::{conditions, ObjectKind, ObjectStatus, StatusBody, StatusReport};
use crate::table::{RouteTable, ServedCertificates};
use gateways::listener::namespace_labels;
use routes::parents::{names_our_gateway, GatewayIndex};

pub use backends::resolve::BackendError;
use cache::incremental::Source;
pub use cache::incremental::{Incremental, Reuse};
pub use common::duration::{parse_duration, DurationError, TimeoutError};
pub use gateways::address::AddressError;
pub use gateways::bind::{apply_bind_failures, apply_udp_bind_failures};
pub use gateways::features::{supported_features, Capabilities, SUPPORTED_FEATURES};
pub use gateways::frontend::{referenced_ca_objects, CaRefError};
pub use gateways::listener::intersect_hostnames;
pub use gateways::parameters::{
    gateway_service_config, resolve_parameters, InvalidParameters, ParametersRef,
};
pub use gateways::ports::{PortMap, PortMapError};
pub use gateways::tls::{referenced_listener_set_secrets, referenced_secrets, TlsRefError};
pub use policy::referenced_policy_objects;
pub use policy::{parse_htpasswd, parse_jwks};
pub use routes::filters::FilterError;
pub use routes::httproute::AttachError;
pub use routes::rules::MatchError;

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
        if gateways::gateway::owns_class(class, options) {
            let name = class.metadata.name.as_deref().unwrap_or("");
            let resolved = match class.spec.parameters_ref.as_ref() {
                Some(r) => resolve_parameters(snapshot, &ParametersRef::of_class(r)),
                None => Ok(None),
            };
            let status = gateways::gateway::class_status(class, options, resolved.as_ref().err());
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
    let set_inputs = gateways::listenerset::inputs(snapshot);
    let mut certificates = gateways::tls::Certificates::new(snapshot, served);
    let mut frontends = gateways::frontend::Frontends::new(snapshot);
    let mut settings = HashMap::default();
    let mut gateways: Vec<gateways::gateway::GatewayModel<'_>> = snapshot
        .gateways
        .iter()
        .filter_map(|g| {
            let class = g.spec.gateway_class_name.as_str();
            let invalid = match gateways::parameters::gateway_parameters(
                snapshot,
                g,
                class,
                classes.get(class)?,
            ) {
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
            Some(gateways::gateway::GatewayModel::new(
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
    let sets = gateways::listenerset::join(
        &set_inputs,
        &mut gateways,
        &labels,
        &mut certificates,
        &mut frontends,
    );
    gateways::conflicts::mark_socket_conflicts(&mut gateways);
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
        let inputs = cache::reattach::AttachInputs {
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
            let created = common::precedence::created(meta);
            counted.push(routes::kinds_conflict::Counted {
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
    let losers =
        routes::kinds_conflict::resolve(&mut counted, &mut compiled, options, cache.losers());
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
            let (kind, body) = if route.kind == routes::grpcroute::GRPC_ROUTE {
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
    let l4 = routes::l4route::attach_l4_routes(
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
    let tls_policies = backends::tls::resolve_policies(
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
    let extras = build::table::Extras {
        hosts: &applied.hosts,
        settings: &gateway_settings,
    };
    let routes = if policies.is_empty() {
        &compiled
    } else {
        &applied.routes
    };
    let mut table = build::table::build_table(
        &gateways,
        routes,
        &extras,
        options.generation,
        cache.hosts(),
    );
    table.backend_tls = tls_policies.by_port;
    build::l4::add_l4_sockets(
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
    compiled: &[(
        Arc<routes::httproute::Attached>,
        Arc<routes::rules::CompiledRoute>,
    )],
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
