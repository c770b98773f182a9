//! `convert ingress --verify`: the Ingresses and their conversion translated into two route tables
//! by the pure translator, and a request corpus generated from the Ingresses (`corpus`: each host,
//! and the TLS hosts a wildcard covers, x path x method, plus a trailing slash, upper case, a path
//! one segment deeper, a path running past a segment boundary, regex characters dropped, canary
//! headers and cookies; gRPC calls for the Ingresses of gRPC backends; for HTTPS, the SNI's choice
//! between passing the connection through and terminating it) replayed through both with the
//! table's own rule selection ([`VirtualHost::route`], what the proxy calls) and filters. Each
//! request's decision (backends with weights, rewritten path and host, redirect status and
//! `Location`, status, the remaining filters, the effective TrafficPolicy settings; a redirect is
//! answered before filters and policies, so it is its status and `Location` alone) is compared;
//! which listener, Gateway or route object decided is not. Pure.

mod corpus;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use serde::Serialize;
use serde_json::{json, Value};

use super::translate_options;
use crate::snapshot::Snapshot;
use crate::table::{
    BackendTarget, BackendTlsEntry, ListenerTable, RedirectTarget, RouteRule, RouteTable, Scheme,
    ServiceBackend, UpstreamProtocol, VirtualHost, WeightedBackend,
};
use crate::translate::ingress::prepare;
use crate::translate::translate;

pub use corpus::{corpus, Request};

/// What a table does with one request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// `no listener`, `no route`, `redirect`, `backend`, `no backend`, or for a TLS
    /// connection whose SNI names a TLS listener, `passthrough` (with its backends) or
    /// `terminated stream`.
    pub outcome: &'static str,
    /// The status the proxy answers itself with (none when a backend answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// `namespace/name:port weight N` per backendRef (`invalid: why` when unresolved).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backends: Vec<String>,
    /// Path and host sent upstream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The rule's other filters: header edits, CORS, timeouts, retry, session, mirrors,
    /// external authorization; and each backendRef's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filters: Option<Value>,
    /// The TrafficPolicy settings in effect (the rule's over its host's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<Value>,
}

impl Decision {
    fn bare(outcome: &'static str, status: Option<u16>) -> Self {
        Self {
            outcome,
            status,
            location: None,
            backends: Vec::new(),
            path: None,
            host: None,
            filters: None,
            policy: None,
        }
    }
}

/// A request the two tables decide differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub request: Request,
    pub ingress: Decision,
    pub converted: Decision,
}

/// The result of one verification.
#[derive(Debug, Default, Serialize)]
pub struct Verification {
    /// Requests replayed.
    pub requests: usize,
    pub differences: Vec<Difference>,
    /// Problems in the status of the converted objects (a route not accepted, a reference
    /// not resolved): said, and usually the cause of differences.
    pub problems: Vec<String>,
}

/// `input` (as converted: [`super::Conversion::input`]) with its Ingresses replaced by the
/// converted objects of `converted` and the GatewayClass `class` (ours, accepted) unless
/// `converted` has one of that name.
pub fn converted_snapshot(input: &Snapshot, converted: &Snapshot, class: &str) -> Snapshot {
    let mut out = input.clone();
    out.ingresses.clear();
    out.ingress_classes.clear();
    out.gateway_classes
        .extend(converted.gateway_classes.iter().cloned());
    if !out
        .gateway_classes
        .iter()
        .any(|c| c.metadata.name.as_deref() == Some(class))
    {
        let ours = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": class},
            "spec": {"controllerName": translate_options().controller_name}});
        if let Ok(c) = serde_json::from_value::<GatewayClass>(ours) {
            out.gateway_classes.push(Arc::new(c));
        }
    }
    out.gateways.extend(converted.gateways.iter().cloned());
    out.listener_sets
        .extend(converted.listener_sets.iter().cloned());
    out.http_routes
        .extend(converted.http_routes.iter().cloned());
    out.grpc_routes
        .extend(converted.grpc_routes.iter().cloned());
    out.tls_routes.extend(converted.tls_routes.iter().cloned());
    out.reference_grants
        .extend(converted.reference_grants.iter().cloned());
    out.traffic_policies
        .extend(converted.traffic_policies.iter().cloned());
    out.backend_tls_policies
        .extend(converted.backend_tls_policies.iter().cloned());
    out
}

