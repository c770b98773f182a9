//! The optional monitoring overlay (`deploy/monitoring`): the metrics Service reaches the admin
//! port of both workloads, the ServiceMonitor scrapes it, the PrometheusRule and the Grafana
//! dashboard name only metric families (and labels) the registry registers, and promtool
//! accepts every expression.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::operator::{assert_fields, check_prometheus_rule, check_service_monitor};
use super::promql::{check_expr, template_labels, HISTOGRAMS};
use super::{deploy_dir, documents, flag, round_trip};

/// Families an expression may name before the registry registers them (a family another
/// branch adds), with their labels: empty while every family the rules and the dashboard read
/// is registered. `pending_families_are_not_registered_yet` fails once an entry is registered,
/// so an entry cannot outlive its reason and hide a renamed family.
const PENDING_FAMILIES: &[(&str, &[&str])] = &[];

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
    for file in ["deployment/deployment.yaml", "daemonset/daemonset.yaml"] {
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
    type Check = fn(&Value, &str);
    let mut bad: Vec<(Value, Check)> = Vec::new();
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
