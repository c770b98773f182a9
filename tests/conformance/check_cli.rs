//! `edgeplane check` on scenario fixture directories prints the conditions the scenarios expect.

use std::process::Command;

use crate::harness::Env;

/// Runs `edgeplane check` on a started scenario's directory: exit code and YAML output.
fn check(env: &Env) -> (Option<i32>, serde_yaml_ng::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_edgeplane"))
        .args(["check", "--config-dir"])
        .arg(env.dir())
        .args(crate::harness::crds_args())
        .output()
        .expect("run edgeplane check");
    let yaml = serde_yaml_ng::from_slice(&out.stdout).expect("check prints YAML");
    (out.status.code(), yaml)
}

/// The conditions of `kind ns/name` (for routes: of its first parent) as `type=status/reason`.
fn conditions(yaml: &serde_yaml_ng::Value, kind: &str, name: &str) -> Vec<String> {
    let entry = yaml
        .as_sequence()
        .into_iter()
        .flatten()
        .find(|e| e["kind"].as_str() == Some(kind) && e["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("check output has no {kind} {name}"));
    let holder = if kind == "HTTPRoute" {
        &entry["status"]["parents"][0]
    } else {
        &entry["status"]
    };
    holder["conditions"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={}/{}",
                c["type"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn has(list: &[String], want: &str) {
    assert!(list.iter().any(|c| c == want), "{want} not in {list:?}");
}

#[tokio::test]
async fn check_reports_scenario_conditions() {
    let cases: [(&str, &str, &str, &[&str]); 4] = [
        (
            include_str!("manifests/simple-same-namespace.yaml"),
            "HTTPRoute",
            "plain-route",
            &["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"],
        ),
        (
            include_str!("manifests/invalid-reference-grant.yaml"),
            "HTTPRoute",
            "not-granted",
            &[
                "Accepted=True/Accepted",
                "ResolvedRefs=False/RefNotPermitted",
            ],
        ),
        (
            include_str!("manifests/invalid-cross-namespace-parent.yaml"),
            "HTTPRoute",
            "foreign-parent",
            &["Accepted=False/NotAllowedByListeners"],
        ),
        (
            include_str!("manifests/invalid-backend-nonexistent.yaml"),
            "HTTPRoute",
            "missing-service",
            &["ResolvedRefs=False/BackendNotFound"],
        ),
    ];
    for (manifests, kind, name, want) in cases {
        let env = Env::start(manifests).await.expect("scenario starts");
        let (code, yaml) = check(&env);
        let got = conditions(&yaml, kind, name);
        for w in want {
            has(&got, w);
        }
        let problems = want.iter().any(|w| w.contains("=False/"));
        assert_eq!(
            code,
            Some(if problems { 1 } else { 0 }),
            "exit code for {name}"
        );
        has(
            &conditions(&yaml, "Gateway", "same-namespace"),
            "Accepted=True/Accepted",
        );
        has(
            &conditions(&yaml, "GatewayClass", "edgeplane-conformance"),
            "Accepted=True/Accepted",
        );
    }
}