/// Replays the corpus of `input`'s Ingresses through the translation of `input` and of
/// `converted` (see [`converted_snapshot`]).
pub fn verify(input: &Snapshot, converted: &Snapshot) -> Verification {
    let options = translate_options();
    let ingress = translate(input, &options).table;
    let translated = translate(converted, &options);
    let ingresses = prepare(input, &options)
        .map(|p| p.snapshot.ingresses)
        .unwrap_or_default();
    let mut out = Verification {
        problems: translated
            .status
            .problems()
            .iter()
            .map(ToString::to_string)
            .collect(),
        ..Verification::default()
    };
    for request in corpus(&ingresses) {
        out.requests += 1;
        let a = decide(&ingress, options.bind_address, &request);
        let b = decide(&translated.table, options.bind_address, &request);
        if a != b {
            out.differences.push(Difference {
                request,
                ingress: a,
                converted: b,
            });
        }
    }
    out
}

/// How the proxy picks an endpoint of `service` and speaks to it for `rule`, when not the
/// defaults: ` balance` (not least-request), ` h2c`, and ` tls` with the name sent, what
/// the certificate is checked against (the policy's name aside) and the client certificate
/// presented (the Service port's own, else the listener's Gateway's).
fn upstream(
    table: &RouteTable,
    listener: &ListenerTable,
    rule: &RouteRule,
    service: &ServiceBackend,
) -> String {
    let mut out = String::new();
    if !service.balance.is_default() {
        let balance = serde_json::to_value(&service.balance).unwrap_or_default();
        out.push_str(&format!(" balance {balance}"));
    }
    if rule.upstream_protocol(service) == UpstreamProtocol::H2c {
        out.push_str(" h2c");
    }
    match table.backend_tls(&service.service).map(|e| &**e) {
        Some(BackendTlsEntry::Ready(t)) if t.verifies() => out.push_str(&format!(
            " tls {} verified by {}",
            t.hostname,
            t.ca_certificates.join(", ")
        )),
        Some(BackendTlsEntry::Ready(t)) => out.push_str(&format!(" tls {} unverified", t.hostname)),
        Some(BackendTlsEntry::Unusable { reason, .. }) => {
            out.push_str(&format!(" tls unusable: {reason}"));
        }
        None => {}
    }
    if let Some(BackendTlsEntry::Ready(t)) = table.backend_tls(&service.service).map(|e| &**e) {
        if let Some(id) = t.identity(listener.backend_identity.as_ref()) {
            out.push_str(&format!(" presenting {}", id.secret));
        }
    }
    out
}

