//! The optional monitoring overlay (`deploy/monitoring`): the metrics Service reaches the admin
//! port of both workloads, the ServiceMonitor scrapes it, the PrometheusRule and the Grafana
//! dashboard name only metric families (and labels) the registry registers, and promtool
//! accepts every expression.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::{deploy_dir, documents, flag, round_trip};

/// Families the metrics rework registers, with their labels, that this branch's registry does
/// not have yet. They come from the metrics rework: once it is merged they are registered,
/// `pending_families_are_not_registered_yet` fails, and this list must be emptied.
const PENDING_FAMILIES: &[(&str, &[&str])] = &[
    ("edgeplane_upstream_connect_seconds", &["backend"]),
    ("edgeplane_upstream_first_byte_seconds", &["backend"]),
    (
        "edgeplane_l4_connections_total",
        &["gateway", "listener", "route"],
    ),
    (
        "edgeplane_l4_bytes_total",
        &["gateway", "listener", "route", "direction"],
    ),
    ("edgeplane_propagation_seconds", &[]),
    ("edgeplane_reconciles_total", &["result"]),
    ("edgeplane_table_age_seconds", &[]),
    ("edgeplane_leader", &[]),
    ("edgeplane_watch_restarts_total", &["kind"]),
    ("process_resident_memory_bytes", &[]),
    ("process_cpu_seconds_total", &[]),
];

/// The histogram families the expressions read through `_bucket`, `_sum` and `_count` (the
/// registry's catalogue does not say a family's type): reading any other family so fails.
const HISTOGRAMS: &[&str] = &[
    "edgeplane_request_duration_seconds",
    "edgeplane_upstream_connect_seconds",
    "edgeplane_upstream_first_byte_seconds",
    "edgeplane_propagation_seconds",
    "edgeplane_rebuild_duration_seconds",
];

/// Labels Prometheus attaches to every series it scrapes through the ServiceMonitor (the
/// target's labels), which the expressions may group by.
const TARGET_LABELS: &[&str] = &[
    "namespace",
    "pod",
    "job",
    "instance",
    "service",
    "container",
    "endpoint",
];

fn monitoring_dir() -> PathBuf {
    deploy_dir().join("monitoring")
}

/// Every registered family and its label names, from the registry itself.
fn registered() -> BTreeMap<String, Vec<String>> {
    let metrics = edgeplane::metrics::Metrics::new();
    metrics
        .catalog()
        .map(|(name, labels, _)| (name, labels.to_vec()))
        .collect()
}

/// Registered families, then the pending ones (not registered yet on this branch).
fn known_families() -> BTreeMap<String, Vec<String>> {
    let mut known = registered();
    for (name, labels) in PENDING_FAMILIES {
        known
            .entry((*name).to_owned())
            .or_insert_with(|| labels.iter().map(|l| (*l).to_owned()).collect());
    }
    known
}

/// What an expression refers to: series names as written, label names in matchers and
/// grouping clauses, and the labels of its `by (...)` clauses.
#[derive(Debug, Default)]
struct Refs {
    names: BTreeSet<String>,
    labels: BTreeSet<String>,
    by: BTreeSet<String>,
}

