//! `convert ingress --verify`: the Ingresses and their conversion translated into two route
//! tables by the pure translator, and a request corpus generated from the Ingresses (each
//! host, and the TLS hosts a wildcard covers, x path x method, plus a trailing slash, upper
//! case, a path one segment deeper, a path running past a segment boundary, regex characters
//! dropped, canary headers and cookies; gRPC calls for the Ingresses of gRPC backends; for
//! HTTPS, the SNI's choice between passing the connection through and terminating it)
//! replayed through both with the table's own rule selection ([`VirtualHost::route`], what
//! the proxy calls) and filters. Each request's decision (backends with weights, rewritten
//! path and host, redirect status and `Location`, status, the remaining filters, the
//! effective TrafficPolicy settings; a redirect is answered before filters and policies, so
//! it is its status and `Location` alone) is compared; which listener, Gateway or route
//! object decided is not. Pure.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use k8s_openapi::api::networking::v1::Ingress;
use serde::Serialize;
use serde_json::{json, Value};

use super::translate_options;
use crate::kinds::ingress::NGINX_PREFIX;
use crate::snapshot::Snapshot;
use crate::table::{
    BackendTarget, BackendTlsEntry, ListenerTable, RedirectTarget, RouteRule, RouteTable, Scheme,
    ServiceBackend, UpstreamProtocol, VirtualHost, WeightedBackend,
};
use crate::translate::ingress::{passthrough, prepare};
use crate::translate::translate;

/// The host sent for Ingress rules without one.
const ANY_HOST_SAMPLE: &str = "any-host.invalid";

/// One replayed request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Request {
    pub scheme: &'static str,
    pub method: String,
    pub host: String,
    pub path: String,
    /// `(name, value)` pairs, names in lower case.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}://{}{}",
            self.method, self.scheme, self.host, self.path
        )?;
        for (n, v) in &self.headers {
            write!(f, " [{n}: {v}]")?;
        }
        Ok(())
    }
}

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

/// The requests generated from `ingresses` (prepared copies), sorted, each once.
pub fn corpus(ingresses: &[Arc<Ingress>]) -> Vec<Request> {
    // TLS hosts, and the hosts passed through (`ssl-passthrough`): HTTPS requests too.
    let tls: BTreeSet<String> = ingresses
        .iter()
        .flat_map(|i| i.spec.iter().flat_map(|s| s.tls.iter().flatten()))
        .flat_map(|t| t.hosts.iter().flatten().cloned())
        .chain(
            ingresses
                .iter()
                .flat_map(|i| passthrough::targets(i).0)
                .map(|t| t.host),
        )
        .collect();
    let mut out = BTreeSet::new();
    for ingress in ingresses {
        let notes = ingress.metadata.annotations.clone().unwrap_or_default();
        let note = |n: &str| notes.get(&format!("{NGINX_PREFIX}{n}")).cloned();
        let mut extra: Vec<(String, String)> = Vec::new();
        if let Some(h) = note("canary-by-header") {
            let v = note("canary-by-header-value").unwrap_or_else(|| "always".to_owned());
            extra.push((h.to_ascii_lowercase(), v));
        }
        if let Some(c) = note("canary-by-cookie") {
            extra.push(("cookie".to_owned(), format!("{c}=always")));
        }
        // A gRPC backend answers gRPC calls: those are replayed for it.
        let grpc = super::grpc::asks_grpc(ingress);
        let Some(spec) = ingress.spec.as_ref() else {
            continue;
        };
        let mut pairs: Vec<(String, String)> = Vec::new();
        for rule in spec.rules.iter().flatten() {
            let host = rule.host.clone().unwrap_or_else(|| "*".to_owned());
            pairs.push((host.clone(), "/".to_owned()));
            for p in rule.http.iter().flat_map(|h| h.paths.iter()) {
                pairs.push((
                    host.clone(),
                    p.path.clone().unwrap_or_else(|| "/".to_owned()),
                ));
            }
        }
        if spec.default_backend.is_some() && pairs.is_empty() {
            pairs.push(("*".to_owned(), "/".to_owned()));
        }
        for (rule_host, path) in pairs {
            // A wildcard's TLS hosts are served through their own listeners.
            let mut hosts = vec![sample_host(&rule_host)];
            if rule_host.starts_with("*.") {
                hosts.extend(
                    tls.iter()
                        .filter(|t| !t.starts_with('*'))
                        .filter(|t| super::names::covers(Some(&rule_host), t))
                        .cloned(),
                );
            }
            for host in hosts {
                let https = tls.iter().any(|t| super::names::covers(Some(t), &host));
                let schemes: &[&'static str] = if https { &["http", "https"] } else { &["http"] };
                for scheme in schemes {
                    if grpc {
                        for call in grpc_calls(&path) {
                            out.insert(request(scheme, "POST", &host, &call, vec![grpc_type()]));
                            for header in &extra {
                                let headers = vec![grpc_type(), header.clone()];
                                out.insert(request(scheme, "POST", &host, &call, headers));
                            }
                        }
                        continue;
                    }
                    for variant in variants(&path) {
                        for method in ["GET", "POST"] {
                            out.insert(request(scheme, method, &host, &variant, Vec::new()));
                        }
                    }
                    for header in &extra {
                        out.insert(request(scheme, "GET", &host, &path, vec![header.clone()]));
                    }
                }
            }
        }
    }
    out.into_iter().collect()
}

fn request(
    scheme: &'static str,
    method: &str,
    host: &str,
    path: &str,
    headers: Vec<(String, String)>,
) -> Request {
    Request {
        scheme,
        method: method.to_owned(),
        host: host.to_owned(),
        path: path.to_owned(),
        headers,
    }
}

/// A host name a request can carry for an Ingress host (`*` and wildcards filled in).
fn sample_host(host: &str) -> String {
    match host {
        "*" => ANY_HOST_SAMPLE.to_owned(),
        h => match h.strip_prefix("*.") {
            Some(rest) => format!("sample.{rest}"),
            None => h.to_owned(),
        },
    }
}

/// The `content-type` header of a gRPC call.
fn grpc_type() -> (String, String) {
    ("content-type".to_owned(), "application/grpc".to_owned())
}

/// The gRPC calls replayed for one path of a gRPC Ingress: the call it names
/// (`/pkg.Service/Method`), a method of the service it names (`/pkg.Service/Call`), a call
/// of another service, and its literal form for a path that is neither.
fn grpc_calls(path: &str) -> Vec<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let mut out = vec!["/sample.Other/Call".to_owned()];
    match parts.as_slice() {
        [] => {}
        [service] => out.push(format!("/{service}/Call")),
        [service, method] => {
            out.push(format!("/{service}/{method}"));
            out.push(format!("/{service}/Call"));
        }
        _ => out.push(path.to_owned()),
    }
    out
}

/// The edge cases of one Ingress path.
fn variants(path: &str) -> Vec<String> {
    let mut out = vec![path.to_owned()];
    let literal: String = path
        .chars()
        .filter(|c| !"^$()[]{}*+?|\\".contains(*c))
        .collect();
    let base = if literal.starts_with('/') {
        literal
    } else {
        format!("/{literal}")
    };
    if base != path {
        out.push(base.clone());
    }
    if base.len() > 1 && base.ends_with('/') {
        out.push(base.trim_end_matches('/').to_owned());
    } else {
        out.push(format!("{base}/"));
    }
    out.push(base.to_ascii_uppercase());
    out.push(format!("{}/deeper", base.trim_end_matches('/')));
    if base != "/" {
        out.push(format!("{}x", base.trim_end_matches('/')));
    }
    out.sort();
    out.dedup();
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