/// What `table` does with `req`: the listener of its scheme's port, the rule the data plane
/// picks, and the filters and policy of that rule applied as the proxy applies them.
pub fn decide(table: &RouteTable, bind: IpAddr, req: &Request) -> Decision {
    let https = req.scheme == "https";
    let port = if https { 443 } else { 80 };
    let Some(listener) = table.listener(&SocketAddr::new(bind, port)) else {
        return Decision::bare("no listener", None);
    };
    if let Some(routes) = listener.sni_routes().filter(|_| https) {
        // The ClientHello's SNI (the host) picks a listener before anything is terminated.
        match routes.listener(Some(&req.host)).filter(|l| !l.https) {
            Some(l) if !l.terminate => {
                let Some(route) = l.route(Some(&req.host)) else {
                    return Decision::bare("no route", None);
                };
                let mut d = Decision::bare("passthrough", None);
                d.backends = route.backends.backends.iter().map(backend_text).collect();
                return d;
            }
            Some(_) => return Decision::bare("terminated stream", None),
            None if listener.l4.is_some() => return Decision::bare("no route", None),
            None => {}
        }
    }
    let mut headers = HeaderMap::new();
    for (n, v) in &req.headers {
        if let (Ok(n), Ok(v)) = (HeaderName::try_from(n), HeaderValue::try_from(v)) {
            headers.append(n, v);
        }
    }
    let method = Method::from_bytes(req.method.as_bytes()).unwrap_or(Method::GET);
    let view = crate::table::RequestView {
        host: &req.host,
        path: &req.path,
        query: None,
        method: &method,
        headers: &headers,
    };
    let found = listener
        .hosts
        .candidates(&req.host)
        .find_map(|h| h.route(&view).map(|r| (h, r)));
    let Some((vhost, rule)) = found else {
        return Decision::bare("no route", Some(404));
    };
    let scheme = if https { Scheme::Https } else { Scheme::Http };
    let redirect = rule.filters.redirect_for(https);
    if let Some(r) = redirect {
        let target = RedirectTarget {
            scheme,
            host: &req.host,
            listener_port: listener.listener_port(),
            path: &req.path,
            query: None,
        };
        // Answered before filters and policies, as the proxy answers it.
        let mut d = Decision::bare("redirect", Some(r.status));
        d.location = Some(r.location(&target, &rule.matcher.path));
        return d;
    }
    let mut d = Decision::bare("backend", None);
    d.policy = policy(rule, vhost);
    d.filters = other_filters(rule);
    for b in &rule.backends.backends {
        let mut text = backend_text(b);
        if let BackendTarget::Service(s) = &b.target {
            text.push_str(&upstream(table, listener, rule, s));
        }
        if !b.filters.is_empty() {
            text.push_str(&format!(
                " filters {}",
                serde_json::to_value(&*b.filters).unwrap_or_default()
            ));
        }
        d.backends.push(text);
    }
    if rule.backends.total_weight() == 0 {
        d.outcome = "no backend";
        d.status = Some(500);
    }
    let (path, host) = match rule.filters.rewrite.as_deref() {
        Some(rw) => match PathAndQuery::try_from(req.path.as_str()) {
            Ok(target) => {
                let host = HeaderValue::try_from(req.host.as_str()).ok();
                match rw.apply(&rule.matcher.path, target, host) {
                    Ok((p, h)) => (
                        p.to_string(),
                        h.map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned()),
                    ),
                    Err(_) => (req.path.clone(), Some(req.host.clone())),
                }
            }
            Err(_) => (req.path.clone(), Some(req.host.clone())),
        },
        None => (req.path.clone(), Some(req.host.clone())),
    };
    d.path = Some(path);
    d.host = host;
    d
}

/// `namespace/name:port weight N`, or `invalid: why weight N`.
fn backend_text(b: &WeightedBackend) -> String {
    let target = match &b.target {
        BackendTarget::Service(s) => s.service.to_string(),
        BackendTarget::Invalid { reason } => format!("invalid: {reason}"),
    };
    format!("{target} weight {}", b.weight)
}

/// The rule's filters other than redirect and rewrite (compared by their effect above) and
/// policy (compared as the effective policy), as JSON; `None` when there are none.
fn other_filters(rule: &RouteRule) -> Option<Value> {
    let mut v = serde_json::to_value(&*rule.filters).ok()?;
    let m = v.as_object_mut()?;
    for k in ["redirect", "rewrite", "policy", "httpsRedirect"] {
        m.remove(k);
    }
    (!m.is_empty()).then_some(v)
}

/// The TrafficPolicy settings in effect for a request of `rule` in `vhost`. An access list
/// that refuses everything reads the same whether it says so (an invalid Ingress list) or
/// lists every address (the TrafficPolicy written for it).
fn policy(rule: &RouteRule, vhost: &VirtualHost) -> Option<Value> {
    let policy = match (rule.filters.policy.as_deref(), vhost.policy.as_deref()) {
        (None, None) => return None,
        (Some(p), None) | (None, Some(p)) => p.clone(),
        (Some(r), Some(h)) => r.over(h),
    };
    let mut v = serde_json::to_value(&policy).ok()?;
    if let Some(access) = v.get_mut("ipAccess") {
        let every = json!(["0.0.0.0/0", "::/0"]);
        let refuses_all = access.get("refuseAll").is_some()
            || (access.get("allow").is_none_or(|a| a == &json!([]))
                && access.get("deny") == Some(&every));
        if refuses_all {
            *access = json!("refuses every address");
        }
    }
    Some(v)
}
