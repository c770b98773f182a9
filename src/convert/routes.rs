//! The written HTTPRoutes and TrafficPolicies of one prepared Ingress. Its lowered rules
//! ([`lowered`]) are grouped by the host each serves, one HTTPRoute per host (named after
//! the Ingress, plus the host when it has several; a GRPCRoute when [`super::grpc`] says so),
//! attached to the listeners of its IngressClass's Gateway that serve the host (past 32
//! listeners, the most `parentRefs` a route takes, the same rules again as `<route>-2`,
//! `<route>-3`, ...). A host whose plain HTTP requests are redirected to https
//! (`ssl-redirect`, `force-ssl-redirect`) gets two: one on listener `http` answering 308 to
//! https, and one on the HTTPS listeners serving the host. What the annotations ask of a
//! TrafficPolicy ([`Annotations::traffic_policy`]) becomes one targeting every HTTPRoute of
//! the Ingress, and verified backend TLS (`proxy-ssl-*`) a BackendTLSPolicy. Pure.

use std::collections::BTreeSet;
use std::sync::Arc;

use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use super::gateway::{Gateways, Listener};
use super::names::{host_part, joined};
use crate::admission::MAX_PARENT_REFS;
use crate::kinds::ingress::serving_gateway;
use crate::snapshot::namespace_of;
use crate::translate::ingress::annotations::Annotations;
use crate::translate::ingress::upstream;
use crate::translate::lowered::lowered;

/// Annotation of every written route and policy: the Ingress it was converted from.
pub const CONVERTED_FROM: &str = "edgeplane.dev/converted-from";

/// A TrafficPolicy names at most this many targets.
const MAX_TARGETS: usize = 16;

/// What one Ingress was written as.
#[derive(Debug, Default)]
pub struct Written {
    pub objects: Vec<Value>,
    /// `Kind namespace/name` of each object.
    pub names: Vec<String>,
}

/// The rules of one host: their indices in the lowered route, and whether plain HTTP
/// requests for them are redirected to https.
struct HostRules {
    host: String,
    https_redirect: bool,
    rules: Vec<usize>,
}

