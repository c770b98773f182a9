//! Golden-file tests of the translator: every `tests/translate/<case>/input.yaml` is translated
//! with fixed options and compared with `table.json` and `status.yaml` next to it.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test --test translate` and review the diff.

use std::fs;
use std::path::{Path, PathBuf};

use edgeplane::provider::manifest::{parse_manifests, parse_manifests_unvalidated};
use edgeplane::snapshot::Snapshot;
use edgeplane::translate::{translate, TranslateOptions, Translation, DEFAULT_CONTROLLER_NAME};

fn options() -> TranslateOptions {
    TranslateOptions {
        ingress: Default::default(),
        controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: "127.0.0.1".parse().expect("ip"),
        now: "2026-01-01T00:00:00Z".parse().expect("timestamp"),
        generation: 1,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    }
}

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/translate");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .expect("tests/translate exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.join("input.yaml").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Cases holding objects the API server (and admission) would refuse, on purpose: they show how
/// the translator copes when such objects reach it anyway (a cluster whose CRDs are older or
/// lack validation). They are defaulted but not validated; every other case must be admitted.
const REFUSED_BY_API_SERVER: &[&str] = &[
    "backend-not-found",
    "https-invalid-certificates",
    "invalid-filter-combination",
    "request-mirror",
];

fn run(dir: &Path) -> Translation {
    let input = dir.join("input.yaml");
    let text = fs::read_to_string(&input).expect("read input");
    assert!(
        text.starts_with('#'),
        "{} must start with a comment saying what it shows",
        input.display()
    );
    let case = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let validated = parse_manifests(&input, &text);
    let objects = if REFUSED_BY_API_SERVER.contains(&case) {
        let refused = validated.expect_err("case listed as refused by the API server is admitted");
        assert!(refused.message.contains("is invalid"), "{refused}");
        parse_manifests_unvalidated(&input, &text).expect("parse input")
    } else {
        validated.expect("parse input")
    };
    translate(&Snapshot::from_objects(objects), &options())
}

fn check(dir: &Path, file: &str, actual: &str, update: bool, failures: &mut Vec<String>) {
    let path = dir.join(file);
    if update {
        fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        failures.push(format!(
            "{}: differs from the golden file\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        ));
    }
}

#[test]
fn golden_cases() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let cases = cases();
    assert!(
        cases.len() >= 25,
        "expected the golden cases, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for dir in &cases {
        let t = run(dir);
        let table = serde_json::to_string_pretty(&t.table).expect("table json") + "\n";
        let status = serde_yaml_ng::to_string(&t.status).expect("status yaml");
        check(dir, "table.json", &table, update, &mut failures);
        check(dir, "status.yaml", &status, update, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn translation_is_deterministic() {
    for dir in cases() {
        let a = run(&dir);
        let b = run(&dir);
        assert_eq!(
            serde_json::to_string(&a.table).expect("json"),
            serde_json::to_string(&b.table).expect("json"),
            "{}",
            dir.display()
        );
        assert_eq!(a.status, b.status, "{}", dir.display());
    }
}

/// The route serving `host` + `path` on `bind`, as `namespace/name`.
fn served_by(t: &Translation, bind: &str, host: &str, path: &str) -> Option<String> {
    let addr = bind.parse().expect("socket address");
    let headers = http::HeaderMap::new();
    let req = edgeplane::table::RequestView {
        host,
        path,
        query: None,
        method: &http::Method::GET,
        headers: &headers,
    };
    t.table
        .listener(&addr)?
        .route(&req)
        .map(|r| r.route.to_string())
}

#[test]
fn listener_isolation_routes_each_host_to_its_listener() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/translate/listener-isolation");
    let t = run(&dir);
    let bind = "127.0.0.1:8080";
    assert_eq!(
        served_by(&t, bind, "foo.example.com", "/").as_deref(),
        Some("default/foo-route")
    );
    assert_eq!(
        served_by(&t, bind, "bar.example.com", "/x").as_deref(),
        Some("default/wild-route")
    );
    // Owned by the `quiet` listener, which has no routes: the wildcard route must not answer.
    assert_eq!(served_by(&t, bind, "quiet.example.com", "/"), None);
    assert_eq!(served_by(&t, bind, "other.org", "/"), None);
}

#[test]
fn precedence_prefers_older_routes_and_longer_prefixes() {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/translate/precedence-across-routes");
    let t = run(&dir);
    let bind = "127.0.0.1:8080";
    let at = |path: &str| served_by(&t, bind, "any.example", path);
    assert_eq!(at("/api/x").as_deref(), Some("default/older"));
    assert_eq!(at("/api/v1/x").as_deref(), Some("zeta/a-route"));
    assert_eq!(at("/same").as_deref(), Some("default/b-route"));
    assert_eq!(at("/elsewhere"), None);
}

#[test]
fn less_specific_hostnames_serve_what_the_most_specific_do_not() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/translate/hostname-fallback");
    let t = run(&dir);
    let at = |host: &str, path: &str| served_by(&t, "127.0.0.1:8080", host, path);
    assert_eq!(
        at("foo.example.com", "/a").as_deref(),
        Some("default/exact")
    );
    assert_eq!(
        at("foo.example.com", "/b").as_deref(),
        Some("default/wildcard")
    );
    assert_eq!(
        at("foo.example.com", "/c").as_deref(),
        Some("default/catch-all")
    );
    assert_eq!(
        at("bar.example.com", "/a").as_deref(),
        Some("default/catch-all")
    );
    assert_eq!(
        at("bar.example.com", "/b").as_deref(),
        Some("default/wildcard")
    );
    // Owned by the `isolated` listener, which has no routes.
    assert_eq!(at("isolated.example.com", "/b"), None);
}
