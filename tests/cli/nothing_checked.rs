//! `check` never passes vacuously: an empty directory, a directory of someone else's objects
//! and a kind of our API groups that does not exist each get their own exit code and a line
//! saying why; files are accepted as well as directories, and every output form prints the same
//! objects.

use std::path::Path;
use std::process::{Command, Output};

use super::{text, write, BIN, CONTROLLER};

fn check(args: &[&str], paths: &[&Path]) -> Output {
    let mut c = Command::new(BIN);
    c.arg("check").args(args).env("RUST_LOG", "warn");
    for p in paths {
        c.arg("-f").arg(p);
    }
    c.output().expect("run edgeplane check")
}

/// The summary line of stderr, which every run prints.
fn summary(out: &Output) -> String {
    let err = text(&out.stderr);
    err.lines()
        .find(|l| l.starts_with("summary: "))
        .unwrap_or_else(|| panic!("no summary line in {err}"))
        .to_owned()
}

fn class(name: &str, controller: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: {name}\nspec:\n  controllerName: {controller}\n"
    )
}

#[test]
fn an_empty_directory_exits_3_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    // Files that are not manifests are not read.
    write(dir.path(), "README.md", "# not a manifest\n");
    let out = check(&[], &[dir.path()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("warning: nothing of ours was checked: no manifest found in"),
        "{err}"
    );
    assert!(
        summary(&out).starts_with("summary: 0 objects read from 0 files, 0 admitted, 0 owned"),
        "{err}"
    );
    let allowed = check(&["--allow-empty"], &[dir.path()]);
    assert_eq!(allowed.status.code(), Some(0), "{}", text(&allowed.stderr));
    assert!(text(&allowed.stderr).contains("note: nothing of ours was checked"));
}

#[test]
fn someone_elses_objects_exit_3_naming_the_classes_found() {
    let dir = tempfile::tempdir().unwrap();
    let text_ = format!(
        "{}---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: gw\nspec:\n  gatewayClassName: other\n  listeners:\n  - name: http\n    protocol: HTTP\n    port: 80\n",
        class("other", "example.com/other")
    );
    write(dir.path(), "all.yaml", &text_);
    let out = check(&[], &[dir.path()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!(
            "no GatewayClass with controllerName {CONTROLLER} (found: other (example.com/other))"
        )),
        "{err}"
    );
    assert_eq!(
        summary(&out),
        format!("summary: 3 objects read from 1 file, 2 admitted, 0 owned by controller {CONTROLLER}, 0 with problems, 0 errors")
    );
    // The same objects are ours under their controller's name.
    let theirs = check(&["--controller-name", "example.com/other"], &[dir.path()]);
    assert_eq!(theirs.status.code(), Some(0), "{}", text(&theirs.stderr));
}

#[test]
fn an_unknown_kind_of_our_groups_exits_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = format!(
        "{}---\napiVersion: gateway.networking.k8s.io/v1\nkind: HttpRoute\nmetadata:\n  name: web\n---\napiVersion: edgeplane.dev/v1beta1\nkind: ProxyConfigs\nmetadata:\n  name: p\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: someone-elses\n",
        class("edgeplane", CONTROLLER)
    );
    write(dir.path(), "a.yaml", &manifests);
    let out = check(&[], &[dir.path()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("a.yaml:8: unknown kind HttpRoute in gateway.networking.k8s.io (kinds are case-sensitive: did you mean HTTPRoute?)"),
        "{err}"
    );
    assert!(
        err.contains("a.yaml:13: unknown kind ProxyConfigs in edgeplane.dev"),
        "{err}"
    );
    assert!(!err.contains("ConfigMap"), "someone else's kind: {err}");
    assert!(summary(&out).ends_with(", 2 errors"), "{err}");
}

#[test]
fn files_and_directories_print_the_same_objects_in_every_output() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "class.yaml", &class("edgeplane", CONTROLLER));
    write(
        dir.path(),
        "more/gw.manifest",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: gw\nspec:\n  gatewayClassName: edgeplane\n  listeners:\n  - name: http\n    protocol: HTTP\n    port: 80\n",
    );
    let paths = [
        dir.path().join("class.yaml").into_boxed_path(),
        // Named explicitly, a file is read whatever its extension.
        dir.path().join("more/gw.manifest").into_boxed_path(),
    ];
    let paths: Vec<&Path> = paths.iter().map(|p| &**p).collect();
    let yaml = check(&[], &paths);
    assert_eq!(yaml.status.code(), Some(0), "{}", text(&yaml.stderr));
    assert_eq!(
        summary(&yaml),
        format!("summary: 2 objects read from 2 files, 2 admitted, 2 owned by controller {CONTROLLER}, 0 with problems, 0 errors")
    );
    let json = check(&["--output", "json"], &paths);
    assert_eq!(json.status.code(), Some(0));
    let from_yaml: serde_json::Value = serde_yaml_ng::from_slice(&yaml.stdout).unwrap();
    let from_json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| format!("{} {}", e["kind"], e["name"]))
            .collect()
    };
    assert_eq!(names(&from_yaml), names(&from_json));
    assert_eq!(
        names(&from_json),
        ["\"GatewayClass\" \"edgeplane\"", "\"Gateway\" \"gw\""]
    );
    let short = check(&["-o", "summary"], &paths);
    assert_eq!(short.status.code(), Some(0));
    assert_eq!(
        text(&short.stdout),
        "ok GatewayClass edgeplane\nok Gateway default/gw\n"
    );
    // The directory itself: the `.manifest` file is not a manifest file name there.
    let walked = check(&["-o", "summary"], &[dir.path()]);
    assert_eq!(text(&walked.stdout), "ok GatewayClass edgeplane\n");
}
