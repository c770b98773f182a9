//! The file provider on real temporary directories: loading, and watching for changes.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgeplane::admission::builtin;
use edgeplane::metrics::Metrics;
use edgeplane::provider::file::{load_dir, watch_dir, ConfigDir, DirLoad, SkippedKind};
use edgeplane::snapshot::Snapshot;
use tokio::sync::watch;

/// Loads `dir` with the built-in defaults and no error expected.
fn load(dir: &Path) -> (Snapshot, Vec<SkippedKind>) {
    let DirLoad {
        snapshot,
        skipped,
        errors,
    } = load_dir(dir, builtin::crds()).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    (snapshot, skipped)
}

/// A watched directory, loaded once: its first snapshot and the watch.
fn watched(
    dir: &Path,
    metrics: Arc<Metrics>,
) -> (
    watch::Receiver<Arc<Snapshot>>,
    edgeplane::provider::file::DirWatcher,
) {
    let mut config = ConfigDir::new(dir, builtin::crds());
    let first = config.load().unwrap();
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    let (tx, rx) = watch::channel(Arc::new(first.snapshot));
    (rx, watch_dir(config, tx, metrics).unwrap())
}

fn service(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  ports:\n  - port: 80\n"
    )
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

fn service_names(s: &Snapshot) -> Vec<String> {
    s.services
        .iter()
        .map(|s| s.metadata.name.clone().unwrap_or_default())
        .collect()
}

#[test]
fn loads_manifests_recursively_in_path_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "b.yaml", &service("b"));
    write(
        d,
        "a.yml",
        &format!("{}---\n{}", service("a1"), service("a2")),
    );
    write(
        d,
        "sub/deeper/c.json",
        r#"{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "c", "namespace": "other"}}"#,
    );
    write(
        d,
        "sub/route.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r\nspec: {}\n",
    );
    // Never read: hidden files and folders, editor leftovers, other extensions.
    for ignored in [
        ".hidden.yaml",
        ".git/x.yaml",
        "b.yaml~",
        "#b.yaml#",
        "notes.txt",
    ] {
        write(d, ignored, &service("ignored"));
    }
    write(d, ".b.yaml.swp", "not yaml: [");
    let (snapshot, skipped) = load(d);
    assert_eq!(service_names(&snapshot), ["a1", "a2", "b", "c"]);
    assert_eq!(
        snapshot.services[0].metadata.namespace.as_deref(),
        Some("default")
    );
    assert_eq!(
        snapshot.services[3].metadata.namespace.as_deref(),
        Some("other")
    );
    assert_eq!(snapshot.http_routes.len(), 1);
    assert!(skipped.is_empty());
}

#[test]
fn skipped_kinds_are_reported_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n";
    write(
        dir.path(),
        "one.yaml",
        &format!("{deployment}---\n{deployment}"),
    );
    write(
        dir.path(),
        "two.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
    );
    write(dir.path(), "three.yaml", deployment);
    let (snapshot, skipped) = load(dir.path());
    assert!(snapshot.is_empty());
    let kinds: Vec<String> = skipped.iter().map(ToString::to_string).collect();
    assert_eq!(kinds, ["apps/v1 Deployment", "v1 ConfigMap"]);
}

#[test]
fn a_parse_error_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "good.yaml", &service("good"));
    write(
        dir.path(),
        "sub/bad.yaml",
        &format!(
            "{}---\napiVersion: v1\nkind: Service\nmetadata:\n  name: [x\n",
            service("ok")
        ),
    );
    let loaded = load_dir(dir.path(), builtin::crds()).unwrap();
    let [e] = loaded.errors.as_slice() else {
        panic!("{:?}", loaded.errors)
    };
    assert!(e.path.ends_with("sub/bad.yaml"), "{e}");
    assert_eq!(e.line, Some(13), "{e}");
    assert!(e.to_string().contains("bad.yaml:13"), "{e}");
    // The other file is admitted; the broken one had nothing admitted before.
    assert_eq!(service_names(&loaded.snapshot), ["good"]);
    assert!(
        e.message
            .ends_with("none of the file's objects is admitted"),
        "{e}"
    );
}

#[test]
fn a_missing_directory_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let e = load_dir(&missing, builtin::crds()).unwrap_err();
    assert_eq!(e.path, missing);
}

/// Waits (bounded) until the channel holds a snapshot for which `ok` holds.
async fn wait_for(
    rx: &mut watch::Receiver<Arc<Snapshot>>,
    ok: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let current = rx.borrow_and_update().clone();
        if ok(&current) {
            return current;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.changed()).await {
            Ok(Ok(())) => {}
            _ => panic!(
                "no matching snapshot in time; last: {:?}",
                service_names(&current)
            ),
        }
    }
}

async fn wait_until(what: &str, ok: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_picks_up_changes_and_keeps_the_last_good_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "a.yaml", &service("a"));
    let metrics = Metrics::new();
    let (mut rx, watcher) = watched(d, metrics.clone());

    write(d, "nested/b.yaml", &service("b"));
    wait_for(&mut rx, |s| service_names(s) == ["a", "b"]).await;

    // Our own reads must not wake the watcher again (after any follow-up reload has run).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let settled = watcher.reloads();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(watcher.reloads(), settled, "reloads without changes");

    let errors = || metrics.config_errors.with_label_values(&["file"]).get();
    write(
        d,
        "a.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: [broken\n",
    );
    wait_until("the broken file to be counted", || errors() >= 1).await;
    assert!(
        !rx.has_changed().unwrap(),
        "a broken directory must not be sent"
    );
    assert_eq!(service_names(&rx.borrow()), ["a", "b"]);

    let failed = errors();
    write(d, "a.yaml", &service("fixed"));
    wait_for(&mut rx, |s| service_names(s) == ["b", "fixed"]).await;

    std::fs::remove_file(d.join("nested/b.yaml")).unwrap();
    wait_for(&mut rx, |s| service_names(s) == ["fixed"]).await;
    assert!(
        errors() <= failed + 1,
        "a good directory counted as an error"
    );
    drop(watcher);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_writes_coalesces() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "s.yaml", &service("s-start"));
    let (mut rx, watcher) = watched(d, Metrics::new());

    const WRITES: u64 = 50;
    for i in 0..WRITES {
        write(d, "s.yaml", &service(&format!("s-{i}")));
    }
    let last = format!("s-{}", WRITES - 1);
    wait_for(&mut rx, |s| service_names(s) == [last.as_str()]).await;
    // Let any follow-up reload finish before counting.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let reloads = watcher.reloads();
    println!("{WRITES} writes caused {reloads} reloads");
    // Loose on purpose: on a loaded machine the writes themselves slow down and more reloads
    // fit between them; without coalescing there would be one reload per write.
    assert!(
        (1..=WRITES / 2).contains(&reloads),
        "{WRITES} writes caused {reloads} reloads"
    );
    assert_eq!(service_names(&rx.borrow()), [last.as_str()]);
}
