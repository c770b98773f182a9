//! The checked-in `crds/edgeplane.yaml` is what the types generate, and it has the shape a
//! cluster needs: both versions, storage v1beta1, the conversion webhook, columns and names.

use edgeplane::kinds::crd::generate::{crd_values, crds_yaml};
use serde_json::Value;

#[test]
fn generated_crds_match_the_checked_in_file() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds/edgeplane.yaml");
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = crds_yaml().expect("CRDs generate");
    assert!(
        on_disk == generated,
        "crds/edgeplane.yaml is out of date with the Rust types in src/crd; regenerate it with \
         `cargo run -- crds > crds/edgeplane.yaml`"
    );
}

#[test]
fn the_crds_serve_both_versions_through_the_webhook() {
    let crds = crd_values().expect("CRDs generate");
    let names: Vec<&str> = crds
        .iter()
        .map(|c| c["spec"]["names"]["kind"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, ["TrafficPolicy", "ProxyConfig"]);
    for (crd, short, columns) in [
        (&crds[0], "tp", vec!["Targets", "Accepted", "Age"]),
        (&crds[1], "pxc", vec!["Service type", "Age"]),
    ] {
        let spec = &crd["spec"];
        assert_eq!(spec["group"], "edgeplane.dev");
        assert_eq!(spec["names"]["shortNames"], serde_json::json!([short]));
        assert_eq!(
            spec["names"]["categories"],
            serde_json::json!(["edgeplane"])
        );
        let webhook = &spec["conversion"]["webhook"];
        assert_eq!(spec["conversion"]["strategy"], "Webhook");
        assert_eq!(
            webhook["conversionReviewVersions"],
            serde_json::json!(["v1"])
        );
        let service = &webhook["clientConfig"]["service"];
        assert_eq!(service["namespace"], "edgeplane-system");
        assert_eq!(service["name"], "edgeplane-webhook");
        assert_eq!(service["path"], "/convert");
        assert_eq!(service["port"], 443);
        assert!(webhook["clientConfig"].get("caBundle").is_none());
        let versions = spec["versions"].as_array().expect("versions");
        let find = |name: &str| -> &Value {
            versions
                .iter()
                .find(|v| v["name"] == name)
                .unwrap_or_else(|| panic!("version {name}"))
        };
        let (beta, alpha) = (find("v1beta1"), find("v1alpha1"));
        assert_eq!(versions.len(), 2);
        assert_eq!(
            (beta["storage"].clone(), alpha["storage"].clone()),
            (true.into(), false.into())
        );
        assert_eq!(
            (beta["served"].clone(), alpha["served"].clone()),
            (true.into(), true.into())
        );
        assert_eq!(alpha["deprecated"], true);
        assert!(alpha["deprecationWarning"]
            .as_str()
            .unwrap_or_default()
            .contains("v1beta1"));
        assert!(beta.get("deprecated").is_none_or(|d| d == false));
        let shown: Vec<&str> = beta["additionalPrinterColumns"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| c["name"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(shown, columns);
    }
    assert_eq!(
        crds[0]["spec"]["versions"][0]["subresources"]["status"],
        serde_json::json!({})
    );
}

#[test]
fn the_crds_subcommand_prints_the_generated_file() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_edgeplane"))
        .arg("crds")
        .output()
        .expect("edgeplane crds runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        crds_yaml().expect("CRDs generate")
    );
}
