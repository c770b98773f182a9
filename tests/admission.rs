//! Admission as the API server does it: fixtures written for each schema keyword and CEL
//! construct, plus (when the Gateway API release sits next to the crate) every upstream CRD
//! and conformance manifest.

#[path = "support/upstream.rs"]
mod upstream;

use std::path::{Path, PathBuf};

#[path = "admission/builtin.rs"]
mod builtin;

use edgeplane::admission::{Crds, FieldErrorType, Rejection};
use serde::Deserialize;
use serde_json::{json, Value};

/// Every YAML document in `text`, as JSON, skipping empty documents.
fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("yaml: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixture(name: &str) -> Vec<Value> {
    documents(&read(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/admission")
            .join(name),
    ))
}

/// The error messages of a rejection, one string each.
fn messages(r: &Rejection) -> Vec<String> {
    r.errors.iter().map(ToString::to_string).collect()
}

// ---------------------------------------------------------------------------------------------
// Upstream Gateway API CRDs and conformance manifests.

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

/// Registers every upstream CRD of one channel; `None` when the release is not present.
fn upstream_crds(channel: &str) -> Option<(Crds, usize)> {
    let dir = upstream::upstream(&format!("config/crd/{channel}"), "upstream admission")?;
    let mut crds = Crds::new();
    let mut rules = 0;
    let mut files = Vec::new();
    yaml_files(&dir, &mut files);
    for f in files {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.contains("vap_safeupgrades") || name == "kustomization.yaml" {
            continue;
        }
        for doc in documents(&read(&f)) {
            if doc["kind"] != "CustomResourceDefinition" {
                continue;
            }
            let kind = crds
                .register(&doc)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let api = format!(
                "{}/{}",
                doc["spec"]["group"].as_str().unwrap_or_default(),
                "v1"
            );
            let k = kind.split('.').next().unwrap_or_default().to_string();
            rules += crds.rules(&api, &k).len();
        }
    }
    Some((crds, rules))
}

#[test]
fn upstream_crds_compile_and_conformance_manifests_are_admitted() {
    let Some((standard, standard_rules)) = upstream_crds("standard") else {
        println!("note: ../shared/gateway-api-v1.6.1 not found; upstream admission test skipped");
        return;
    };
    let (crds, rules) = upstream_crds("experimental").expect("experimental CRDs");
    assert!(standard.kinds().len() >= 8, "{:?}", standard.kinds());
    assert!(crds.kinds().len() >= 12, "{:?}", crds.kinds());
    assert!(
        standard_rules > 50 && rules > standard_rules,
        "{standard_rules} {rules}"
    );

    let mut files = Vec::new();
    yaml_files(&upstream::release_dir().join("conformance"), &mut files);
    let (mut admitted, mut failures) = (0, Vec::new());
    for f in &files {
        for mut doc in documents(&conformance_substitutions(&read(f))) {
            let (api, kind) = (doc["apiVersion"].as_str(), doc["kind"].as_str());
            let Some((api, kind)) = api.zip(kind) else {
                continue;
            };
            if !crds.contains(api, kind) {
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
        "{} rejected:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(admitted > 300, "only {admitted} objects admitted");
}

/// The conformance suite fills these placeholders in before it applies a manifest; as written
/// they are (deliberately) not valid values, so the test fills them in the same way.
fn conformance_substitutions(text: &str) -> String {
    text.replace("{GATEWAY_CLASS_NAME}", "conformance")
        .replace(
            "{GATEWAY_CONTROLLER_NAME}",
            "example.net/gateway-controller",
        )
        .replace("PLACEHOLDER_UNUSABLE_ADDRS", "192.0.2.10")
        .replace("PLACEHOLDER_USABLE_ADDRS", "192.0.2.20")
}

fn reject(crds: &Crds, mut obj: Value) -> Vec<String> {
    match crds.admit(&mut obj, None) {
        Ok(()) => panic!("admitted: {obj}"),
        Err(r) => messages(&r),
    }
}

fn route(rules: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": rules}
    })
}

fn gateway(listeners: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"gatewayClassName": "c", "listeners": listeners}
    })
}

