//! Defaulting of objects read from files: golden cases (`tests/defaults/<case>/input.yaml`, the
//! manifests as written, and `defaulted.yaml`, the objects the translator sees), and the built-in
//! defaults compared with the upstream CRDs where a copy of them is beside the project.
//! `UPDATE_GOLDEN=1 cargo test --test defaults` rewrites the golden files for review.

#[path = "support/upstream.rs"]
mod upstream;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use edgeplane::admission::builtin;
use edgeplane::provider::manifest::parse_documents;
use serde_json::Value;

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/defaults");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("tests/defaults")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("input.yaml").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Every document of `input.yaml`, normalized and defaulted as the file provider admits it.
fn defaulted(input: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(input).expect("read input");
    let crds = builtin::crds();
    parse_documents(input, &text)
        .expect("input parses")
        .into_iter()
        .map(|mut doc| {
            doc.normalize();
            crds.admit(&mut doc.value, None).expect("admitted");
            doc.value
        })
        .collect()
}

#[test]
fn golden_defaulted_objects() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failed = Vec::new();
    for case in cases() {
        let got = serde_yaml_ng::to_string(&defaulted(&case.join("input.yaml"))).expect("yaml");
        let golden = case.join("defaulted.yaml");
        if update {
            std::fs::write(&golden, &got).expect("write golden");
            continue;
        }
        let want = std::fs::read_to_string(&golden).unwrap_or_default();
        if got != want {
            failed.push(format!(
                "{}: defaulted objects differ\n--- want\n{want}\n--- got\n{got}",
                case.display()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(cases().len() >= 3);
}

/// Every `(path, default)` in an OpenAPI schema, paths written as the built-in table writes
/// them (`spec.rules[].matches`).
fn schema_defaults(schema: &Value, path: &str, out: &mut BTreeSet<(String, String)>) {
    if let Some(d) = schema.get("default") {
        out.insert((path.trim_start_matches('.').to_owned(), d.to_string()));
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            if path.is_empty() && k == "status" {
                continue;
            }
            schema_defaults(v, &format!("{path}.{k}"), out);
        }
    }
    if let Some(items) = schema.get("items") {
        schema_defaults(items, &format!("{path}[]"), out);
    }
}

/// The built-in defaults are exactly those of the upstream CRDs (experimental channel, which
/// carries every standard field), kind by kind.
#[test]
fn built_in_defaults_match_the_upstream_crds() {
    let Some(dir) = upstream::upstream("config/crd/experimental", "built-in defaults") else {
        return;
    };
    let mut compared = 0;
    for entry in std::fs::read_dir(&dir).expect("CRD dir") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("read CRD");
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let crd: Value = serde::Deserialize::deserialize(doc).expect("CRD YAML");
            if crd["kind"] != "CustomResourceDefinition" {
                continue;
            }
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or("");
            let Some((_, builtin)) = builtin::defaults().into_iter().find(|(k, _)| *k == kind)
            else {
                continue;
            };
            let storage = crd["spec"]["versions"]
                .as_array()
                .and_then(|v| v.iter().find(|v| v["storage"] == true))
                .expect("storage version");
            let mut upstream = BTreeSet::new();
            schema_defaults(&storage["schema"]["openAPIV3Schema"], "", &mut upstream);
            let ours: BTreeSet<(String, String)> = builtin
                .iter()
                .map(|(p, v)| {
                    let v: Value = serde_json::from_str(v).expect("built-in JSON");
                    (p.clone(), v.to_string())
                })
                .collect();
            assert_eq!(
                ours.symmetric_difference(&upstream).collect::<Vec<_>>(),
                Vec::<&(String, String)>::new(),
                "{kind}: built-in defaults differ from {}",
                path.display()
            );
            compared += 1;
        }
    }
    assert!(compared >= 8, "compared only {compared} kinds");
}
