//! `check --crds` on objects the CRD refuses: the real binary exits 2 and lists every rejected
//! object on stderr with its file and line, the field path and the CRD's own message.

use super::{text, write, BIN};
use std::process::Command;

/// Two CEL rules: no wildcard hostnames, no parentRef to a Gateway named `reserved`.
const CRD: &str = include_str!("httproute-crd.yaml");

const ROUTES: &str = r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: fine
spec:
  parentRefs:
  - name: gw
  hostnames: [a.example]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: wild
spec:
  parentRefs:
  - name: gw
  hostnames: ["*.example"]
"#;

const RESERVED: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: taken
  namespace: team
spec:
  parentRefs:
  - name: gw
  - name: reserved
";

#[test]
fn check_lists_each_crd_rejection_with_file_line_field_and_message() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "crd.yaml", CRD);
    write(dir.path(), "config/routes.yaml", ROUTES);
    write(dir.path(), "config/sub/reserved.yaml", RESERVED);
    let out = Command::new(BIN)
        .args(["check", "--config-dir"])
        .arg(dir.path().join("config"))
        .arg("--crds")
        .arg(dir.path().join("crd.yaml"))
        .env("RUST_LOG", "warn")
        .output()
        .expect("run edgeplane check");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 2, "{err}");
    let wild = errors
        .iter()
        .find(|l| l.contains(r#""wild""#))
        .unwrap_or_else(|| panic!("no rejection of wild in {err}"));
    assert!(
        wild.contains(&format!(
            "{}:17: HTTPRoute.gateway.networking.k8s.io \"wild\" is invalid: \
             spec.hostnames: Invalid value: \"array\": wildcard hostnames are not allowed here",
            std::path::Path::new("config").join("routes.yaml").display()
        )),
        "{wild}"
    );
    let taken = errors
        .iter()
        .find(|l| l.contains(r#""taken""#))
        .unwrap_or_else(|| panic!("no rejection of taken in {err}"));
    assert!(
        taken.contains(&format!(
            "{}:9: HTTPRoute.gateway.networking.k8s.io \"taken\" is invalid: \
             spec.parentRefs[1]: Invalid value: \"object\": the Gateway named reserved is not \
             for routes",
            std::path::Path::new("sub").join("reserved.yaml").display()
        )),
        "{taken}"
    );
    // The valid route in the same file as a rejected one is admitted: nothing names it.
    assert!(!err.contains(r#""fine""#), "{err}");
}
