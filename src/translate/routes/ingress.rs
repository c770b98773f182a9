//! Ingress: how an Ingress becomes the same compiled rules an HTTPRoute does. It is lowered to
//! an HTTPRoute (its serving Gateway as the parentRef, the union of its hosts as hostnames, one
//! rule per path and per default backend) and each lowered rule keeps the one host it serves
//! ([`HttpLike::rule_hosts`]), since an Ingress's hosts are per rule. Path types: `Exact` is
//! an exact match, `Prefix` and `ImplementationSpecific` a path prefix (ingress-nginx without
//! `use-regex`); every path of a host `prepare` marked regex is a `RegularExpression`
//! ([`crate::translate::ingress::regex`]). Pure.

use gateway_api::apis::experimental::httproutes::HttpRoute;
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
    fn the_affinity_cookie_takes_each_rules_path_unless_one_is_set() {
        let svc = json!({"service": {"name": "s", "port": {"number": 80}}});
        let spec = json!({
            "defaultBackend": svc,
            "rules": [{"host": "a.test", "http": {"paths": [
                {"path": "/api", "pathType": "Prefix", "backend": svc},
                {"path": "/x", "pathType": "Exact", "backend": svc},
                {"path": "/", "pathType": "Prefix", "backend": svc}]}}],
        });
        let with = |notes: Value| -> Ingress {
            let mut i = ingress(spec.clone());
            let all = i.metadata.annotations.get_or_insert_with(Default::default);
            for (k, v) in notes.as_object().into_iter().flatten() {
                all.insert(
                    format!("nginx.ingress.kubernetes.io/{k}"),
                    v.as_str().unwrap_or_default().to_owned(),
                );
            }
            i
        };
        assert!(session_cookies(&with(json!({}))).is_empty());
        let plain = session_cookies(&with(json!({"affinity": "cookie",
            "session-cookie-secure": "true"})));
        let paths: Vec<Option<&str>> = plain.iter().map(|c| c.path.as_deref()).collect();
        assert_eq!(paths, [Some("/api"), Some("/x"), None, None]);
        assert!(plain.iter().all(|c| c.secure));
        let set = session_cookies(&with(json!({"affinity": "cookie",
            "session-cookie-path": "/app"})));
        assert!(set.iter().all(|c| c.path.as_deref() == Some("/app")));
    }

    #[test]
    fn app_root_redirects_the_hosts_prepare_chose() {
        let svc = json!({"service": {"name": "s", "port": {"number": 80}}});
        let mut i = ingress(json!({
            "rules": [
                {"host": "a.test", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix", "backend": svc}]}},
                {"host": "b.test", "http": {"paths": [
                    {"path": "/app", "pathType": "Prefix", "backend": svc}]}},
            ],
        }));
        let notes = i.metadata.annotations.get_or_insert_with(Default::default);
        notes.insert("nginx.ingress.kubernetes.io/app-root".into(), "/app".into());
        let redirects = |i: &Ingress| -> Vec<String> {
            lowered_rules(i)
                .into_iter()
                .filter(|(_, r)| r["filters"][0]["requestRedirect"].is_object())
                .map(|(h, _)| h)
                .collect()
        };
        // Alone on its hosts, the Ingress holds every location of them (ingress-nginx's
        // redirect is server-wide): `/` of b.test is redirected too.
        assert_eq!(redirects(&i), ["a.test", "b.test"]);
        let notes = i.metadata.annotations.get_or_insert_with(Default::default);
        notes.insert(app_root::HOSTS.into(), json!(["b.test"]).to_string());
        assert_eq!(redirects(&i), ["b.test"]);
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
    fn a_folded_canary_lowers_to_header_rules_then_weights() {
        use crate::translate::ingress::canary::{Canary, Split, CANARIES};
        let svc = |name: &str| json!({"service": {"name": name, "port": {"number": 80}}});
        let mut i = ingress(json!({"rules": [{"host": "a.test", "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": svc("old")}]}}]}));
        let canary = Canary {
            from: "ns/c".into(),
            host: "a.test".into(),
            path: "/".into(),
            backend: serde_json::from_value(svc("new")).expect("backend"),
            split: Split {
                header: Some("x-canary".into()),
                weight: Some(30),
                total: 100,
                ..Split::default()
            },
        };
        i.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(CANARIES.into(), json!([canary]).to_string());
        let rules = lowered_rules(&i);
        assert_eq!(rules.len(), 3);
        assert_eq!(
            rules[0].1["matches"][0]["headers"],
            json!([{"name": "x-canary", "type": "Exact", "value": "always"}])
        );
        assert_eq!(rules[0].1["backendRefs"][0]["name"], "new");
        assert_eq!(rules[1].1["backendRefs"][0]["name"], "old");
        assert_eq!(
            rules[2].1["backendRefs"],
            json!([{"name": "old", "port": 80, "weight": 70}, {"name": "new", "port": 80, "weight": 30}])
        );
        // A canary of another namespace: its backendRefs name that namespace.
        let canary = Canary {
            from: "canaries/c".into(),
            ..canary
        };
        i.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(CANARIES.into(), json!([canary]).to_string());
        let rules = lowered_rules(&i);
        assert_eq!(
            rules[0].1["backendRefs"],
            json!([{"name": "new", "port": 80, "namespace": "canaries"}])
        );
        assert_eq!(
            rules[1].1["backendRefs"],
            json!([{"name": "old", "port": 80}])
        );
        assert_eq!(
            rules[2].1["backendRefs"][1],
            json!({"name": "new", "port": 80, "weight": 30, "namespace": "canaries"})
        );
    }

    #[test]
    fn a_resource_backend_keeps_its_kind_for_resolution_to_refuse() {
        let i = ingress(json!({"defaultBackend": {"resource": {"kind": "Bucket", "name": "b"}}}));
        let spec = serde_json::to_value(&lower(&i).spec).expect("spec");
        assert_eq!(spec["rules"][0]["backendRefs"][0]["kind"], "Bucket");
        assert_eq!(spec["hostnames"], json!(["*"]));
    }
}