const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "inf", "nan"];
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Scans a PromQL expression (a small lexer: strings, matchers, ranges, identifiers). The
/// only Grafana variable allowed is `$__rate_interval`, as a range.
fn scan(expr: &str) -> Result<Refs, String> {
    let c: Vec<char> = expr.chars().collect();
    let mut refs = Refs::default();
    let mut in_braces = false;
    let mut i = 0;
    let ident_start = |ch: char| ch.is_ascii_alphabetic() || ch == '_' || ch == ':';
    let ident_char = |ch: char| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':';
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '"' || ch == '\'' || ch == '`' {
            i += 1;
            while i < c.len() && c[i] != ch {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            if i >= c.len() {
                return Err(format!("unterminated string in {expr}"));
            }
            i += 1;
        } else if ch == '{' || ch == '}' {
            in_braces = ch == '{';
            i += 1;
        } else if ch == '[' {
            let end = c[i..]
                .iter()
                .position(|&x| x == ']')
                .ok_or_else(|| format!("unclosed range in {expr}"))?;
            let range: String = c[i + 1..i + end].iter().collect();
            let ok = range == "$__rate_interval"
                || range.split(':').all(|part| {
                    part.is_empty()
                        || (part.len() > 1
                            && part[..part.len() - 1].chars().all(|d| d.is_ascii_digit())
                            && part.ends_with(['s', 'm', 'h', 'd', 'w']))
                });
            if !ok {
                return Err(format!("range [{range}] is not a duration in {expr}"));
            }
            i += end + 1;
        } else if ch == '$' {
            return Err(format!("a variable outside a range in {expr}"));
        } else if ch.is_ascii_digit()
            || (ch == '.' && c.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '.') {
                i += 1;
            }
        } else if ident_start(ch) {
            let start = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let mut next = i;
            while next < c.len() && c[next].is_whitespace() {
                next += 1;
            }
            let paren = c.get(next) == Some(&'(');
            if in_braces {
                refs.labels.insert(word);
            } else if LABEL_LISTS.contains(&word.as_str()) && paren {
                let end = c[next..]
                    .iter()
                    .position(|&x| x == ')')
                    .ok_or_else(|| format!("unclosed label list in {expr}"))?;
                let list: String = c[next + 1..next + end].iter().collect();
                for label in list.split(',').map(str::trim).filter(|l| !l.is_empty()) {
                    if !label.chars().all(ident_char) {
                        return Err(format!("label list ({list}) in {expr}"));
                    }
                    refs.labels.insert(label.to_owned());
                    if word == "by" {
                        refs.by.insert(label.to_owned());
                    }
                }
                i = next + end + 1;
            } else if paren
                || AGGREGATIONS.contains(&word.as_str())
                || KEYWORDS.contains(&word.to_ascii_lowercase().as_str())
            {
                // A function, an aggregation or an operator keyword.
            } else {
                refs.names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    if refs.names.is_empty() {
        return Err(format!("no metric in {expr}"));
    }
    Ok(refs)
}

/// Checks every name and label of `expr` against `known`; returns the labels a template may
/// use: the `by` labels when the expression aggregates, else its families' and the target's.
fn check_expr(
    expr: &str,
    known: &BTreeMap<String, Vec<String>>,
) -> Result<BTreeSet<String>, String> {
    let refs = scan(expr)?;
    let mut allowed: BTreeSet<String> = TARGET_LABELS.iter().map(|l| (*l).to_owned()).collect();
    for name in &refs.names {
        let family = if known.contains_key(name) {
            name.as_str()
        } else {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|b| HISTOGRAMS.contains(b)))
                .filter(|b| known.contains_key(*b))
                .ok_or_else(|| {
                    format!("{name} is no registered metric family nor a histogram's series (in {expr})")
                })?;
            if name.ends_with("_bucket") {
                allowed.insert("le".to_owned());
            }
            base
        };
        allowed.extend(known[family].iter().cloned());
    }
    if let Some(l) = refs.labels.iter().find(|l| !allowed.contains(*l)) {
        return Err(format!(
            "label {l} is on none of {:?} (in {expr})",
            refs.names
        ));
    }
    Ok(if refs.by.is_empty() { allowed } else { refs.by })
}

/// The label names a `{{ ... }}` template uses: `$labels.x` in alert annotations, `x` in
/// Grafana legends.
fn template_labels(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in text.split("{{").skip(1) {
        let inner = part.split("}}").next().unwrap_or_default().trim();
        let name = inner.strip_prefix("$labels.").unwrap_or(inner);
        if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push(name.to_owned());
        } else if let Some(rest) = inner.strip_prefix("$labels.") {
            out.push(rest.to_owned());
        }
    }
    out
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