#[test]
fn upstream_crds_reject_invalid_objects_with_their_own_messages() {
    let Some((crds, _)) = upstream_crds("experimental") else {
        println!("note: ../shared/gateway-api-v1.6.1 not found; upstream admission test skipped");
        return;
    };
    let errs = reject(
        &crds,
        route(json!([{"matches": [{"path": {"type": "PathPrefix", "value": "foo"}}]}])),
    );
    assert_eq!(
        errs,
        [
            r#"spec.rules[0].matches[0].path: Invalid value: "object": value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']"#
        ]
    );

    let errs = reject(
        &crds,
        route(json!([{"filters": [
            {"type": "RequestRedirect", "requestRedirect": {"hostname": "a.example"}},
            {"type": "URLRewrite", "urlRewrite": {"hostname": "b.example"}}
        ]}])),
    );
    assert_eq!(
        errs,
        [
            r#"spec.rules[0].filters: Invalid value: "array": May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both"#
        ]
    );

    let errs = reject(
        &crds,
        route(json!([{"backendRefs": [{"name": "svc", "port": 80, "weight": 1000001}]}])),
    );
    assert_eq!(
        errs,
        [
            r#"spec.rules[0].backendRefs[0].weight: Invalid value: 1000001: spec.rules[0].backendRefs[0].weight in body should be less than or equal to 1000000"#
        ]
    );

    let errs = reject(
        &crds,
        route(json!([{"timeouts": {"request": "1s", "backendRequest": "2s"}}])),
    );
    assert_eq!(
        errs,
        [
            r#"spec.rules[0].timeouts: Invalid value: "object": backendRequest timeout cannot be longer than request timeout"#
        ]
    );

    let errs = reject(
        &crds,
        gateway(json!([
            {"name": "a", "port": 80, "protocol": "HTTP"},
            {"name": "a", "port": 81, "protocol": "HTTP"}
        ])),
    );
    assert!(
        errs.contains(
            &r#"spec.listeners[1]: Duplicate value: map[string]interface {}{"name":"a"}"#
                .to_string()
        ),
        "{errs:?}"
    );
    assert!(errs.contains(&r#"spec.listeners: Invalid value: "array": Listener name must be unique within the Gateway"#.to_string()), "{errs:?}");

    let errs = reject(
        &crds,
        gateway(json!([
            {"name": "a", "port": 80, "protocol": "HTTP", "tls": {"mode": "Terminate", "certificateRefs": [{"name": "c"}]}}
        ])),
    );
    assert_eq!(
        errs,
        [
            r#"spec.listeners: Invalid value: "array": tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']"#
        ]
    );
}

#[test]
fn upstream_httproute_defaults() {
    let Some((crds, _)) = upstream_crds("standard") else {
        println!("note: ../shared/gateway-api-v1.6.1 not found; upstream admission test skipped");
        return;
    };
    let mut r = route(json!([{"backendRefs": [{"name": "svc", "port": 80}]}]));
    crds.admit(&mut r, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r["spec"]["parentRefs"][0],
        json!({"name": "gw", "group": "gateway.networking.k8s.io", "kind": "Gateway"})
    );
    assert_eq!(
        r["spec"]["rules"][0]["backendRefs"][0],
        json!({"name": "svc", "port": 80, "group": "", "kind": "Service", "weight": 1})
    );
    assert_eq!(
        r["spec"]["rules"][0]["matches"],
        json!([{"path": {"type": "PathPrefix", "value": "/"}}])
    );
}

// ---------------------------------------------------------------------------------------------
// Written fixtures: a Widget CRD exercising every keyword and CEL construct.

fn widgets() -> Crds {
    let mut crds = Crds::new();
    let crd = fixture("widgets-crd.yaml").remove(0);
    assert_eq!(
        crds.register(&crd).unwrap_or_else(|e| panic!("{e}")),
        "Widget.example.com"
    );
    crds
}

fn widget(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}

/// The messages of admitting a Widget with `spec` (name `abc` added unless given).
fn widget_errors(spec: Value) -> Vec<String> {
    let mut spec = spec;
    if spec.get("name").is_none() {
        spec["name"] = json!("abc");
    }
    reject(&widgets(), widget(spec))
}

#[test]
fn widget_fixtures_are_admitted_and_defaulted() {
    let crds = widgets();
    assert!(crds.contains("example.com/v1", "Widget"));
    assert!(
        !crds.contains("example.com/v1alpha1", "Widget"),
        "unserved version"
    );
    for mut w in fixture("widgets-valid.yaml") {
        crds.admit(&mut w, None).unwrap_or_else(|e| panic!("{e}"));
        if w["metadata"]["name"] == "minimal" {
            assert_eq!(w["spec"], json!({"name": "abc", "mode": "Fast"}));
        } else {
            assert_eq!(w["spec"]["ports"][1], json!({"name": "https", "port": 80}));
            assert_eq!(w["spec"]["nickname"], Value::Null, "nullable keeps null");
        }
    }
    let mut other = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "spec": {"x": 1}});
    let before = other.clone();
    assert_eq!(crds.admit(&mut other, None), Ok(()));
    assert_eq!(other, before, "unregistered kinds pass unchanged");
}

