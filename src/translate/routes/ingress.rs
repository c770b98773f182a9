//! Ingress: how an Ingress becomes the same compiled rules an HTTPRoute does. It is lowered to
//! an HTTPRoute (its serving Gateway as the parentRef, the union of its hosts as hostnames, one
//! rule per path and per default backend) and each lowered rule keeps the one host it serves
//! ([`HttpLike::rule_hosts`]), since an Ingress's hosts are per rule. Path types: `Exact` is
//! an exact match, `Prefix` and `ImplementationSpecific` a path prefix (ingress-nginx without
//! `use-regex`); every path of a host `prepare` marked regex is a `RegularExpression`
//! ([`crate::translate::ingress::regex`]). Pure.

use crate::kinds::httproute::HttpRoute;
use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};
use serde_json::{json, Value};

use crate::kinds::crd::traffic_policy::PolicyTargetRef;
use crate::kinds::crd::TrafficPolicy;
use crate::kinds::ingress::serving_gateway;
use crate::snapshot::namespace_of;
use crate::status::GATEWAY_GROUP;
use crate::table::CookieAttributes;
use crate::translate::ingress::annotations::{has_captures, Annotations};
use crate::translate::ingress::{alias, app_root, canary};
use crate::translate::routes::http_like::HttpLike;

pub use crate::translate::ingress::ANY_HOST;

impl HttpLike for Ingress {
    fn lower(&self) -> HttpRoute {
        lower(self)
    }

    fn rule_hosts(&self) -> Vec<String> {
        lowered_rules(self)
            .into_iter()
            .map(|(host, _)| host)
            .collect()
    }

    fn traffic_policy(&self) -> Option<TrafficPolicy> {
        traffic_policy(self)
    }

    fn reads_objects(&self) -> bool {
        Annotations::parse(self).traffic_policy().is_some_and(|s| {
            s.basic_auth.is_some() || s.external_auth.is_some() || s.error_pages.is_some()
        })
    }

    fn https_redirects(&self) -> Vec<bool> {
        https_redirects(self)
    }

    fn capture_rewrites(&self) -> Vec<bool> {
        capture_rewrites(self)
    }

    fn added_on_success(&self) -> Vec<String> {
        Annotations::parse(self).headers.added_on_success()
    }

    fn access_log_off(&self) -> bool {
        Annotations::parse(self).access_log_off
    }

    fn session_cookies(&self) -> Vec<CookieAttributes> {
        session_cookies(self)
    }

    fn backend_send_idle(&self) -> Option<std::time::Duration> {
        Annotations::parse(self).send_timeout
    }

    fn retry_within(&self) -> Option<std::time::Duration> {
        Annotations::parse(self).policy.retry_within
    }
}

/// Per lowered rule, the attributes of its affinity cookie: the annotations', with the path
/// nginx gives it when `session-cookie-path` is not set: the location's path, which is the
/// rule's `Exact` or prefix path (`/` for a regex path and for the default backend, where
/// ingress-nginx would write the regex itself). Empty when no rule has a cookie.
pub fn session_cookies(ingress: &Ingress) -> Vec<CookieAttributes> {
    let notes = Annotations::parse(ingress);
    if notes.policy.session.is_none() {
        return Vec::new();
    }
    let own = &notes.policy.cookie;
    lowered_rules(ingress)
        .iter()
        .map(|(_, r)| {
            let path = &r["matches"][0]["path"];
            let location = match path["type"].as_str() {
                Some("Exact" | "PathPrefix") => path["value"].as_str(),
                _ => None,
            };
            CookieAttributes {
                path: own
                    .path
                    .as_deref()
                    .or(location)
                    .filter(|p| *p != "/")
                    .map(str::to_owned),
                ..own.clone()
            }
        })
        .collect()
}

/// Per lowered rule, whether its `ReplaceFullPath` rewrite is `rewrite-target` on a regex
/// path: the whole path becomes the target with the path's captures (`$1`..`$9`) in it, as
/// nginx's `rewrite`. Gateway API has no such rewrite: `convert` must say so.
pub fn capture_rewrites(ingress: &Ingress) -> Vec<bool> {
    lowered_rules(ingress)
        .iter()
        .map(|(_, r)| {
            r["matches"][0]["path"]["type"] == "RegularExpression"
                && r["filters"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|f| f["urlRewrite"]["path"].is_object()))
        })
        .collect()
}