/// The HTTPRoutes (GRPCRoutes when `grpc`: see [`super::grpc`]) and TrafficPolicies of the
/// prepared Ingress `ingress`.
pub fn write(ingress: &Ingress, gateways: &Gateways, grpc: bool) -> Written {
    let mut out = Written::default();
    let ns = namespace_of(&ingress.metadata).to_owned();
    let name = ingress.metadata.name.clone().unwrap_or_default();
    let from = format!("Ingress/{ns}/{name}");
    let class = serving_gateway(ingress).map(|(_, class)| class.to_owned());
    let Some((gateway, listeners)) = class.as_deref().and_then(|c| gateways.of(c)) else {
        return out;
    };
    let low = lowered(ingress);
    let rules: Vec<Value> = low
        .route
        .spec
        .rules
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            let rule = without_unused_backends(serde_json::to_value(r).unwrap_or_default());
            match low.capture_rewrites.get(i) {
                Some(true) => without_path_rewrite(rule),
                _ => rule,
            }
        })
        .collect();
    let mut groups: Vec<HostRules> = Vec::new();
    for (i, host) in low.rule_hosts.iter().enumerate() {
        let redirect = low.https_redirects.get(i).copied().unwrap_or(false);
        match groups
            .iter_mut()
            .find(|g| &g.host == host && g.https_redirect == redirect)
        {
            Some(g) => g.rules.push(i),
            None => groups.push(HostRules {
                host: host.clone(),
                https_redirect: redirect,
                rules: vec![i],
            }),
        }
    }
    let hosts: BTreeSet<&str> = groups.iter().map(|g| g.host.as_str()).collect();
    let mut used = BTreeSet::new();
    let mut routes = Vec::new();
    for group in &groups {
        let mut base = if hosts.len() == 1 {
            name.clone()
        } else {
            joined(&name, &host_part(&group.host))
        };
        while !used.insert(base.clone()) {
            base = joined(&base, "more");
        }
        let chosen: Vec<Value> = group
            .rules
            .iter()
            .filter_map(|i| rules.get(*i))
            .cloned()
            .collect();
        let serving: Vec<&Listener> = listeners
            .iter()
            .filter(|l| !l.passthrough)
            .filter(|l| serves(l.hostname.as_deref(), &group.host, &low.rule_hosts))
            .filter(|l| l.https || !group.https_redirect)
            .collect();
        if group.https_redirect {
            let redirects: Vec<Value> = chosen.iter().map(to_https).collect();
            let parents = vec![gateway.reference(&ns, Some("http"))];
            let redirect_name = joined(&base, "https-redirect");
            used.insert(redirect_name.clone());
            routes.push(route(
                &redirect_name,
                &ns,
                &from,
                parents,
                &group.host,
                &redirects,
            ));
        }
        let parents: Vec<Value> = serving
            .iter()
            .map(|l| l.parent.reference(&ns, Some(&l.name)))
            .collect();
        // A route takes at most MAX_PARENT_REFS parents: past that, the same rules are
        // written again as `<name>-2`, `<name>-3`, ... for the next listeners.
        for (n, chunk) in parents.chunks(MAX_PARENT_REFS).enumerate() {
            let mut part = base.clone();
            if n > 0 {
                part = joined(&base, &(n + 1).to_string());
                while !used.insert(part.clone()) {
                    part = joined(&part, "more");
                }
            }
            let mut written = route(&part, &ns, &from, chunk.to_vec(), &group.host, &chosen);
            if grpc {
                if let Ok(rules) = super::grpc::rules(&chosen) {
                    written["kind"] = json!("GRPCRoute");
                    written["spec"]["rules"] = json!(rules);
                }
            }
            routes.push(written);
        }
    }
    // Only HTTPRoutes: an Ingress with a TrafficPolicy is never written as GRPCRoutes.
    let targets: Vec<Value> = routes
        .iter()
        .filter(|r| r["kind"] == "HTTPRoute")
        .map(|r| {
            json!({"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                        "name": r["metadata"]["name"]})
        })
        .collect();
    for r in routes {
        out.names.push(format!(
            "{} {ns}/{}",
            r["kind"].as_str().unwrap_or("HTTPRoute"),
            r["metadata"]["name"].as_str().unwrap_or("")
        ));
        out.objects.push(r);
    }
    if let Some(spec) = Annotations::parse(ingress).traffic_policy() {
        for (i, chunk) in targets.chunks(MAX_TARGETS).enumerate() {
            let mut spec = serde_json::to_value(&spec).unwrap_or_default();
            spec["targetRefs"] = json!(chunk);
            let policy = if i == 0 {
                name.clone()
            } else {
                joined(&name, &(i + 1).to_string())
            };
            out.names.push(format!("TrafficPolicy {ns}/{policy}"));
            out.objects.push(json!({
                "apiVersion": "edgeplane.dev/v1beta1", "kind": "TrafficPolicy",
                "metadata": {"name": policy, "namespace": ns,
                             "annotations": {CONVERTED_FROM: from}},
                "spec": spec,
            }));
        }
    }
    out
}

/// Adds to `out` the BackendTLSPolicy of the prepared Ingress `ingress` (`backend-protocol`
/// HTTPS or GRPCS with `proxy-ssl-*`) from the one serving makes for it (among `policies`),
/// when Gateway API can say it: with `proxy-ssl-verify: "on"` (a BackendTLSPolicy always
/// verifies the backend's certificate; the report says what is not written).
pub fn add_backend_tls(out: &mut Written, ingress: &Ingress, policies: &[Arc<BackendTlsPolicy>]) {
    let ns = namespace_of(&ingress.metadata);
    let name = ingress.metadata.name.clone().unwrap_or_default();
    let made = format!("{}{name}", upstream::MADE_PREFIX);
    let ours = policies.iter().find(|p| {
        upstream::is_made(p)
            && namespace_of(&p.metadata) == ns
            && p.metadata.name.as_deref() == Some(&made)
    });
    let Some(spec) = ours.and_then(|p| upstream::convertible(p)) else {
        return;
    };
    let policy = joined(&name, "backend-tls");
    out.names.push(format!("BackendTLSPolicy {ns}/{policy}"));
    out.objects.push(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
        "metadata": {"name": policy, "namespace": ns,
                     "annotations": {CONVERTED_FROM: format!("Ingress/{ns}/{name}")}},
        "spec": spec,
    }));
}