#[test]
fn widget_schema_keywords_are_enforced_with_api_server_messages() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"name": "Abc"}), vec![r#"spec.name: Invalid value: "Abc": spec.name in body should match '^[a-z]+$'"#]),
        (json!({"name": ""}), vec![
            r#"spec.name: Invalid value: "": spec.name in body should be at least 1 chars long"#,
            r#"spec.name: Invalid value: "": spec.name in body should match '^[a-z]+$'"#,
        ]),
        (json!({"name": "abcdefghi"}), vec!["spec.name: Too long: may not be more than 8 bytes"]),
        (json!({"name": null}), vec!["spec.name: Required value"]),
        (json!({"size": 11}), vec!["spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"]),
        (json!({"size": "3"}), vec![r#"spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#]),
        (json!({"size": 2, "ratio": 1}), vec!["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"]),
        (json!({"size": 2, "ratio": 0}), vec!["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"]),
        (json!({"mode": "Medium"}), vec![r#"spec.mode: Unsupported value: "Medium": supported values: "Fast", "Slow""#]),
        (json!({"addr": "1.2.3"}), vec![r#"spec.addr: Invalid value: "1.2.3": spec.addr in body must be of type ipv4: "1.2.3""#]),
        (json!({"when": "yesterday"}), vec![r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#]),
        (json!({"tags": []}), vec![
            "spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items",
            r#"spec.tags: Invalid value: "array": exactly one tag must be t-main"#,
        ]),
        (json!({"tags": ["t-main", "t-a", "t-b", "t-c"]}), vec!["spec.tags: Too many: 4: must have at most 3 items"]),
        (json!({"tags": ["t-main", "t-a", "t-a"]}), vec![r#"spec.tags[2]: Duplicate value: "t-a""#]),
        (json!({"ports": [{"name": "a"}, {"name": "a", "port": 1}]}),
            vec![r#"spec.ports[1]: Duplicate value: map[string]interface {}{"name":"a"}"#]),
        (json!({"labels": {"a": "1", "b": "2", "c": "toolong"}}), vec![
            "spec.labels: Too many: 3: must have at most 2 items",
            "spec.labels.c: Too long: may not be more than 5 bytes",
        ]),
        (json!({"annotations": {}}), vec!["spec.annotations: Invalid value: 0: spec.annotations in body should have at least 1 properties"]),
        (json!({"bogus": 1, "ports": [{"name": "a", "x": 1}]}), vec!["spec.bogus: field not declared in schema", "spec.ports[0].x: field not declared in schema"]),
        (json!({"port": true}), vec![r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer-or-string: "boolean""#]),
        (json!({"choice": {}}), vec![r#"spec.choice: Invalid value: "object": "spec.choice" must validate one and only one schema (oneOf). Found none valid"#]),
        (json!({"choice": {"a": "1", "b": "2"}}), vec![r#"spec.choice: Invalid value: "object": "spec.choice" must validate one and only one schema (oneOf). Found 2 valid alternatives"#]),
        (json!({"host": "-bad-"}), vec![r#"spec.host: Invalid value: "string": "spec.host" must validate at least one schema (anyOf)"#]),
        (json!({"template": {"metadata": {}}}), vec!["spec.template.apiVersion: Required value", "spec.template.kind: Required value"]),
    ];
    for (spec, want) in cases {
        assert_eq!(widget_errors(spec.clone()), want, "{spec}");
    }
    // A null in a non-nullable field is pruned, not reported.
    let mut w = widget(json!({"name": "abc", "enabled": null}));
    assert_eq!(widgets().admit(&mut w, None), Ok(()));
    assert!(w["spec"].get("enabled").is_none());
}

#[test]
fn widget_cel_rules_are_enforced_with_their_messages() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        // isIP
        (
            json!({"peer": "nope"}),
            vec![r#"spec.peer: Invalid value: "string": peer must be an IP address"#],
        ),
        // format.dns1123Label().validate(): upper case, `_`, a leading `-`, over 63 characters
        (
            json!({"slug": "My_App"}),
            vec![r#"spec.slug: Invalid value: "string": slug must be a lowercase RFC 1123 label"#],
        ),
        (
            json!({"slug": "-app"}),
            vec![r#"spec.slug: Invalid value: "string": slug must be a lowercase RFC 1123 label"#],
        ),
        (
            json!({"slug": "a".repeat(64)}),
            vec![r#"spec.slug: Invalid value: "string": slug must be a lowercase RFC 1123 label"#],
        ),
        // all, startsWith, exists_one
        (
            json!({"tags": ["x"]}),
            vec![
                r#"spec.tags: Invalid value: "array": tags must start with t-"#,
                r#"spec.tags: Invalid value: "array": exactly one tag must be t-main"#,
            ],
        ),
        // filter, contains, size
        (
            json!({"tags": ["t-main", "t-tmp1", "t-tmp2"]}),
            vec![r#"spec.tags: Invalid value: "array": at most one temporary tag"#],
        ),
        // exists, matches
        (
            json!({"tags": ["t-main", "t-1"]}),
            vec![r#"spec.tags: Invalid value: "array": tags may not be numbers"#],
        ),
        // has, reason and fieldPath
        (
            json!({"ratio": 0.5}),
            vec!["spec.size: Required value: ratio requires size"],
        ),
        // split, messageExpression
        (
            json!({"domain": "localhost"}),
            vec![r#"spec: Invalid value: "object": domain localhost needs a dot"#],
        ),
        // endsWith, Forbidden reason with fieldPath
        (
            json!({"domain": "a.local"}),
            vec!["spec.domain: Forbidden: local domains are not allowed"],
        ),
        // duration
        (
            json!({"timeout": "1h1m"}),
            vec![r#"spec: Invalid value: "object": timeout must be at most 1h"#],
        ),
        // escaped property names
        (
            json!({"ref": {"namespace": "a", "x-y": "a", "opt": "on"}}),
            vec![r#"spec.ref: Invalid value: "object": namespace and x-y must differ"#],
        ),
        // evaluation errors
        (
            json!({"ref": {"namespace": "a", "x-y": "b"}}),
            vec![
                r#"spec.ref: Invalid value: "object": no such key: opt evaluating rule: opt must be on"#,
            ],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(widget_errors(spec.clone()), want, "{spec}");
    }
    // Valid labels pass format.dns1123Label().validate(), 63 characters included.
    for slug in ["my-app-1".to_owned(), "0".to_owned(), "a".repeat(63)] {
        let mut w = widget(json!({"name": "abc", "slug": slug}));
        assert_eq!(widgets().admit(&mut w, None), Ok(()), "{slug}");
    }
}

#[test]
fn widget_transition_rules_see_the_old_object() {
    let crds = widgets();
    let spec = json!({"name": "abc", "id": "one", "ports": [{"name": "a", "protocol": "TCP"}]});
    let mut old = widget(spec);
    crds.admit(&mut old, None).unwrap_or_else(|e| panic!("{e}"));

    let mut same = old.clone();
    assert_eq!(crds.admit(&mut same, Some(&old)), Ok(()));

    // No old value at the path: the transition rule is skipped.
    let mut new_port = widget(json!({"name": "abc", "id": "one",
        "ports": [{"name": "a", "protocol": "TCP"}, {"name": "b", "protocol": "UDP"}]}));
    assert_eq!(crds.admit(&mut new_port, Some(&old)), Ok(()));

    let mut changed =
        widget(json!({"name": "abc", "id": "two", "ports": [{"name": "a", "protocol": "UDP"}]}));
    let r = crds
        .admit(&mut changed, Some(&old))
        .expect_err("transition rules");
    assert_eq!(r.kind, "Widget.example.com");
    assert_eq!(r.name, "w");
    assert_eq!(r.errors[0].error, FieldErrorType::Invalid);
    assert_eq!(
        r.to_string(),
        r#"Widget.example.com "w" is invalid: [spec.id: Invalid value: "string": id is immutable, spec.ports[0]: Invalid value: "object": protocol is immutable]"#
    );
}

#[test]
fn objects_without_a_name_and_bad_crds_are_reported() {
    let crds = widgets();
    let mut w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}, "spec": {"name": "a"}});
    let r = crds.admit(&mut w, None).expect_err("no name");
    assert_eq!(
        r.to_string(),
        r#"Widget.example.com "" is invalid: metadata.name: Required value: name or generateName is required"#
    );

    let mut crd = fixture("widgets-crd.yaml").remove(0);
    crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["x-kubernetes-validations"][0]["rule"] = json!("self.size >");
    let err = Crds::new()
        .register(&crd)
        .expect_err("bad rule")
        .to_string();
    assert!(
        err.starts_with(
            r#"CRD Widget.example.com version v1: rule "self.size >" at spec: compilation failed"#
        ),
        "{err}"
    );

    let mut crd = fixture("widgets-crd.yaml").remove(0);
    crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["name"]["pattern"] = json!("([a-z]");
    let err = Crds::new()
        .register(&crd)
        .expect_err("bad pattern")
        .to_string();
    assert!(
        err.starts_with(
            r#"CRD Widget.example.com version v1: schema .spec.name: invalid pattern "([a-z]""#
        ),
        "{err}"
    );

    let err = Crds::new()
        .register(&json!({"apiVersion": "v1", "kind": "ConfigMap"}))
        .expect_err("not a CRD");
    assert_eq!(
        err.to_string(),
        r#"not an apiextensions.k8s.io/v1 CustomResourceDefinition (apiVersion "v1", kind "ConfigMap")"#
    );
}
