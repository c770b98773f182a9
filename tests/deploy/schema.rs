//! Every kustomization under `deploy/` rendered (by the test renderer,
//! `tests/support/kustomize.rs`, which `deploy/render.rs` compares with `kubectl kustomize`)
//! and every object it renders validated offline and strictly (no unknown field) by
//! `scripts/validate-manifests.py`: built-in kinds against the Kubernetes schemas of the
//! version k8s-openapi is built for (PyPI's kubernetes-validate), Gateway API kinds against
//! CRDs generated here from the gateway-api crate's types, edgeplane.dev kinds against
//! `crds/edgeplane.yaml`. The Prometheus Operator kinds have no schema here: they are checked
//! field by field in `operator.rs`. The validator is required under `CI=true` (`.ci/run`
//! installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

use kube::CustomResourceExt;

use super::deploy_dir;

/// Kinds the validator has no schema for; `operator.rs` checks them.
const UNCHECKED: [&str; 2] = ["ServiceMonitor", "PrometheusRule"];

fn required(what: &str, why: String) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what} is needed in CI (.ci/run installs it): {why}"
    );
    eprintln!("{what} missing, schema validation not run: {why}");
}

fn validator() -> Option<()> {
    let out = Command::new("python3")
        .args(["-c", "import kubernetes_validate, jsonschema, yaml"])
        .output();
    match out {
        Ok(o) if o.status.success() => Some(()),
        other => {
            required("kubernetes-validate (pip)", format!("{other:?}"));
            None
        }
    }
}

/// The Kubernetes minor version k8s-openapi is built for (its `v1_NN` feature in Cargo.toml).
fn kubernetes_version() -> String {
    let manifest = std::fs::read_to_string(deploy_dir().join("../Cargo.toml")).expect("manifest");
    let line = manifest
        .lines()
        .find(|l| l.starts_with("k8s-openapi"))
        .expect("k8s-openapi dependency");
    let feature = line
        .split('"')
        .find(|s| s.starts_with("v1_"))
        .expect("a v1_NN feature");
    feature.trim_start_matches('v').replace('_', ".")
}

/// Every kustomization directory under `deploy/` that renders on its own (not a component).
fn kustomizations() -> Vec<PathBuf> {
    let mut files = Vec::new();
    super::yaml_files(&deploy_dir(), &mut files);
    files
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "kustomization.yaml"))
        .filter(|f| super::documents(f)[0]["kind"] == "Kustomization")
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect()
}

/// The Gateway API CRDs of the kinds `deploy/` and the docs use, generated from the crate's
/// types (field names and structure; the upstream CEL rules and patterns are not in them).
fn gateway_api_crds() -> String {
    use gateway_api::apis::standard::{
        gatewayclasses::GatewayClass, gateways::Gateway, grpcroutes::GrpcRoute,
        httproutes::HttpRoute, referencegrants::ReferenceGrant,
    };
    [
        GatewayClass::crd(),
        Gateway::crd(),
        HttpRoute::crd(),
        GrpcRoute::crd(),
        ReferenceGrant::crd(),
    ]
    .iter()
    .map(|c| serde_json::to_string(c).expect("CRD as JSON"))
    .collect::<Vec<_>>()
    .join("\n---\n")
}

/// Runs the validator over `files`; its exit status and output.
fn validate(files: &[PathBuf], crds: &[PathBuf]) -> (bool, String) {
    let script = deploy_dir().join("../scripts/validate-manifests.py");
    let mut cmd = Command::new("python3");
    cmd.arg(script)
        .args(["--kubernetes", &kubernetes_version()]);
    for c in crds {
        cmd.arg("--crds").arg(c);
    }
    for k in UNCHECKED {
        cmd.args(["--unchecked", k]);
    }
    let out = cmd.args(files).output().expect("run python3");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn crd_files(dir: &Path) -> Vec<PathBuf> {
    let gateway = dir.join("gateway-api-crds.yaml");
    std::fs::write(&gateway, gateway_api_crds()).expect("write CRDs");
    vec![gateway, deploy_dir().join("../crds/edgeplane.yaml")]
}

#[test]
fn every_rendered_overlay_passes_strict_schema_validation() {
    let Some(()) = validator() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut files = Vec::new();
    let mut objects = 0;
    let roots = kustomizations();
    assert!(roots.len() >= 6, "kustomizations: {roots:?}");
    for root in &roots {
        let docs = super::kustomize::render(root);
        let text = docs
            .iter()
            .map(|d| serde_json::to_string(d).expect("object as JSON"))
            .collect::<Vec<_>>()
            .join("\n---\n");
        for d in &docs {
            let containers = d["spec"]["template"]["spec"]["containers"].as_array();
            for c in containers.into_iter().flatten() {
                let tagged = format!("edgeplane:{}", env!("CARGO_PKG_VERSION"));
                assert_eq!(c["image"], tagged.as_str(), "{}", root.display());
            }
            if d["kind"] == "Deployment" && root.ends_with("hpa") {
                assert!(d["spec"].get("replicas").is_none(), "the HPA owns replicas");
            }
        }
        objects += docs.len();
        let name = root
            .strip_prefix(deploy_dir())
            .ok()
            .and_then(|p| p.to_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("deploy")
            .replace('/', "-");
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, text).expect("write rendered");
        files.push(file);
    }
    // The standalone configuration is not a kustomization: its files as they are.
    let mut standalone = Vec::new();
    super::yaml_files(&deploy_dir().join("standalone"), &mut standalone);
    for f in &standalone {
        objects += super::documents(f).len();
    }
    files.extend(standalone);

    let (ok, text) = validate(&files, &crd_files(dir.path()));
    assert!(ok, "{text}");
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ok ") || l.starts_with("unchecked "))
        .collect();
    assert_eq!(lines.len(), objects, "every object is reported:\n{text}");
    for l in lines.iter().filter(|l| l.starts_with("unchecked ")) {
        assert!(
            UNCHECKED.iter().any(|k| l.contains(&format!(": {k}/"))),
            "{l}"
        );
    }
    for kind in [
        "Deployment",
        "GatewayClass",
        "Gateway",
        "HTTPRoute",
        "PodDisruptionBudget",
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("ok ") && l.contains(&format!(": {kind}/"))),
            "no {kind} validated:\n{text}"
        );
    }
}

/// The validation fails on what it is there to catch: an unknown field in a built-in kind and
/// in a Gateway API kind, a wrong type, and a kind it has no schema for.
#[test]
fn the_validator_refuses_unknown_fields_and_unknown_kinds() {
    let Some(()) = validator() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        r#"apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: a, namespace: n}
spec: {maxUnavailable: 1, selectr: {}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: g, namespace: n}
spec:
  gatewayClassName: c
  listeners: [{name: http, port: 80, protocol: HTTP, hostnme: x}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: n, labelz: {}}
spec: {}
---
apiVersion: v1
kind: Service
metadata: {name: s, namespace: n}
spec: {ports: [{port: "eighty"}]}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
"#,
    )
    .expect("write");
    let (ok, text) = validate(&[bad], &crd_files(dir.path()));
    assert!(!ok, "{text}");
    for needle in [
        "PodDisruptionBudget/n/a: Additional properties",
        "Gateway/n/g: Additional properties",
        "HTTPRoute/n/r: Additional properties",
        "Service/n/s:",
        "Widget/w: no schema",
        "5 objects, 5 failed",
    ] {
        assert!(text.contains(needle), "{needle}:\n{text}");
    }
}