/// Adds to `out` the TrafficPolicy of `upstream-hash-by`: consistent hashing of the Services the
/// Ingress reaches (a Service-wide setting, as serving applies it).
pub fn add_balance(out: &mut Written, ingress: &Ingress) {
    let Some(hash) = Annotations::parse(ingress).upstream.hash else {
        return;
    };
    let ns = namespace_of(&ingress.metadata);
    let name = ingress.metadata.name.clone().unwrap_or_default();
    let targets: Vec<Value> = upstream::services(ingress)
        .into_iter()
        .map(|s| json!({"group": "", "kind": "Service", "name": s}))
        .collect();
    if targets.is_empty() {
        return;
    }
    let policy = joined(&name, "balance");
    out.names.push(format!("TrafficPolicy {ns}/{policy}"));
    out.objects.push(json!({
        "apiVersion": "edgeplane.dev/v1beta1", "kind": "TrafficPolicy",
        "metadata": {"name": policy, "namespace": ns,
                     "annotations": {CONVERTED_FROM: format!("Ingress/{ns}/{name}")}},
        "spec": {"targetRefs": targets, "loadBalancer": upstream::load_balancer(&hash)},
    }));
}

/// `rule` without its path rewrite when it uses captures: a `rewrite-target` with them has no Gateway
/// API form (the lowered rule carries the template only for the Ingress's own serving), so the
/// converted rule forwards the path unchanged and the report says so.
fn without_path_rewrite(mut rule: Value) -> Value {
    if let Some(filters) = rule.get_mut("filters").and_then(Value::as_array_mut) {
        for f in filters.iter_mut() {
            let rewrite = f.get_mut("urlRewrite").and_then(Value::as_object_mut);
            // A template without captures is a plain full-path replacement.
            if let Some(rewrite) = rewrite.filter(|r| {
                r.get("path")
                    .and_then(|p| p["replaceFullPath"].as_str())
                    .is_some_and(|p| p.contains('$'))
            }) {
                rewrite.remove("path");
            }
        }
        filters.retain(|f| {
            f["type"] != "URLRewrite" || f["urlRewrite"].as_object().is_some_and(|r| !r.is_empty())
        });
    }
    rule
}

/// One HTTPRoute; the host `*` is written as no hostnames (any host).
fn route(
    name: &str,
    ns: &str,
    from: &str,
    parents: Vec<Value>,
    host: &str,
    rules: &[Value],
) -> Value {
    let mut spec = json!({"parentRefs": parents});
    if host != "*" {
        spec["hostnames"] = json!([host]);
    }
    spec["rules"] = json!(rules);
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": ns, "annotations": {CONVERTED_FROM: from}},
        "spec": spec,
    })
}

/// Whether a listener of `listener` hostname (`None`: any) serves the Ingress rules of `host`
/// as serving does: rules without host only where the listener names no hostname; a wildcard
/// host also on a listener of a host it covers that no rule of the Ingress names; a host on a
/// listener of it or of a wildcard covering it.
fn serves(listener: Option<&str>, host: &str, ingress_hosts: &[String]) -> bool {
    let Some(l) = listener else {
        return true;
    };
    let covered = |wild: &str, name: &str| {
        wild.strip_prefix('*')
            .is_some_and(|s| !s.is_empty() && name.len() > s.len() && name.ends_with(s))
    };
    if host == "*" {
        return false;
    }
    l == host
        || (covered(host, l) && !l.starts_with('*') && !ingress_hosts.iter().any(|h| h == l))
        || (covered(l, host) && !host.starts_with('*'))
}

/// A rule answering with a redirect never reaches its backends, and Gateway API refuses a
/// rule with both: its backendRefs are left out.
fn without_unused_backends(mut rule: Value) -> Value {
    let redirects = rule["filters"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f["type"] == "RequestRedirect"));
    if let (true, Some(m)) = (redirects, rule.as_object_mut()) {
        m.remove("backendRefs");
    }
    rule
}

/// The rule of the `http` listener for a rule whose plain HTTP requests go to https: its
/// matches, answered with 308 to the same URL on https.
fn to_https(rule: &Value) -> Value {
    let mut out = json!({"filters": [{"type": "RequestRedirect",
        "requestRedirect": {"scheme": "https", "statusCode": 308}}]});
    if let Some(m) = rule.get("matches") {
        out["matches"] = m.clone();
    }
    out
}
