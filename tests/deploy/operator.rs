//! Field-by-field checks of the Prometheus Operator kinds (`monitoring.coreos.com/v1`) that
//! have no Rust types here: an unknown, misspelt or missing field fails.

use std::collections::BTreeSet;

use serde_json::Value;

use super::round_trip;

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

pub(super) fn assert_fields(v: &Value, allowed: &[&str], required: &[&str], where_: &str) {
    let have = keys(v);
    assert!(v.is_object(), "{where_}: not an object: {v}");
    for k in &have {
        assert!(allowed.contains(k), "{where_}: unknown field {k}");
    }
    for k in required {
        assert!(have.contains(k), "{where_}: missing field {k}");
    }
}

/// The envelope of a Prometheus Operator object: exactly apiVersion, kind, metadata (a typed
/// ObjectMeta with a name and namespace) and spec.
fn check_envelope(doc: &Value, where_: &str) {
    assert_fields(
        doc,
        &["apiVersion", "kind", "metadata", "spec"],
        &["apiVersion", "kind", "metadata", "spec"],
        where_,
    );
    assert_eq!(doc["apiVersion"], "monitoring.coreos.com/v1", "{where_}");
    round_trip::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(
        &doc["metadata"],
        &format!("{where_}.metadata"),
    );
    assert!(doc["metadata"]["name"].is_string(), "{where_}: no name");
    assert!(
        doc["metadata"]["namespace"].is_string(),
        "{where_}: no namespace"
    );
}

/// A ServiceMonitor (`monitoring.coreos.com/v1`), checked field by field against the fields of
/// the operator's schema this check knows: an unknown or misspelt field fails.
pub(super) fn check_service_monitor(doc: &Value, where_: &str) {
    check_envelope(doc, where_);
    let spec = &doc["spec"];
    assert_fields(
        spec,
        &[
            "selector",
            "namespaceSelector",
            "endpoints",
            "jobLabel",
            "targetLabels",
            "podTargetLabels",
            "sampleLimit",
            "targetLimit",
            "attachMetadata",
        ],
        &["selector", "endpoints"],
        &format!("{where_}.spec"),
    );
    round_trip::<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>(
        &spec["selector"],
        &format!("{where_}.spec.selector"),
    );
    if !spec["namespaceSelector"].is_null() {
        assert_fields(
            &spec["namespaceSelector"],
            &["any", "matchNames"],
            &[],
            &format!("{where_}.spec.namespaceSelector"),
        );
    }
    let endpoints = spec["endpoints"].as_array().expect("endpoints is a list");
    assert!(!endpoints.is_empty(), "{where_}: no endpoint");
    for (i, e) in endpoints.iter().enumerate() {
        let w = format!("{where_}.spec.endpoints[{i}]");
        assert_fields(
            e,
            &[
                "port",
                "targetPort",
                "path",
                "scheme",
                "interval",
                "scrapeTimeout",
                "honorLabels",
                "honorTimestamps",
                "relabelings",
                "metricRelabelings",
                "params",
            ],
            &["port"],
            &w,
        );
        assert!(
            ["http", "https"].contains(&e["scheme"].as_str().unwrap_or("http")),
            "{w}"
        );
        for d in ["interval", "scrapeTimeout"] {
            if let Some(v) = e.get(d) {
                assert!(duration(v.as_str().unwrap_or_default()), "{w}.{d}: {v}");
            }
        }
    }
}

/// A Prometheus duration (`30s`, `5m`, `1h30m`).
fn duration(s: &str) -> bool {
    let mut digits = false;
    let mut any = false;
    for ch in s.chars() {
        if ch.is_ascii_digit() {
            digits = true;
        } else if "smhdwy".contains(ch) && digits {
            digits = false;
            any = true;
        } else {
            return false;
        }
    }
    any && !digits
}

/// A PrometheusRule (`monitoring.coreos.com/v1`): groups of alerting rules, each with an
/// expression, a severity and a summary and description.
pub(super) fn check_prometheus_rule(doc: &Value, where_: &str) {
    check_envelope(doc, where_);
    let spec = &doc["spec"];
    assert_fields(spec, &["groups"], &["groups"], &format!("{where_}.spec"));
    let groups = spec["groups"].as_array().expect("groups is a list");
    assert!(!groups.is_empty(), "{where_}: no group");
    let mut names = BTreeSet::new();
    for (g, group) in groups.iter().enumerate() {
        let w = format!("{where_}.spec.groups[{g}]");
        assert_fields(
            group,
            &[
                "name",
                "interval",
                "rules",
                "limit",
                "partial_response_strategy",
            ],
            &["name", "rules"],
            &w,
        );
        assert!(
            names.insert(group["name"].as_str().expect("a name")),
            "{w}: name repeated"
        );
        for (r, rule) in group["rules"].as_array().expect("rules").iter().enumerate() {
            let w = format!("{w}.rules[{r}]");
            assert_fields(
                rule,
                &[
                    "alert",
                    "expr",
                    "for",
                    "keep_firing_for",
                    "labels",
                    "annotations",
                ],
                &["alert", "expr", "labels", "annotations"],
                &w,
            );
            assert!(
                !rule["expr"].as_str().unwrap_or_default().trim().is_empty(),
                "{w}"
            );
            if let Some(f) = rule.get("for") {
                assert!(duration(f.as_str().unwrap_or_default()), "{w}.for: {f}");
            }
            assert!(
                ["warning", "critical"]
                    .contains(&rule["labels"]["severity"].as_str().unwrap_or("")),
                "{w}: severity must be warning or critical"
            );
            assert_fields(
                &rule["annotations"],
                &["summary", "description", "runbook_url"],
                &["summary", "description"],
                &format!("{w}.annotations"),
            );
        }
    }
}
