//! The test renderer of kustomizations (`tests/support/kustomize.rs`): what it renders for
//! every kustomization under `deploy/` and for small fixtures of each feature it supports,
//! compared (as parsed YAML, in order) with `kubectl kustomize` where kubectl (with kustomize
//! v5 or later) runs; without it that comparison is skipped with a message, since the other
//! tests no longer need kubectl.
//! The renderer's own results and refusals are checked everywhere.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use super::deploy_dir;
use super::kustomize::render;

/// Whether kubectl runs with a built-in kustomize of v5 or later, the behaviour the renderer
/// follows (Debian's own kubectl carries kustomize v2, which knows no components).
fn kubectl_runs() -> bool {
    let Ok(out) = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let major = text
        .lines()
        .find_map(|l| l.strip_prefix("Kustomize Version: v"))
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    if major.is_some_and(|m| m < 5) || (out.status.success() && major.is_none()) {
        eprintln!("kubectl's kustomize is older than v5 or unknown: {text}");
        return false;
    }
    out.status.success()
}

/// What `kubectl kustomize dir` prints, parsed; `None` when kubectl (with kustomize v5 or
/// later) does not run.
fn kubectl(dir: &Path) -> Option<Vec<Value>> {
    if !kubectl_runs() {
        return None;
    }
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    Some(
        serde_yaml_ng::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).expect("rendered YAML"))
            .filter(|v: &Value| !v.is_null())
            .collect(),
    )
}

/// Both renderings of `dir` are the same objects in the same order; false when kubectl does
/// not run.
fn same_as_kubectl(dir: &Path) -> bool {
    let ours = render(dir);
    let Some(theirs) = kubectl(dir) else {
        return false;
    };
    let names = |objs: &[Value]| -> Vec<String> {
        objs.iter()
            .map(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]))
            .collect()
    };
    assert_eq!(names(&ours), names(&theirs), "{}", dir.display());
    for (a, b) in ours.iter().zip(&theirs) {
        if let Some(at) = first_difference(a, b, String::new()) {
            panic!(
                "{}: {}/{} differs at {at}",
                dir.display(),
                a["kind"],
                a["metadata"]["name"]
            );
        }
    }
    true
}

/// Where `a` and `b` first differ, as a JSON pointer; numbers compare by value (kustomize
/// writes the CRDs' `minimum: 0.0` as `0`).
fn first_difference(a: &Value, b: &Value, at: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(v), Some(w)) => first_difference(v, w, format!("{at}/{k}")),
                (v, w) => Some(format!("{at}/{k}: {v:?} against kubectl's {w:?}")),
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (v, w))| first_difference(v, w, format!("{at}/{i}"))),
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => None,
        _ if a == b => None,
        _ => Some(format!("{at}: {a} against kubectl's {b}")),
    }
}

/// Every kustomization directory under `deploy/` (components are rendered through them).
fn deploy_kustomizations() -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    super::yaml_files(&deploy_dir(), &mut files);
    files
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "kustomization.yaml"))
        .filter(|f| super::documents(f)[0]["kind"] == "Kustomization")
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect()
}

#[test]
fn every_deploy_kustomization_renders_as_kubectl_renders_it() {
    let roots = deploy_kustomizations();
    assert!(roots.len() >= 8, "kustomizations: {roots:?}");
    let mut compared = 0;
    for root in &roots {
        assert!(
            !render(root).is_empty(),
            "{} renders nothing",
            root.display()
        );
        if same_as_kubectl(root) {
            compared += 1;
        }
    }
    if compared == 0 {
        eprintln!(
            "kubectl (kustomize v5+) does not run: the renderer was not compared with kubectl kustomize"
        );
    } else {
        assert_eq!(compared, roots.len());
    }
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
}

