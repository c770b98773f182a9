//! An Ingress lowered: rules, paths and default backend in order with their hosts, the
//! annotations' filters, affinity cookies, app-root and https redirects, folded canaries.

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