/// The TrafficPolicy the Ingress's annotations ask for ([`Annotations::traffic_policy`]), as
/// an object of the Ingress's namespace and name targeting its lowered route, for the policy
/// stage to compile like any TrafficPolicy; `None` when they ask nothing.
pub fn traffic_policy(ingress: &Ingress) -> Option<TrafficPolicy> {
    let mut spec = Annotations::parse(ingress).traffic_policy()?;
    let name = ingress.metadata.name.clone().unwrap_or_default();
    spec.target_refs = vec![PolicyTargetRef {
        group: GATEWAY_GROUP.to_owned(),
        kind: "HTTPRoute".to_owned(),
        name: name.clone(),
        section_name: None,
    }];
    let mut policy = TrafficPolicy::new(&name, spec);
    policy.metadata.namespace = Some(namespace_of(&ingress.metadata).to_owned());
    Some(policy)
}

/// Per lowered rule, whether plain HTTP requests are redirected to https
/// ([`Annotations::https_redirect`]; a host has TLS when a `tls[].hosts` entry names it).
pub fn https_redirects(ingress: &Ingress) -> Vec<bool> {
    let notes = Annotations::parse(ingress);
    let tls_hosts: Vec<&str> = ingress
        .spec
        .iter()
        .flat_map(|s| s.tls.iter().flatten())
        .flat_map(|t| t.hosts.iter().flatten())
        .map(String::as_str)
        .collect();
    lowered_rules(ingress)
        .iter()
        .map(|(host, _)| notes.https_redirect(tls_hosts.contains(&host.as_str())))
        .collect()
}

/// The HTTPRoute an Ingress's rules compile as. Should the JSON not read as an HTTPRoute
/// (it is built here from typed fields, so it does), the route keeps its metadata and
/// attaches nowhere.
pub fn lower(ingress: &Ingress) -> HttpRoute {
    let rules = lowered_rules(ingress);
    let mut hostnames: Vec<String> = rules.iter().map(|(h, _)| h.clone()).collect();
    hostnames.sort_unstable();
    hostnames.dedup();
    let parent_refs: Vec<Value> = serving_gateway(ingress)
        .map(|(namespace, name)| {
            json!({"group": "gateway.networking.k8s.io", "kind": "Gateway",
                   "namespace": namespace, "name": name})
        })
        .into_iter()
        .collect();
    let rules: Vec<Value> = rules.into_iter().map(|(_, r)| r).collect();
    let spec = json!({"parentRefs": parent_refs, "hostnames": hostnames, "rules": rules});
    HttpRoute {
        metadata: ingress.metadata.clone(),
        spec: serde_json::from_value(spec).unwrap_or_default(),
        status: None,
    }
}

