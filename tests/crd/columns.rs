//! The printer columns of the edgeplane CRDs tell the truth for any number of targets and
//! ancestors. The API server prints only the first match of a column's JSONPath, so every
//! column must select at most one value, and that value must agree with the whole status.
//! Checked on the status the translator computes for policies with several targets, some of
//! which do not accept them.

use edgeplane::admission::builtin;
use edgeplane::kinds::crd::generate::crd_values;
use edgeplane::provider::file::load_dir;
use edgeplane::translate::{translate, TranslateOptions, DEFAULT_CONTROLLER_NAME};
use serde_json::{json, Value};
use serde_json_path::JsonPath;

const MANIFESTS: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: edgeplane}
spec: {controllerName: edgeplane.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: edgeplane
  listeners: [{name: http, port: 8080, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: other}
spec:
  gatewayClassName: edgeplane
  listeners: [{name: http, port: 8081, protocol: HTTP}]
---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {name: mixed}
spec:
  targetRefs:
  - {group: gateway.networking.k8s.io, kind: Gateway, name: gw}
  - {group: gateway.networking.k8s.io, kind: Gateway, name: missing}
  - {group: gateway.networking.k8s.io, kind: Gateway, name: other}
  rateLimit: {requests: 10, unit: Second}
---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {name: missing-first}
spec:
  targetRefs:
  - {group: gateway.networking.k8s.io, kind: Gateway, name: absent}
  - {group: gateway.networking.k8s.io, kind: Gateway, name: gw}
  timeouts: {request: 5s}
"#;

/// Every TrafficPolicy of [`MANIFESTS`] as the object `kubectl get` reads: spec and the
/// status the translator computed.
fn policies() -> Vec<Value> {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), MANIFESTS).expect("write");
    let loaded = load_dir(dir.path(), builtin::crds()).expect("manifests load");
    let options = TranslateOptions {
        ingress: Default::default(),
        controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: "127.0.0.1".parse().expect("ip"),
        now: "2026-01-01T00:00:00Z".parse().expect("timestamp"),
        generation: 1,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    };
    let report = serde_json::to_value(translate(&loaded.snapshot, &options).status).expect("json");
    let specs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(MANIFESTS)
        .filter_map(|d| serde_yaml_ng::with::singleton_map_recursive::deserialize(d).ok())
        .filter(|o: &Value| o["kind"] == "TrafficPolicy")
        .collect();
    specs
        .into_iter()
        .map(|mut o| {
            let entry = report
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["kind"] == "TrafficPolicy" && e["name"] == o["metadata"]["name"])
                .unwrap_or_else(|| panic!("no status for {}", o["metadata"]["name"]));
            o["status"] = entry["status"].clone();
            o
        })
        .collect()
}

/// Every `(kind, version, column name, JSONPath)` of the generated CRDs.
fn columns() -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for crd in crd_values().expect("CRDs generate") {
        let kind = crd["spec"]["names"]["kind"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
            for c in version["additionalPrinterColumns"]
                .as_array()
                .into_iter()
                .flatten()
            {
                out.push((
                    kind.clone(),
                    version["name"].as_str().unwrap_or_default().to_owned(),
                    c["name"].as_str().unwrap_or_default().to_owned(),
                    c["jsonPath"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    out
}

#[test]
fn every_column_selects_at_most_one_value_however_many_targets() {
    let objects = policies();
    assert!(objects.iter().all(|o| o["status"]["ancestors"]
        .as_array()
        .is_some_and(|a| a.len() >= 2)));
    let columns = columns();
    assert!(columns.len() >= 6, "{columns:?}");
    for (kind, version, name, path) in columns {
        let query = JsonPath::parse(&format!("${path}"))
            .unwrap_or_else(|e| panic!("{kind} {version} column {name}: {path}: {e}"));
        for o in objects.iter().filter(|_| kind == "TrafficPolicy") {
            let found = query.query(o).all();
            assert!(
                found.len() <= 1,
                "{kind} {version} column {name} ({path}) matches {} values of {}; the API \
                 server would print only the first",
                found.len(),
                o["metadata"]["name"]
            );
        }
    }
}

#[test]
fn the_columns_agree_with_every_ancestor() {
    for o in policies() {
        let ancestors = o["status"]["ancestors"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let accepted = ancestors
            .iter()
            .filter(|a| {
                a["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Accepted" && c["status"] == "True")
            })
            .count();
        assert!(
            accepted < ancestors.len(),
            "a target is missing in each: {o}"
        );
        let cell = |name: &str| {
            let (.., path) = columns()
                .into_iter()
                .find(|(k, v, n, _)| k == "TrafficPolicy" && v == "v1beta1" && n == name)
                .unwrap_or_else(|| panic!("column {name}"));
            let query = JsonPath::parse(&format!("${path}")).expect("path");
            query.query(&o).first().cloned()
        };
        let name = &o["metadata"]["name"];
        assert_eq!(
            cell("Accepted"),
            Some(json!(format!("{accepted}/{}", ancestors.len()))),
            "{name}"
        );
        let targets = o["spec"]["targetRefs"].as_array().map(Vec::len);
        assert_eq!(cell("Targets"), targets.map(|n| json!(n)), "{name}");
    }
}