/// A fixture of every supported feature beyond what `deploy/` uses today: digests, new names,
/// initContainers and a pod template inside a CronJob, literals, a patch target that selects
/// by a name pattern, a directory reached through `../`, and ordering across kinds and
/// namespaces.
fn fixture(dir: &Path) {
    write(
        dir,
        &[
            (
                "common/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- objs.yaml\n",
            ),
            (
                "common/objs.yaml",
                r#"apiVersion: batch/v1
kind: CronJob
metadata: {name: tick, namespace: b}
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          initContainers: [{name: i, image: "reg.example:5000/tools/init:1"}]
          containers: [{name: c, image: "app@sha256:0000000000000000000000000000000000000000000000000000000000000000"}]
---
apiVersion: v1
kind: Service
metadata: {name: zeta}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: alpha, namespace: a}
spec: {ports: [{port: 80}]}
"#,
            ),
            (
                "top/kustomization.yaml",
                r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../common
- app.yaml
components:
- ../images
configMapGenerator:
- name: settings
  literals:
  - mode=fast
  - level=3
  files:
  - conf=settings.txt
  options:
    disableNameSuffixHash: true
patches:
- target:
    kind: Deployment
    name: web-.*
  patch: |-
    - op: replace
      path: /spec/replicas
      value: 5
    - op: add
      path: /metadata/labels
      value: {patched: "yes"}
"#,
            ),
            ("top/settings.txt", "a = 1\n"),
            (
                "top/app.yaml",
                r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web-1}
spec:
  replicas: 1
  template:
    spec:
      containers:
      - {name: a, image: app}
      - {name: b, image: "app:old"}
      - {name: c, image: other/app}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec: {replicas: 1}
---
apiVersion: v1
kind: Namespace
metadata: {name: a}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: hook}
"#,
            ),
            (
                "images/kustomization.yaml",
                r#"apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
images:
- name: app
  newName: reg.example/app
  newTag: "2"
- name: reg.example:5000/tools/init
  digest: sha256:1111111111111111111111111111111111111111111111111111111111111111
"#,
            ),
        ],
    );
}

#[test]
fn the_renderer_applies_each_supported_feature() {
    let dir = tempfile::tempdir().expect("temp dir");
    fixture(dir.path());
    let top = dir.path().join("top");
    let objs = render(&top);
    let order: Vec<String> = objs
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            format!(
                "{} {}/{}",
                o["kind"].as_str().unwrap_or_default(),
                m["namespace"].as_str().unwrap_or_default(),
                m["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            "Namespace /a",
            "ConfigMap /settings",
            "Service a/alpha",
            "Service /zeta",
            "Deployment /api",
            "Deployment /web-1",
            "CronJob b/tick",
            "ValidatingWebhookConfiguration /hook",
        ]
    );
    let web = &objs[5];
    assert_eq!(web["spec"]["replicas"], 5);
    assert_eq!(web["metadata"]["labels"]["patched"], "yes");
    assert_eq!(
        objs[4]["spec"]["replicas"], 1,
        "the target's name pattern is anchored"
    );
    let images: Vec<&Value> = web["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .map(|c| &c["image"])
        .collect();
    assert_eq!(
        images,
        [
            &json!("reg.example/app:2"),
            &json!("reg.example/app:2"),
            &json!("other/app")
        ]
    );
    let pod = &objs[6]["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["image"], "reg.example/app:2");
    assert_eq!(
        pod["initContainers"][0]["image"],
        "reg.example:5000/tools/init@sha256:1111111111111111111111111111111111111111111111111111111111111111"
    );
    assert_eq!(
        objs[1]["data"],
        json!({"mode": "fast", "level": "3", "conf": "a = 1\n"})
    );
    if !same_as_kubectl(&top) {
        eprintln!(
            "kubectl (kustomize v5+) does not run: the fixture was not compared with kubectl kustomize"
        );
    }
}

/// What the renderer does not know, it refuses with the field's name; so does what kustomize
/// refuses (a directory without a kustomization, a file outside the kustomization's directory,
/// the same object twice).
#[test]
fn the_renderer_refuses_what_it_does_not_support() {
    let header = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n";
    let obj = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n";
    let cases: [(&[(&str, &str)], &str); 7] = [
        (&[("k/kustomization.yaml", "namePrefix: x-\n")], "field `namePrefix`"),
        (&[("k/kustomization.yaml", "commonLabels: {a: b}\n")], "field `commonLabels`"),
        (
            &[("k/kustomization.yaml", "resources: [o.yaml]\npatches:\n- path: p.yaml\n"), ("k/o.yaml", obj)],
            "patches entry field `path`",
        ),
        (
            &[("k/kustomization.yaml", "resources: [o.yaml]\npatches:\n- target: {kind: Namespace}\n  patch: 'metadata: {labels: {a: b}}'\n"), ("k/o.yaml", obj)],
            "strategic merge",
        ),
        (&[("k/kustomization.yaml", "resources: [../plain]\n"), ("plain/o.yaml", obj)], "not a kustomization directory"),
        (&[("k/kustomization.yaml", "resources: [../o.yaml]\n"), ("o.yaml", obj)], "not in or below"),
        (&[("k/kustomization.yaml", "resources: [o.yaml, o.yaml]\n"), ("k/o.yaml", obj)], "already registered"),
    ];
    for (files, needle) in cases {
        let dir = tempfile::tempdir().expect("temp dir");
        let text = format!("{header}{}", files[0].1);
        let mut all = vec![(files[0].0, text.as_str())];
        all.extend_from_slice(&files[1..]);
        write(dir.path(), &all);
        let k = dir.path().join("k");
        let err = std::panic::catch_unwind(|| render(&k)).expect_err(needle);
        let msg = err
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
}
