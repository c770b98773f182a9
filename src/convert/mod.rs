//! `edgeplane convert ingress`: Ingresses (with their IngressClasses, Services and Secrets)
//! turned into the Gateway API objects that route the same. The Ingresses go through
//! [`prepare`] and [`lowered`](crate::translate::lowered) exactly as serving does, so what is written is what edgeplane
//! serves for them: a Gateway per IngressClass (`gateway`), an HTTPRoute per Ingress and host
//! (`routes`; GRPCRoutes for gRPC backends when they can say the same: `grpc`), a TLSRoute
//! per `ssl-passthrough` host (`passthrough`), ReferenceGrants for certificates in other
//! namespaces and for canaries folded across namespaces (`canary`), a TrafficPolicy per Ingress for what Gateway API cannot say, a BackendTLSPolicy
//! for verified backend TLS, and a report per Ingress and annotation (`report`). [`verify`]
//! replays requests through both translations. Pure: the command line reads and writes the
//! files.

mod canary;
mod gateway;
mod grpc;
mod names;
mod passthrough;
pub mod report;
mod routes;
pub mod verify;

use std::sync::Arc;

use serde_json::Value;

use crate::kinds::ingress::INGRESS_CONTROLLER;
use crate::snapshot::Snapshot;
use crate::translate::ingress::{prepare, IngressOptions};
use crate::translate::{Capabilities, TranslateOptions, DEFAULT_CONTROLLER_NAME};

pub use report::{Outcome, Report};

/// `spec.controller` of ingress-nginx's IngressClasses: their Ingresses are converted too.
pub const NGINX_CONTROLLER: &str = "k8s.io/ingress-nginx";

/// The GatewayClass the written Gateways name unless `--gateway-class` says otherwise.
pub const DEFAULT_GATEWAY_CLASS: &str = "edgeplane";

/// The namespace of the written Gateways unless `--gateway-namespace` says otherwise.
pub const DEFAULT_GATEWAY_NAMESPACE: &str = "edgeplane-system";

/// What the written objects are named after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertOptions {
    /// `spec.gatewayClassName` of the written Gateways (the GatewayClass is not written).
    pub gateway_class: String,
    /// Namespace of the written Gateways (and ListenerSets).
    pub gateway_namespace: String,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        Self {
            gateway_class: DEFAULT_GATEWAY_CLASS.to_owned(),
            gateway_namespace: DEFAULT_GATEWAY_NAMESPACE.to_owned(),
        }
    }
}

/// The result of one conversion.
#[derive(Debug)]
pub struct Conversion {
    /// The written objects, in the order they are written: Gateways, ListenerSets,
    /// ReferenceGrants (certificates', then canaries'), then per Ingress its HTTPRoutes and
    /// TrafficPolicies.
    pub objects: Vec<Value>,
    pub report: Report,
    /// The input as converted: ingress-nginx's IngressClasses taken as edgeplane's, so that
    /// serving this snapshot serves every converted Ingress ([`verify`] translates it).
    pub input: Snapshot,
}

/// The options the conversion's translations use (standalone, ports as written).
pub fn translate_options() -> TranslateOptions {
    TranslateOptions {
        controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: std::net::IpAddr::from([127, 0, 0, 1]),
        now: jiff::Timestamp::UNIX_EPOCH,
        generation: 1,
        port_map: Default::default(),
        capabilities: Capabilities::STANDALONE,
        ingress: IngressOptions::default(),
    }
}

/// `snapshot` with the IngressClasses of ingress-nginx taken as edgeplane's.
pub fn adopt_nginx_classes(snapshot: &Snapshot) -> Snapshot {
    let mut out = snapshot.clone();
    for class in &mut out.ingress_classes {
        let nginx =
            class.spec.as_ref().and_then(|s| s.controller.as_deref()) == Some(NGINX_CONTROLLER);
        if nginx {
            let mut c = (**class).clone();
            if let Some(spec) = c.spec.as_mut() {
                spec.controller = Some(INGRESS_CONTROLLER.to_owned());
            }
            *class = Arc::new(c);
        }
    }
    out
}

/// Converts the Ingresses of `snapshot` of an IngressClass of ingress-nginx or edgeplane
/// (or of none, when such a class is the default).
pub fn convert(snapshot: &Snapshot, options: &ConvertOptions) -> Conversion {
    let input = adopt_nginx_classes(snapshot);
    let mut objects = Vec::new();
    let mut report = Report::default();
    let prepared = prepare(&input, &translate_options());
    if let Some(prepared) = &prepared {
        let gateways = gateway::write(&prepared.snapshot, options);
        objects.extend(gateways.objects.iter().cloned());
        let mut grants = canary::Grants::default();
        let mut routes = Vec::new();
        let grpc = grpc::settle(&prepared.snapshot.ingresses);
        for ingress in &prepared.snapshot.ingresses {
            let key = (
                crate::snapshot::namespace_of(&ingress.metadata).to_owned(),
                ingress.metadata.name.clone().unwrap_or_default(),
            );
            let choice = grpc.get(&key);
            let mut written = routes::write(ingress, &gateways, matches!(choice, Some(Ok(()))));
            let policies = &prepared.snapshot.backend_tls_policies;
            routes::add_backend_tls(&mut written, ingress, policies);
            routes::add_balance(&mut written, ingress);
            passthrough::add_routes(&mut written, ingress, &gateways);
            let client = gateways.client_certificates.get(&key);
            report.add_converted(ingress, &written.names, &prepared.problems, choice, client);
            grants.note(ingress, &written.objects);
            routes.extend(written.objects);
        }
        for (canary, grant) in grants.write() {
            report.add_written(&canary, &grant);
            objects.push(grant);
        }
        objects.extend(routes);
    }
    report.add_skipped(&input, prepared.as_ref().map(|p| &p.snapshot));
    Conversion {
        objects,
        report,
        input,
    }
}

#[cfg(test)]
mod tests;
