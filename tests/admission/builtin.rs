//! The built-in schemas of the Gateway API kinds (no `--crds`): every field the gateway-api
//! types declare and nothing else, the built-in defaults, and the rules this project states.
//! Each refused fixture names its errors; the valid fixture sits on the edges of every rule.

use edgeplane::admission::builtin;
use serde_json::Value;

use super::{documents, fixture, messages, read};

/// `(expected errors, document)` of every document of a fixture whose documents are each
/// preceded by `# refused: <error>` lines.
fn refused_cases(name: &str) -> Vec<(Vec<String>, Value)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/admission")
        .join(name);
    read(&path)
        .split("\n---\n")
        .map(|text| {
            let expected: Vec<String> = text
                .lines()
                .filter_map(|l| l.strip_prefix("# refused: "))
                .map(str::to_owned)
                .collect();
            let mut docs = documents(text);
            assert_eq!(docs.len(), 1, "one document per case:\n{text}");
            (expected, docs.remove(0))
        })
        .collect()
}

#[test]
fn built_in_schemas_refuse_typos_and_broken_rules_with_our_messages() {
    let crds = builtin::crds();
    let cases = refused_cases("gateway-refused.yaml");
    assert!(cases.len() >= 20, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for (expected, mut object) in cases {
        let name = object["metadata"]["name"].as_str().unwrap_or("").to_owned();
        assert!(!expected.is_empty(), "{name}: no `# refused:` line");
        match crds.admit(&mut object, None) {
            Ok(()) => failures.push(format!("{name}: admitted, expected {expected:#?}")),
            Err(r) => {
                let kind = object["kind"].as_str().unwrap_or("");
                assert!(
                    r.to_string().starts_with(&format!(
                        "{kind}.gateway.networking.k8s.io \"{name}\" is invalid: "
                    )),
                    "{r}"
                );
                if messages(&r) != expected {
                    failures.push(format!(
                        "{name}: got {:#?}\nexpected {expected:#?}",
                        messages(&r)
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn built_in_schemas_admit_objects_on_the_edges_of_every_rule() {
    let crds = builtin::crds();
    let objects = fixture("gateway-valid.yaml");
    assert!(objects.len() >= 8);
    for mut object in objects {
        crds.admit(&mut object, None)
            .unwrap_or_else(|r| panic!("{r}"));
        if object["kind"] == "HTTPRoute" {
            // Defaults are applied with the schema: weights, groups, kinds, path types.
            let backend = &object["spec"]["rules"][0]["backendRefs"][0];
            assert_eq!(backend["weight"], 0, "a weight that is set is kept");
            assert_eq!(backend["kind"], "Service");
            assert_eq!(
                object["spec"]["rules"][2]["matches"][0]["path"]["type"],
                "PathPrefix"
            );
            assert_eq!(
                object["spec"]["rules"][2]["filters"][0]["requestRedirect"]["statusCode"],
                301
            );
        }
    }
}

/// Every rule the built-in schemas carry is exercised by a refused fixture: each rule's
/// message (or message expression's fixed part) appears among the expected errors.
#[test]
fn every_built_in_rule_has_a_refused_fixture() {
    let crds = builtin::crds();
    let text = read(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/admission/gateway-refused.yaml"),
    );
    let mut missing = Vec::new();
    for kind in [
        "HTTPRoute",
        "GRPCRoute",
        "TLSRoute",
        "TCPRoute",
        "UDPRoute",
        "Gateway",
        "ListenerSet",
        "BackendTLSPolicy",
    ] {
        for (path, message) in crds.rule_messages("gateway.networking.k8s.io/v1", kind) {
            if !text.contains(&message) {
                missing.push(format!("{kind} {path}: {message}"));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "rules without a refused fixture:\n{}",
        missing.join("\n")
    );
}

/// The fixtures tell the truth about the Gateway API itself: where the upstream release sits
/// next to the project, its CRDs admit every valid fixture and refuse every refused one, so the
/// built-in rules are never stricter than the specification on these cases.
#[test]
fn upstream_crds_agree_with_the_fixtures() {
    let Some((upstream, _)) = super::upstream_crds("experimental") else {
        println!("note: upstream Gateway API CRDs not found; comparison skipped");
        return;
    };
    for mut object in fixture("gateway-valid.yaml") {
        upstream
            .admit(&mut object, None)
            .unwrap_or_else(|r| panic!("upstream refuses a valid fixture: {r}"));
    }
    for (_, mut object) in refused_cases("gateway-refused.yaml") {
        let name = object["metadata"]["name"].clone();
        assert!(
            upstream.admit(&mut object, None).is_err(),
            "upstream admits refused fixture {name}"
        );
    }
}

/// Every property path of a schema (`.spec.rules[].name`), `{}` for map values.
fn field_paths(schema: &Value, path: &str, out: &mut std::collections::BTreeSet<String>) {
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            let p = format!("{path}.{name}");
            out.insert(p.clone());
            field_paths(sub, &p, out);
        }
    }
    if let Some(items) = schema.get("items") {
        field_paths(items, &format!("{path}[]"), out);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        field_paths(values, &format!("{path}{{}}"), out);
    }
}

/// The built-in schemas declare every field of the upstream CRDs (experimental channel, every
/// version both serve), so nothing valid is refused as unknown; the only field they declare
/// beyond upstream is one the crate's types still carry.
#[test]
fn built_in_schemas_declare_every_upstream_field() {
    let Some(dir) = super::upstream::upstream("config/crd/experimental", "upstream fields") else {
        return;
    };
    let ours = builtin::gateway_crds().expect("built-in CRDs");
    let mut files = Vec::new();
    super::yaml_files(&dir, &mut files);
    let mut compared = 0;
    for f in files {
        for upstream in documents(&read(&f)) {
            if upstream["kind"] != "CustomResourceDefinition" {
                continue;
            }
            let kind = &upstream["spec"]["names"]["kind"];
            let Some(built_in) = ours.iter().find(|c| c["spec"]["names"]["kind"] == *kind) else {
                continue;
            };
            for version in upstream["spec"]["versions"].as_array().expect("versions") {
                let name = &version["name"];
                let Some(mine) = built_in["spec"]["versions"]
                    .as_array()
                    .and_then(|v| v.iter().find(|m| m["name"] == *name))
                else {
                    panic!("{kind} {name}: served upstream, not built in");
                };
                let (mut theirs, mut declared) = Default::default();
                field_paths(&version["schema"]["openAPIV3Schema"], "", &mut theirs);
                field_paths(&mine["schema"]["openAPIV3Schema"], "", &mut declared);
                for root in [".apiVersion", ".kind", ".metadata"] {
                    theirs.remove(root);
                }
                let missing: Vec<&String> = theirs.difference(&declared).collect();
                assert!(
                    missing.is_empty(),
                    "{kind} {name}: not declared: {missing:?}"
                );
                let extra: Vec<&String> = declared
                    .difference(&theirs)
                    .filter(|p| !p.ends_with(".sessionPersistence.idleTimeout"))
                    .collect();
                assert!(
                    extra.is_empty(),
                    "{kind} {name}: declared beyond upstream: {extra:?}"
                );
                compared += 1;
            }
        }
    }
    assert!(compared >= 19, "compared only {compared} versions");
}

/// Every upstream conformance manifest (all of them valid for the upstream CRDs) is admitted
/// by the built-in schemas as well.
#[test]
fn built_in_schemas_admit_the_upstream_conformance_manifests() {
    let Some(dir) = super::upstream::upstream("conformance", "upstream conformance manifests")
    else {
        return;
    };
    let crds = builtin::crds();
    let mut files = Vec::new();
    super::yaml_files(&dir, &mut files);
    let (mut admitted, mut failures) = (0, Vec::new());
    for f in &files {
        for mut doc in documents(&super::conformance_substitutions(&read(f))) {
            let (api, kind) = (doc["apiVersion"].as_str(), doc["kind"].as_str());
            let Some((api, kind)) = api.zip(kind) else {
                continue;
            };
            if !api.starts_with("gateway.networking.k8s.io/") || !crds.contains(api, kind) {
                continue;
            }
            match crds.admit(&mut doc, None) {
                Ok(()) => admitted += 1,
                Err(r) => failures.push(format!("{}: {r}", f.display())),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} refused:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(admitted > 300, "only {admitted} objects admitted");
}