/// The lowered rules in order, each with the host that serves it: every path of every rule,
/// then the default backend on each of the Ingress's hosts (on every host when it has none),
/// which, as a `/` prefix, yields to every other path. The ingress-nginx annotations add their
/// filters and timeouts to each rule, and `app-root` an exact `/` redirect on each host where
/// the Ingress holds a location ([`app_root`]).
pub fn lowered_rules(ingress: &Ingress) -> Vec<(String, Value)> {
    let Some(spec) = ingress.spec.as_ref() else {
        return Vec::new();
    };
    let notes = Annotations::parse(ingress);
    let canaries = canary::of(ingress);
    let own_ns = namespace_of(&ingress.metadata);
    let mut out = Vec::new();
    let mut hosts: Vec<String> = Vec::new();
    for rule in spec.rules.iter().flatten() {
        let host = match rule.host.as_deref() {
            Some(h) if !h.is_empty() => h.to_owned(),
            _ => ANY_HOST.to_owned(),
        };
        if !hosts.contains(&host) {
            hosts.push(host.clone());
        }
        // The host's server-level snippet, when it has one.
        let for_host = notes.for_host(&host);
        let notes = for_host.as_ref().unwrap_or(&notes);
        let regex = notes.regex_for(&host);
        for path in rule.http.iter().flat_map(|h| h.paths.iter()) {
            let value = path.path.as_deref().unwrap_or("/");
            let kind = match path.path_type.as_str() {
                _ if regex.is_some() => "RegularExpression",
                "Exact" => "Exact",
                _ => "PathPrefix",
            };
            let m = match regex {
                Some(mode) => json!({"path": {"type": kind, "value": mode.pattern(value)}}),
                None => json!({"path": {"type": kind, "value": value}}),
            };
            let mut rule = rule_of(Some(m.clone()), &path.backend);
            // A regex path's rewrite replaces the whole path (nginx's `rewrite`), unless the
            // target is the path itself; captures mean nothing on a plain path.
            let target = notes.rewrite_target.as_deref();
            let keep = match target {
                Some(t) if regex.is_some() => t != value,
                Some(t) => !has_captures(t),
                None => true,
            };
            let plain;
            let here = if keep {
                notes
            } else {
                plain = Annotations {
                    rewrite_target: None,
                    ..notes.clone()
                };
                &plain
            };
            let exact = Some(kind != "PathPrefix");
            annotate(&mut rule, here, exact);
            // A canary folded onto this path: its header and cookie rules first, then the
            // path's own rule with the weights.
            if let Some(c) = canaries.iter().find(|c| c.host == host && c.path == value) {
                for (header, to_canary) in c.rules() {
                    let mut m = m.clone();
                    m["headers"] = json!([header]);
                    let mut extra = if to_canary {
                        canary_rule(Some(m), c, own_ns)
                    } else {
                        rule_of(Some(m), &path.backend)
                    };
                    annotate(&mut extra, here, exact);
                    out.push((host.clone(), extra));
                }
                if let Some((main, canary)) = c.weights() {
                    let mut refs = rule["backendRefs"].clone();
                    let theirs = canary_rule(None, c, own_ns)["backendRefs"].clone();
                    if let (Some(a), Some(b)) = (refs.get_mut(0), theirs.get(0)) {
                        a["weight"] = json!(main);
                        let mut b = b.clone();
                        b["weight"] = json!(canary);
                        rule["backendRefs"] = json!([a, b]);
                    }
                }
            }
            out.push((host.clone(), rule));
        }
    }
    // `app-root` redirects `/` of the hosts `prepare` chose; an Ingress alone, every host of
    // its rules.
    let root_hosts = app_root::hosts(ingress).unwrap_or_else(|| hosts.clone());
    if let Some(backend) = &spec.default_backend {
        if hosts.is_empty() {
            hosts.push(ANY_HOST.to_owned());
        }
        for host in &hosts {
            let mut rule = rule_of(None, backend);
            let for_host = notes.for_host(host);
            annotate(&mut rule, for_host.as_ref().unwrap_or(&notes), None);
            out.push((host.clone(), rule));
        }
    }
    // from-to-www-redirect: the other name of each host answers 308 to the host.
    for (from, to) in alias::www_pairs(ingress) {
        let redirect = json!({"statusCode": 308, "hostname": to});
        out.push((
            from,
            json!({"filters": [{"type": "RequestRedirect", "requestRedirect": redirect}]}),
        ));
    }
    if let (Some(root), false) = (&notes.app_root, notes.redirects()) {
        for host in &root_hosts {
            let redirect = json!({"statusCode": 302,
                "path": {"type": "ReplaceFullPath", "replaceFullPath": root}});
            out.push((
                host.clone(),
                json!({
                "matches": [{"path": {"type": "Exact", "value": "/"}}],
                "filters": [{"type": "RequestRedirect", "requestRedirect": redirect}]}),
            ));
        }
    }
    out
}

/// Adds the annotations' filters and timeouts to one lowered rule.
fn annotate(rule: &mut Value, notes: &Annotations, exact: Option<bool>) {
    let filters = notes.filters(exact);
    if !filters.is_empty() {
        rule["filters"] = json!(filters);
    }
    if let Some(t) = notes.timeouts() {
        rule["timeouts"] = t;
    }
    if let Some(session) = &notes.policy.session {
        rule["sessionPersistence"] = session.clone();
    }
    if let Some(retry) = &notes.policy.retry {
        rule["retry"] = retry.clone();
    }
}

/// The rule of a folded canary's backend: [`rule_of`], its backendRef naming the canary's
/// namespace when it is not the main Ingress's (`own_ns`). Resolution serves it without a
/// ReferenceGrant, as ingress-nginx does: an Ingress's own backends never name a namespace.
fn canary_rule(matches: Option<Value>, canary: &canary::Canary, own_ns: &str) -> Value {
    let mut rule = rule_of(matches, &canary.backend);
    let ns = canary.namespace();
    if ns != own_ns {
        if let Some(r) = rule["backendRefs"].get_mut(0) {
            r["namespace"] = json!(ns);
        }
    }
    rule
}

/// One lowered rule: `matches` (absent: every request) and the backend. A resource backend
/// becomes a backendRef of its kind, which resolution refuses with its reason.
fn rule_of(matches: Option<Value>, backend: &IngressBackend) -> Value {
    let backend_ref = if let Some(s) = &backend.service {
        let port = s.port.as_ref().and_then(|p| p.number);
        Some(json!({"name": s.name, "port": port}))
    } else {
        backend.resource.as_ref().map(|r| {
            json!({"group": r.api_group.clone().unwrap_or_default(), "kind": r.kind,
                   "name": r.name})
        })
    };
    let mut rule = json!({"backendRefs": backend_ref.into_iter().collect::<Vec<_>>()});
    if let Some(m) = matches {
        rule["matches"] = json!([m]);
    }
    rule
}

#[cfg(test)]
#[path = "ingress_tests.rs"]
mod tests;