fn assert_fields(v: &Value, allowed: &[&str], required: &[&str], where_: &str) {
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

fn the(file: &str) -> Value {
    let docs = documents(&monitoring_dir().join(file));
    assert_eq!(docs.len(), 1, "{file}: one document");
    docs.into_iter().next().expect("one document")
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(monitoring_dir().join("grafana-dashboard.json"))
        .expect("deploy/monitoring/grafana-dashboard.json");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Every alert of the rule file, by name: `(expr, annotations)`.
fn alerts() -> BTreeMap<String, (String, Value)> {
    let rule = the("prometheusrule.yaml");
    let mut out = BTreeMap::new();
    for group in rule["spec"]["groups"].as_array().expect("groups") {
        for r in group["rules"].as_array().expect("rules") {
            let name = r["alert"].as_str().expect("alert name").to_owned();
            let expr = r["expr"].as_str().expect("expr").to_owned();
            assert!(
                out.insert(name.clone(), (expr, r["annotations"].clone()))
                    .is_none(),
                "{name} twice"
            );
        }
    }
    out
}

/// Every query target of the dashboard: `(panel title, expr, legendFormat)`.
fn dashboard_targets(d: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        if p["type"] == "row" {
            continue;
        }
        let title = p["title"].as_str().unwrap_or_default().to_owned();
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push((
                title.clone(),
                t["expr"].as_str().unwrap_or_default().to_owned(),
                t["legendFormat"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    out
}

#[test]
fn the_overlay_is_optional_and_lists_what_it_installs() {
    let k = the("kustomization.yaml");
    let listed: Vec<&str> = k["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("a file"))
        .collect();
    assert_eq!(
        listed,
        [
            "metrics-service.yaml",
            "servicemonitor.yaml",
            "prometheusrule.yaml"
        ]
    );
    // The dashboard ConfigMap is generated from the plain JSON file, under a fixed name and
    // with the label Grafana's dashboard sidecar looks for.
    let gens = k["configMapGenerator"]
        .as_array()
        .expect("configMapGenerator");
    assert_eq!(gens.len(), 1);
    let g = &gens[0];
    assert_fields(
        g,
        &["name", "namespace", "files", "options"],
        &["name", "files"],
        "generator",
    );
    assert_eq!(g["files"], serde_json::json!(["grafana-dashboard.json"]));
    assert_eq!(g["namespace"], "edgeplane-system");
    assert_eq!(g["options"]["disableNameSuffixHash"], true);
    assert_eq!(g["options"]["labels"]["grafana_dashboard"], "1");
    // Not part of the default install: a cluster without the Prometheus Operator's CRDs
    // would refuse ServiceMonitor and PrometheusRule.
    let top = &documents(&deploy_dir().join("kustomization.yaml"))[0];
    let base = &documents(&deploy_dir().join("base/kustomization.yaml"))[0];
    let daemonset = &documents(&deploy_dir().join("daemonset/kustomization.yaml"))[0];
    for k in [top, base, daemonset] {
        let text = k["resources"].to_string();
        assert!(!text.contains("monitoring"), "{text}");
    }
}

/// The metrics Service selects the pods of both workloads and sends its port to the container
/// port they open for `--admin-addr`; the ServiceMonitor selects that Service (and not the
/// webhook Service) and scrapes `/metrics` on that port.
#[test]
fn the_service_monitor_scrapes_the_admin_port_of_every_workload() {
    let svc = the("metrics-service.yaml");
    round_trip::<k8s_openapi::api::core::v1::Service>(&svc, "metrics-service.yaml");
    let port = &svc["spec"]["ports"][0];
    assert_eq!(svc["spec"]["ports"].as_array().map(Vec::len), Some(1));
    let target = port["targetPort"].as_str().expect("a named target port");
    for file in ["deployment.yaml", "daemonset/daemonset.yaml"] {
        let workload = &documents(&deploy_dir().join(file))[0];
        let pod = &workload["spec"]["template"];
        for (k, v) in svc["spec"]["selector"].as_object().expect("selector") {
            assert_eq!(&pod["metadata"]["labels"][k], v, "{file}: pod label {k}");
        }
        assert_eq!(
            svc["metadata"]["namespace"],
            workload["metadata"]["namespace"]
        );
        let container = &pod["spec"]["containers"][0];
        let opened = container["ports"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == target))
            .unwrap_or_else(|| panic!("{file}: no container port {target}"));
        let admin = flag(container, "--admin-addr").expect("--admin-addr");
        let admin_port: u16 = admin
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .expect("--admin-addr has a port");
        assert_eq!(opened["containerPort"], admin_port, "{file}");
        assert_eq!(port["port"], admin_port);
        // The dashboard port is not behind the Service.
        let dashboard = flag(container, "--dashboard-addr").expect("--dashboard-addr");
        assert!(dashboard.starts_with("127.0.0.1:"), "{dashboard}");
    }

    let sm = the("servicemonitor.yaml");
    check_service_monitor(&sm, "servicemonitor.yaml");
    let labels = &svc["metadata"]["labels"];
    for (k, v) in sm["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
    {
        assert_eq!(&labels[k], v, "the metrics Service lacks label {k}");
    }
    // The webhook Service is not scraped.
    let webhook = &documents(&deploy_dir().join("base/webhook-service.yaml"))[0];
    let selects_webhook = sm["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
        .iter()
        .all(|(k, v)| &webhook["metadata"]["labels"][k] == v);
    assert!(
        !selects_webhook,
        "the ServiceMonitor also selects the webhook Service"
    );
    assert_eq!(
        sm["spec"]["namespaceSelector"]["matchNames"],
        serde_json::json!([svc["metadata"]["namespace"]])
    );
    let ep = &sm["spec"]["endpoints"][0];
    assert_eq!(ep["port"], port["name"]);
    assert_eq!(ep["path"], "/metrics");
    // The certificates' namespace and name are the Secret's, not the target's.
    assert_eq!(ep["honorLabels"], true);
}

#[test]
fn the_rules_cover_the_alerts_the_issue_names() {
    let rule = the("prometheusrule.yaml");
    check_prometheus_rule(&rule, "prometheusrule.yaml");
    let alerts = alerts();
    let expr = |name: &str| {
        alerts
            .get(name)
            .unwrap_or_else(|| panic!("no alert {name}: {:?}", alerts.keys()))
            .0
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(expr("EdgeplaneConfigErrors").contains("increase(edgeplane_config_errors_total["));
    assert!(expr("EdgeplaneNoTablePublished").contains("edgeplane_table_generation == 0"));
    assert!(expr("EdgeplaneTableStale").contains("edgeplane_reconciles_total"));
    assert!(expr("EdgeplaneCertificateExpiring").ends_with("- time() < 14 * 86400"));
    assert!(expr("EdgeplaneCertificateExpiringCritical").ends_with("- time() < 2 * 86400"));
    let errors = expr("EdgeplaneRouteErrors");
    for part in ["sum by (route)", "code=~\"5..\"", "[5m]", "> 0.05", "and"] {
        assert!(errors.contains(part), "{part} not in {errors}");
    }
    assert!(expr("EdgeplanePropagationSlow")
        .starts_with("histogram_quantile(0.99, sum by (namespace, pod, le) (rate(edgeplane_propagation_seconds_bucket["));
    assert!(expr("EdgeplanePropagationSlow").ends_with("> 1"));
}

/// Every expression of the rules and the dashboard names registered families (or pending
/// ones, see `PENDING_FAMILIES`) and labels they carry; every label a template prints is one
/// the expression keeps.
#[test]
fn every_expression_names_registered_families_and_their_labels() {
    let known = known_families();
    for (name, (expr, annotations)) in alerts() {
        let keeps = check_expr(&expr, &known).unwrap_or_else(|e| panic!("alert {name}: {e}"));
        for text in annotations.as_object().expect("annotations").values() {
            for l in template_labels(text.as_str().unwrap_or_default()) {
                assert!(
                    keeps.contains(&l),
                    "alert {name} prints {l}, which {expr} drops"
                );
            }
        }
    }
    let d = dashboard();
    let targets = dashboard_targets(&d);
    assert!(targets.len() >= 15, "{targets:?}");
    for (panel, expr, legend) in targets {
        let keeps = check_expr(&expr, &known).unwrap_or_else(|e| panic!("panel {panel}: {e}"));
        for l in template_labels(&legend) {
            assert!(
                keeps.contains(&l),
                "panel {panel} prints {l}, which {expr} drops"
            );
        }
    }
}

#[test]
fn the_expression_check_catches_unknown_families_and_labels() {
    let known = known_families();
    let ok = check_expr(
        "sum by (route) (rate(edgeplane_requests_total{code=~\"5..\"}[5m]))",
        &known,
    )
    .expect("valid");
    assert_eq!(ok, BTreeSet::from(["route".to_owned()]));
    for bad in [
        "sum by (route) (rate(edgeplane_request_total[5m]))",
        "sum by (path) (rate(edgeplane_requests_total[5m]))",
        "edgeplane_requests_total{host=\"x\"}",
        "histogram_quantile(0.99, rate(edgeplane_table_generation_bucket[5m]))",
        "rate(edgeplane_requests_total[$__interval])",
        "edgeplane_requests_total{route=\"$route\"} * $x",
        "time()",
    ] {
        assert!(check_expr(bad, &known).is_err(), "not caught: {bad}");
    }
    assert_eq!(
        template_labels("{{ $labels.pod }} in {{$labels.namespace}}: {{ $value | humanize }}"),
        ["pod", "namespace"]
    );
}

/// Once the metrics rework is merged its families are registered: this fails until
/// `PENDING_FAMILIES` is emptied, so the allow-list cannot hide a renamed family later.
#[test]
fn pending_families_are_not_registered_yet() {
    let registered = registered();
    for (name, _) in PENDING_FAMILIES {
        assert!(
            !registered.contains_key(*name),
            "{name} is registered now: remove it from PENDING_FAMILIES in {}",
            file!()
        );
    }
}

#[test]
fn every_dashboard_panel_queries_through_the_datasource_variable() {
    let d = dashboard();
    assert_eq!(d["uid"], "edgeplane");
    let vars = d["templating"]["list"].as_array().expect("templating");
    assert!(vars.iter().any(|v| v["name"] == "datasource"
        && v["type"] == "datasource"
        && v["query"] == "prometheus"));
    let ds = serde_json::json!({"type": "prometheus", "uid": "${datasource}"});
    let mut ids = BTreeSet::new();
    let mut titles = BTreeSet::new();
    let panels = d["panels"].as_array().expect("panels");
    for p in panels {
        let title = p["title"].as_str().expect("a title").to_owned();
        assert!(
            ids.insert(p["id"].as_u64().expect("an id")),
            "{title}: id repeated"
        );
        let g = &p["gridPos"];
        for k in ["h", "w", "x", "y"] {
            assert!(g[k].is_u64(), "{title}: gridPos.{k}");
        }
        assert!(
            g["x"].as_u64().unwrap() + g["w"].as_u64().unwrap() <= 24,
            "{title}"
        );
        if p["type"] == "row" {
            continue;
        }
        titles.insert(title.clone());
        assert_eq!(p["datasource"], ds, "{title}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            assert_eq!(t["datasource"], ds, "{title}");
            assert!(
                !t["expr"].as_str().unwrap_or_default().is_empty(),
                "{title}"
            );
        }
    }
    for want in [
        "Request rate",
        "5xx ratio",
        "p99 duration",
        "Upstream connect p99",
        "Upstream first byte p99",
        "L4 connections",
        "L4 bytes",
        "Propagation lag",
        "Reconciles",
        "Reconcile duration p99",
        "Table generation",
        "Table age",
        "Leader",
        "Resident memory",
        "CPU",
        "Certificate expiry",
    ] {
        assert!(titles.contains(want), "no panel {want}: {titles:?}");
    }
    // The unprefixed process_* families are selected by the scrape job, which is the
    // metrics Service's name (the ServiceMonitor sets no jobLabel).
    let svc = the("metrics-service.yaml");
    let job = format!(
        "job=\"{}\"",
        svc["metadata"]["name"].as_str().expect("name")
    );
    assert!(the("servicemonitor.yaml")["spec"].get("jobLabel").is_none());
    for (panel, expr, _) in dashboard_targets(&d) {
        if expr.contains("process_") {
            assert!(expr.contains(&job), "{panel}: {expr} lacks {job}");
        }
    }
}

/// promtool, when it runs (`CI=true` requires it: `.ci/run` installs Debian's prometheus).
fn promtool() -> Option<&'static str> {
    let ran = Command::new("promtool").arg("--version").output();
    match ran {
        Ok(o) if o.status.success() => Some("promtool"),
        other => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "promtool is needed in CI (apt-get install prometheus): {other:?}"
            );
            eprintln!("promtool not run: {other:?}");
            None
        }
    }
}

/// `promtool check rules` on a rule file's groups; the output when it refuses them.
fn promtool_check(tool: &str, groups: &Value) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rules.yaml");
    let yaml = serde_yaml_ng::to_string(&serde_json::json!({ "groups": groups })).expect("yaml");
    std::fs::write(&path, yaml).expect("written");
    let out = Command::new(tool)
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .expect("promtool runs");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// promtool parses every alert and every dashboard query (`$__rate_interval` read as `5m`),
/// and refuses a broken one.
#[test]
fn promtool_accepts_the_rules_and_the_dashboard_queries() {
    let Some(tool) = promtool() else { return };
    let rule = the("prometheusrule.yaml");
    promtool_check(tool, &rule["spec"]["groups"]).unwrap_or_else(|e| panic!("{e}"));
    let rules: Vec<Value> = dashboard_targets(&dashboard())
        .into_iter()
        .enumerate()
        .map(|(i, (_, expr, _))| {
            serde_json::json!({
                "record": format!("edgeplane:dashboard_query_{i}"),
                "expr": expr.replace("$__rate_interval", "5m"),
            })
        })
        .collect();
    promtool_check(
        tool,
        &serde_json::json!([{"name": "dashboard", "rules": rules}]),
    )
    .unwrap_or_else(|e| panic!("a dashboard query: {e}"));
    let broken = serde_json::json!([{"name": "g", "rules": [
        {"alert": "A", "expr": "sum by (route (rate(edgeplane_requests_total[5m]))"}]}]);
    assert!(promtool_check(tool, &broken).is_err());
}

/// The README's metrics section links the monitoring page, which names every alert.
#[test]
fn the_monitoring_doc_explains_every_alert() {
    let root = deploy_dir().join("..");
    let doc = std::fs::read_to_string(root.join("docs/monitoring.md")).expect("docs/monitoring.md");
    for name in alerts().keys() {
        assert!(
            doc.contains(&format!("`{name}`")),
            "docs/monitoring.md: no `{name}`"
        );
    }
    assert!(doc.contains("kubectl apply -k deploy/monitoring"));
    assert!(doc.contains("port-forward"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    assert!(readme.contains("(docs/monitoring.md)"));
}

#[test]
fn the_operator_kind_checks_catch_unknown_and_missing_fields() {
    let sm = the("servicemonitor.yaml");
    let rule = the("prometheusrule.yaml");
    let mut bad: Vec<(Value, fn(&Value, &str))> = Vec::new();
    let mut v = sm.clone();
    v["spec"]["endpoint"] = v["spec"]["endpoints"].clone();
    bad.push((v, check_service_monitor));
    let mut v = sm.clone();
    v["spec"]["endpoints"][0]["honorLabel"] = Value::Bool(true);
    bad.push((v, check_service_monitor));
    let mut v = sm.clone();
    v["spec"]["endpoints"][0]["interval"] = "30".into();
    bad.push((v, check_service_monitor));
    let mut v = sm.clone();
    v["apiVersion"] = "monitoring.coreos.com/v1beta1".into();
    bad.push((v, check_service_monitor));
    let mut v = rule.clone();
    v["spec"]["groups"][0]["rules"][0]["expresion"] = "up".into();
    bad.push((v, check_prometheus_rule));
    let mut v = rule.clone();
    v["spec"]["groups"][0]["rules"][0]["labels"]["severity"] = "page".into();
    bad.push((v, check_prometheus_rule));
    let mut v = rule.clone();
    v["spec"]["interval"] = "1m".into();
    bad.push((v, check_prometheus_rule));
    for (doc, check) in bad {
        let r = std::panic::catch_unwind(|| check(&doc, "t"));
        assert!(r.is_err(), "not caught: {doc}");
    }
    check_service_monitor(&sm, "servicemonitor.yaml");
    check_prometheus_rule(&rule, "prometheusrule.yaml");
    let known = known_families();
    for h in HISTOGRAMS {
        assert!(known.contains_key(*h), "{h} is no known family");
    }
}
