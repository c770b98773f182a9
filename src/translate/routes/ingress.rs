//! Ingress: how an Ingress becomes the same compiled rules an HTTPRoute does. It is lowered to
//! an HTTPRoute (its serving Gateway as the parentRef, the union of its hosts as hostnames, one
//! rule per path and per default backend) and each lowered rule keeps the one host it serves
//! ([`HttpLike::rule_hosts`]), since an Ingress's hosts are per rule. Path types: `Exact` is
//! an exact match, `Prefix` and `ImplementationSpecific` a path prefix (ingress-nginx without
//! `use-regex`). Pure.

use gateway_api::apis::experimental::httproutes::HttpRoute;
use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};
use serde_json::{json, Value};

use crate::kinds::crd::traffic_policy::PolicyTargetRef;
use crate::kinds::crd::TrafficPolicy;
use crate::kinds::ingress::serving_gateway;
use crate::snapshot::namespace_of;
use crate::status::GATEWAY_GROUP;
use crate::translate::ingress::annotations::Annotations;
use crate::translate::routes::http_like::HttpLike;

/// The host of Ingress rules without one: the catch-all virtual host.
pub const ANY_HOST: &str = "*";

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
        Annotations::parse(self)
            .traffic_policy()
            .is_some_and(|s| s.basic_auth.is_some() || s.external_auth.is_some())
    }

    fn https_redirects(&self) -> Vec<bool> {
        https_redirects(self)
    }
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
/// filters and timeouts to each rule, and `app-root` an exact `/` redirect on each host.
pub fn lowered_rules(ingress: &Ingress) -> Vec<(String, Value)> {
    let Some(spec) = ingress.spec.as_ref() else {
        return Vec::new();
    };
    let notes = Annotations::parse(ingress);
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
        for path in rule.http.iter().flat_map(|h| h.paths.iter()) {
            let value = path.path.as_deref().unwrap_or("/");
            let kind = match path.path_type.as_str() {
                "Exact" => "Exact",
                _ => "PathPrefix",
            };
            let m = json!({"path": {"type": kind, "value": value}});
            let mut rule = rule_of(Some(m), &path.backend);
            annotate(&mut rule, &notes, Some(kind == "Exact"));
            out.push((host.clone(), rule));
        }
    }
    if let Some(backend) = &spec.default_backend {
        if hosts.is_empty() {
            hosts.push(ANY_HOST.to_owned());
        }
        for host in &hosts {
            let mut rule = rule_of(None, backend);
            annotate(&mut rule, &notes, None);
            out.push((host.clone(), rule));
        }
    }
    if let (Some(root), false) = (&notes.app_root, notes.redirects()) {
        for host in &hosts {
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
mod tests {
    use k8s_openapi::api::networking::v1::Ingress;

    use super::*;

    fn ingress(spec: serde_json::Value) -> Ingress {
        serde_json::from_value(json!({
            "metadata": {"name": "i", "namespace": "ns",
                         "annotations": {"edgeplane.dev/serving-gateway": "gns/gw"}},
            "spec": spec,
        }))
        .expect("Ingress")
    }

    #[test]
    fn rules_paths_and_default_backend_lower_in_order_with_their_hosts() {
        let svc = json!({"service": {"name": "s", "port": {"number": 80}}});
        let i = ingress(json!({
            "defaultBackend": svc,
            "rules": [
                {"host": "a.test", "http": {"paths": [
                    {"path": "/x", "pathType": "Exact", "backend": svc},
                    {"path": "/y", "pathType": "ImplementationSpecific", "backend": svc}]}},
                {"http": {"paths": [{"pathType": "Prefix", "backend": svc}]}},
            ],
        }));
        let hosts = i.rule_hosts();
        assert_eq!(hosts, ["a.test", "a.test", "*", "a.test", "*"]);
        let route = lower(&i);
        let spec = serde_json::to_value(&route.spec).expect("spec");
        assert_eq!(spec["hostnames"], json!(["*", "a.test"]));
        assert_eq!(spec["parentRefs"][0]["name"], "gw");
        assert_eq!(spec["parentRefs"][0]["namespace"], "gns");
        let rules = spec["rules"].as_array().expect("rules");
        assert_eq!(rules.len(), 5);
        assert_eq!(
            rules[0]["matches"][0]["path"],
            json!({"type": "Exact", "value": "/x"})
        );
        assert_eq!(
            rules[1]["matches"][0]["path"],
            json!({"type": "PathPrefix", "value": "/y"})
        );
        assert_eq!(
            rules[2]["matches"][0]["path"],
            json!({"type": "PathPrefix", "value": "/"})
        );
        assert!(rules[3].get("matches").is_none());
        assert_eq!(rules[3]["backendRefs"][0]["port"], 80);
        assert_eq!(lowered_rules(&i).len(), 5);
    }

    #[test]
    fn annotations_add_filters_timeouts_and_the_app_root_redirect() {
        let svc = json!({"service": {"name": "s", "port": {"number": 80}}});
        let mut i = ingress(json!({
            "defaultBackend": svc,
            "rules": [{"host": "a.test", "http": {"paths": [
                {"path": "/x", "pathType": "Prefix", "backend": svc}]}}],
        }));
        let notes = i.metadata.annotations.get_or_insert_with(Default::default);
        for (k, v) in [
            ("rewrite-target", "/y"),
            ("app-root", "/app"),
            ("proxy-read-timeout", "1"),
        ] {
            notes.insert(format!("nginx.ingress.kubernetes.io/{k}"), v.to_owned());
        }
        assert_eq!(i.rule_hosts(), ["a.test", "a.test", "a.test"]);
        let spec = serde_json::to_value(&lower(&i).spec).expect("spec");
        let rules = spec["rules"].as_array().expect("rules");
        assert_eq!(
            rules[0]["filters"][0]["urlRewrite"]["path"],
            json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/y"})
        );
        assert_eq!(rules[0]["timeouts"]["backendRequest"], "6s");
        // The default backend keeps its path, with the timeout.
        assert!(rules[1].get("filters").is_none());
        assert_eq!(rules[1]["timeouts"]["backendRequest"], "6s");
        assert_eq!(
            rules[2]["matches"][0]["path"],
            json!({"type": "Exact", "value": "/"})
        );
        assert_eq!(
            rules[2]["filters"][0]["requestRedirect"],
            json!({"statusCode": 302, "path": {"type": "ReplaceFullPath", "replaceFullPath": "/app"}})
        );
    }

    #[test]
    fn https_redirects_follow_the_tls_hosts_and_the_annotations() {
        let svc = json!({"service": {"name": "s", "port": {"number": 80}}});
        let paths = json!({"paths": [{"path": "/", "pathType": "Prefix", "backend": svc}]});
        let mut i = ingress(json!({
            "tls": [{"hosts": ["a.test"], "secretName": "t"}],
            "rules": [{"host": "a.test", "http": paths}, {"host": "b.test", "http": paths}],
        }));
        assert_eq!(https_redirects(&i), [true, false]);
        let notes = i.metadata.annotations.get_or_insert_with(Default::default);
        notes.insert(
            "nginx.ingress.kubernetes.io/force-ssl-redirect".into(),
            "true".into(),
        );
        assert_eq!(i.https_redirects(), [true, true]);
        let notes = i.metadata.annotations.get_or_insert_with(Default::default);
        notes.insert(
            "nginx.ingress.kubernetes.io/force-ssl-redirect".into(),
            "false".into(),
        );
        notes.insert(
            "nginx.ingress.kubernetes.io/ssl-redirect".into(),
            "false".into(),
        );
        assert_eq!(https_redirects(&i), [false, false]);
    }

    #[test]
    fn a_resource_backend_keeps_its_kind_for_resolution_to_refuse() {
        let i = ingress(json!({"defaultBackend": {"resource": {"kind": "Bucket", "name": "b"}}}));
        let spec = serde_json::to_value(&lower(&i).spec).expect("spec");
        assert_eq!(spec["rules"][0]["backendRefs"][0]["kind"], "Bucket");
        assert_eq!(spec["hostnames"], json!(["*"]));
    }
}
