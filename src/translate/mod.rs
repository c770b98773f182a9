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
pub mod ingress;
pub mod lowered;
mod policy;
mod routes;
mod snapshot_rules;
mod stages;
#[cfg(test)]
mod testing;

use std::collections::BTreeMap;

use std::net::IpAddr;
use std::sync::Arc;

use crate::snapshot::Snapshot;
use crate::status::{conditions, StatusReport};
use crate::table::{RouteTable, ServedCertificates};
use routes::parents::GatewayIndex;

pub use backends::resolve::BackendError;
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
pub use routes::attach::AttachError;
pub use routes::filters::FilterError;
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
    /// Which Ingresses are ours and which Gateway serves them.
    pub ingress: ingress::IngressOptions,
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
    // Our Ingresses with their Gateways, when there are Ingresses at all.
    let prepared = ingress::prepare(snapshot, options);
    let snapshot = prepared.as_ref().map_or(snapshot, |p| &p.snapshot);
    let mut report = StatusReport::default();
    let classes = stages::classes(snapshot, options, &mut report);
    let set_inputs = gateways::listenerset::inputs(snapshot);
    let mut front = stages::gateways(snapshot, options, served, &classes, &set_inputs);
    let by_name = GatewayIndex::new(&front.gateways, &front.sets);
    let policies = policy::Policies::new(snapshot);
    let overlays = Arc::new(policies.service_overlays(snapshot));
    let mut compiler = cache.begin(snapshot, &overlays);
    let http = stages::http_routes(
        snapshot,
        options,
        &mut front,
        &by_name,
        cache,
        &mut compiler,
    );
    // L4 routes count on the listeners too; their statuses follow the HTTP routes'.
    let mut l4_statuses = StatusReport::default();
    let mut ingress_problems = prepared.as_ref().map(|p| p.problems.clone());
    let l4 = routes::l4route::attach_l4_routes(
        snapshot,
        &mut front.gateways,
        &by_name,
        &front.labels,
        options,
        ingress_problems.as_mut(),
        &mut l4_statuses,
    );
    // The Gateways' statuses before the routes', which sort after them: the routes' then
    // stay where they are when the report is sorted. Room for every entry at once, so that
    // the routes' are not moved by a reallocation either.
    report.entries.reserve(
        front.sets.len()
            + front.gateways.len()
            + http.listed.len()
            + l4_statuses.entries.len()
            + snapshot.ingresses.len()
            + snapshot.backend_tls_policies.len()
            + snapshot.traffic_policies.len(),
    );
    stages::gateway_statuses(&front, options, &mut report);
    let route_range = stages::route_statuses(&http, &compiler, &mut report);
    report.entries.append(&mut l4_statuses.entries);
    if let (Some(p), Some(mut problems)) = (&prepared, ingress_problems) {
        policy::ingress_policy_problems(snapshot, &mut problems);
        ingress::report_problems(&problems, &p.snapshot.ingresses, options, &mut report);
    }
    cache.finish(compiler);
    // Which Gateways reach which Service ports matters only for policies' ancestors: without
    // policies, no pass over every route's backends.
    let used = if snapshot.backend_tls_policies.is_empty() && policies.is_empty() {
        BTreeMap::new()
    } else {
        stages::services_used(&http.compiled)
    };
    let tls_policies = stages::backend_tls(snapshot, options, &mut front, &used, &mut report);
    let inputs = policy::PolicyInputs {
        snapshot,
        gateways: &front.gateways,
        counted: &http.counted,
        compiled: &http.compiled,
        used: &used,
        options,
    };
    let applied =
        policy::translate_policies(&policies, &inputs, &mut report, cache.policy_routes());
    let extras = build::table::Extras {
        hosts: &applied.hosts,
        settings: &front.settings,
    };
    let routes = if policies.is_empty() {
        &http.compiled
    } else {
        &applied.routes
    };
    let mut table = build::table::build_table(
        &front.gateways,
        routes,
        &extras,
        options.generation,
        cache.hosts(),
    );
    table.backend_tls = tls_policies;
    build::l4::add_l4_sockets(
        &mut table,
        &front.gateways,
        &l4,
        &applied.hosts,
        &front.settings,
    );
    report.sort_around(route_range);
    Translation {
        table,
        status: report,
    }
}
