//! Where `app-root` applies when several Ingresses share a host: the hosts where the
//! annotated Ingress holds a location, and what is reported for the others.

use serde_json::{json, Value};

use super::*;

fn ingress(
    name: &str,
    created: &str,
    notes: &[(&str, &str)],
    paths: &[(&str, &str, &str)],
    default_backend: bool,
) -> Ingress {
    let notes: serde_json::Map<String, Value> = notes
        .iter()
        .map(|(k, v)| (format!("{NGINX_PREFIX}{k}"), json!(v)))
        .collect();
    let rules: Vec<Value> = paths
        .iter()
        .map(|(host, path, kind)| {
            json!({"host": host, "http": {"paths": [{"path": path, "pathType": kind,
                "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}})
        })
        .collect();
    let mut spec = json!({"rules": rules});
    if default_backend {
        spec["defaultBackend"] = json!({"service": {"name": "s", "port": {"number": 80}}});
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created,
                     "annotations": notes},
        "spec": spec}))
    .expect("Ingress")
}

const OLD: &str = "2024-01-01T00:00:00Z";
const NEW: &str = "2025-01-01T00:00:00Z";
const ROOT: &[(&str, &str)] = &[("app-root", "/app")];

fn marked(ingresses: Vec<Ingress>) -> Vec<(Option<Vec<String>>, Vec<String>)> {
    let mut copies: Vec<Copy<'_>> = ingresses
        .into_iter()
        .map(|i| ("k", i, Vec::new()))
        .collect();
    mark(&mut copies);
    copies
        .iter()
        .map(|(_, c, p)| (hosts(c), p.clone()))
        .collect()
}

#[test]
fn app_root_applies_where_the_ingress_holds_a_location() {
    let got = marked(vec![
        // a.test: the older Ingress holds `/`; the annotated one has no other path there.
        ingress("old", OLD, &[], &[("a.test", "/", "Prefix")], false),
        ingress(
            "new",
            NEW,
            ROOT,
            &[
                ("a.test", "/", "Prefix"),
                // b.test: `/` is the older one's, `/app` its own: the redirect is server-wide.
                ("b.test", "/app", "Prefix"),
                // c.test: alone.
                ("c.test", "/x", "Exact"),
            ],
            false,
        ),
        ingress("old-b", OLD, &[], &[("b.test", "/", "Prefix")], false),
    ]);
    assert_eq!(got[0], (None, vec![]));
    let (applied, problems) = &got[1];
    assert_eq!(
        applied.as_deref(),
        Some(&["b.test".to_owned(), "c.test".to_owned()][..])
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("not applied on host a.test")
            && problems[0].contains("/ by Ingress ns/old"),
        "{problems:?}"
    );
    assert_eq!(got[2], (None, vec![]));
}

#[test]
fn the_oldest_ingress_holds_the_default_root_location_and_a_default_backend_alone_none() {
    let got = marked(vec![
        // The oldest Ingress of a.test holds its default `/` location (no `/` Prefix path).
        ingress("first", OLD, ROOT, &[("a.test", "/x", "Exact")], false),
        ingress("second", NEW, ROOT, &[("a.test", "/x", "Exact")], false),
        // A defaultBackend alone keeps no app-root in ingress-nginx.
        ingress("catch-all", OLD, ROOT, &[], true),
    ]);
    assert_eq!(got[0], (Some(vec!["a.test".to_owned()]), vec![]));
    let (applied, problems) = &got[1];
    assert_eq!(applied.as_deref(), Some(&[][..]));
    assert!(
        problems[0].contains("/x by Ingress ns/first"),
        "{problems:?}"
    );
    let (applied, problems) = &got[2];
    assert_eq!(applied.as_deref(), Some(&[][..]));
    assert!(problems[0].contains("has no rules"), "{problems:?}");
}

#[test]
fn a_hosts_list_written_on_an_ingress_is_not_trusted() {
    let mut own = ingress("own", OLD, &[], &[("a.test", "/", "Prefix")], false);
    own.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(HOSTS.to_owned(), json!(["a.test"]).to_string());
    assert_eq!(marked(vec![own])[0], (None, vec![]));
}
