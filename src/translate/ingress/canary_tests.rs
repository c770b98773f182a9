//! Canary folding: which main Ingress takes a canary path, what is reported, and the rules
//! and weights a folded canary lowers to.

use serde_json::json;

use super::*;

fn ingress(
    name: &str,
    ns: &str,
    created: &str,
    notes: &[(&str, &str)],
    paths: &[(&str, &str, &str)],
) -> Ingress {
    let notes: serde_json::Map<String, Value> = notes
        .iter()
        .map(|(k, v)| (format!("{NGINX_PREFIX}{k}"), json!(v)))
        .collect();
    let rules: Vec<Value> = paths
        .iter()
        .map(|(host, path, svc)| {
            json!({"host": host, "http": {"paths": [{"path": path, "pathType": "Prefix",
                "backend": {"service": {"name": svc, "port": {"number": 80}}}}]}})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": created,
                     "annotations": notes},
        "spec": {"rules": rules}}))
    .expect("Ingress")
}

const OLD: &str = "2024-01-01T00:00:00Z";
const NEW: &str = "2025-01-01T00:00:00Z";

#[test]
fn a_canary_folds_into_the_oldest_main_ingress_of_its_host_and_path() {
    let canary = ingress(
        "c",
        "ns",
        OLD,
        &[
            ("canary", "true"),
            ("canary-by-header", "x-canary"),
            ("canary-weight", "30"),
            ("rewrite-target", "/x"),
        ],
        &[("a.test", "/", "new"), ("a.test", "/none", "new")],
    );
    let newer = ingress("main2", "ns", NEW, &[], &[("a.test", "/", "old")]);
    let main = ingress("main", "ns", OLD, &[], &[("a.test", "/", "old")]);
    let mut copies: Vec<Copy<'_>> = [canary, newer, main]
        .into_iter()
        .map(|i| ("k", i, Vec::new()))
        .collect();
    fold(&mut copies);
    let folded = of(&copies[2].1);
    assert_eq!(folded.len(), 1);
    assert_eq!(folded[0].from, "ns/c");
    assert_eq!(folded[0].namespace(), "ns");
    assert_eq!(
        (folded[0].host.as_str(), folded[0].path.as_str()),
        ("a.test", "/")
    );
    assert_eq!(folded[0].weights(), Some((70, 30)));
    assert!(of(&copies[1].1).is_empty());
    // The canary serves nothing itself; its path without a main Ingress is reported.
    assert!(copies[0].1.spec.as_ref().is_some_and(|s| s.rules.is_none()));
    assert_eq!(copies[0].2.len(), 2, "{:?}", copies[0].2);
    assert!(copies[0].2[0].contains("rewrite-target is not applied"));
    assert!(
        copies[0].2[1].contains("a.test/none: no Ingress of the class serves it"),
        "{:?}",
        copies[0].2
    );
}

#[test]
fn a_canary_folds_into_a_main_ingress_of_another_namespace() {
    let canary = ingress(
        "c",
        "canaries",
        OLD,
        &[("canary", "true"), ("canary-weight", "100")],
        &[("a.test", "/", "new"), ("b.test", "/", "new")],
    );
    // The oldest main Ingress of the path wins whatever its namespace, as in ingress-nginx.
    let same_ns_newer = ingress("main", "canaries", NEW, &[], &[("a.test", "/", "old")]);
    let other_older = ingress("main", "shop", OLD, &[], &[("a.test", "/", "old")]);
    let other_class = ingress("b", "web", OLD, &[], &[("b.test", "/", "old")]);
    let mut copies: Vec<Copy<'_>> = vec![
        ("k", canary, Vec::new()),
        ("k", same_ns_newer, Vec::new()),
        ("k", other_older, Vec::new()),
        ("other", other_class, Vec::new()),
    ];
    // A canary annotation written by hand on an Ingress is dropped, not trusted.
    copies[3]
        .1
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(CANARIES.to_owned(), json!([{"from": "x/y"}]).to_string());
    fold(&mut copies);
    assert!(of(&copies[1].1).is_empty());
    let folded = of(&copies[2].1);
    assert_eq!(folded.len(), 1, "{folded:?}");
    assert_eq!(folded[0].namespace(), "canaries");
    assert_eq!(folded[0].weights(), Some((0, 100)));
    let svc = folded[0].backend.service.as_ref().map(|s| s.name.as_str());
    assert_eq!(svc, Some("new"));
    // Only Ingresses of the canary's class take it.
    assert!(of(&copies[3].1).is_empty());
    assert_eq!(copies[0].2.len(), 1, "{:?}", copies[0].2);
    assert!(copies[0].2[0].contains("b.test/: no Ingress of the class serves it"));
}

#[test]
fn split_rules_follow_ingress_nginx_precedence() {
    let split = |notes: &[(&str, &str)]| {
        let mut problems = Vec::new();
        let mut all = vec![("canary", "true")];
        all.extend_from_slice(notes);
        let s = Split::parse(&ingress("c", "ns", OLD, &all, &[]), &mut problems);
        (s, problems)
    };
    let canary = |s: Split| Canary {
        from: "ns/c".into(),
        host: "a".into(),
        path: "/".into(),
        backend: IngressBackend::default(),
        split: s,
    };
    // A value wins over a pattern; no never rule then; the cookie after the header.
    let (s, p) = split(&[
        ("canary-by-header", "x-c"),
        ("canary-by-header-value", "yes"),
        ("canary-by-header-pattern", "y.*"),
        ("canary-by-cookie", "beta"),
        ("canary-weight", "500"),
        ("canary-weight-total", "1000"),
    ]);
    assert!(p.is_empty(), "{p:?}");
    let c = canary(s);
    let rules = c.rules();
    assert_eq!(rules.len(), 3);
    assert_eq!(
        rules[0],
        (
            json!({"name": "x-c", "type": "Exact", "value": "yes"}),
            true
        )
    );
    assert_eq!(rules[1].0["name"], "cookie");
    assert!(rules[1].1 && !rules[2].1);
    assert_eq!(c.weights(), Some((500, 500)));
    let cookie = crate::table::Regex::new(rules[1].0["value"].as_str().unwrap()).unwrap();
    for (value, hit) in [
        ("beta=always", true),
        ("a=1; beta=always", true),
        ("a=1;beta=always; b=2", true),
        ("xbeta=always", false),
        ("beta=alwaysx", false),
        ("beta=never", false),
    ] {
        assert_eq!(cookie.is_full_match(value), hit, "{value}");
    }
    // A pattern is found anywhere in the value.
    let (s, _) = split(&[
        ("canary-by-header", "x-c"),
        ("canary-by-header-pattern", "^b.t"),
    ]);
    let rules = canary(s).rules();
    let pattern = crate::table::Regex::new(rules[0].0["value"].as_str().unwrap()).unwrap();
    assert!(pattern.is_full_match("bet"));
    // Invalid values are reported; a weight past the total is all of it.
    let (s, p) = split(&[
        ("canary-by-header", "bad header"),
        ("canary-by-cookie", "a;b"),
        ("canary-by-header-pattern", "("),
        ("canary-weight", "lots"),
    ]);
    assert_eq!(p.len(), 4, "{p:?}");
    assert_eq!(s.header, None);
    assert!(canary(s).rules().is_empty());
    let (s, _) = split(&[("canary-weight", "150")]);
    assert_eq!(canary(s).weights(), Some((0, 100)));
}
