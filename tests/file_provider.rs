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
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: c\n",
    );
    write(dir.path(), "three.yaml", deployment);
    let (snapshot, skipped) = load(dir.path());
    assert!(snapshot.is_empty());
    let kinds: Vec<String> = skipped.iter().map(ToString::to_string).collect();
    assert_eq!(kinds, ["apps/v1 Deployment", "v1 Pod"]);
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

#[test]
fn an_object_defined_in_two_files_names_both_and_keeps_its_admitted_version() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let with_port = |port: u16| {
        format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: twin\nspec:\n  ports:\n  - port: {port}\n")
    };
    write(d, "a.yaml", &with_port(80));
    let mut config = ConfigDir::new(d, builtin::crds());
    let first = config.load().unwrap();
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    write(
        d,
        "b.yaml",
        &format!("{}---\n{}", service("other"), with_port(81)),
    );
    let (applied, snapshot) = config.reload().unwrap();
    let [e] = applied.errors.as_slice() else {
        panic!("{:?}", applied.errors)
    };
    let message = e.to_string();
    assert!(message.contains("defined more than once"), "{message}");
    assert!(
        message.contains("a.yaml:1") && message.contains("b.yaml:9"),
        "{message}"
    );
    assert!(
        message.ends_with("the previously admitted version stays in force"),
        "{message}"
    );
    assert_eq!(service_names(&snapshot), ["other", "twin"]);
    let twin = snapshot
        .services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("twin"));
    let port = twin.and_then(|s| s.spec.as_ref()?.ports.as_ref()?.first().map(|p| p.port));
    assert_eq!(port, Some(80), "the first admitted version stays");
}

/// A file of nested aliases (about 700 bytes expanding to 9^9 strings) is an error naming it;
/// the others load.
#[test]
fn nested_aliases_are_refused_with_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut laughs = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n  a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n");
    let names = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 9].join(",");
        laughs.push_str(&format!("  {}: &{} [{refs}]\n", w[1], w[1]));
    }
    assert!(laughs.len() < 1024, "{}", laughs.len());
    write(d, "laughs.yaml", &laughs);
    write(d, "ok.yaml", &service("ok"));
    let loaded = load_dir(d, builtin::crds()).unwrap();
    let [e] = loaded.errors.as_slice() else {
        panic!("{:?}", loaded.errors)
    };
    assert!(e.path.ends_with("laughs.yaml"), "{e}");
    assert!(e.message.contains("expands beyond"), "{e}");
    assert_eq!(service_names(&loaded.snapshot), ["ok"]);
}

#[cfg(unix)]
mod symlinks {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Loads `dir` on another thread and fails if that takes more than 10 s (a walk that
    /// explodes would never return).
    fn load_bounded(dir: &Path) -> DirLoad {
        let dir = dir.to_owned();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(load_dir(&dir, builtin::crds()).unwrap());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the directory walk returns")
    }

    #[test]
    fn loops_to_the_directory_itself_are_reported_and_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, "s.yaml", &service("s"));
        write(d, "sub/t.yaml", &service("t"));
        symlink(".", d.join("a")).unwrap();
        symlink(".", d.join("b")).unwrap();
        symlink("..", d.join("sub/up")).unwrap();
        let loaded = load_bounded(d);
        // Every object once: no "defined more than once" from a second path.
        assert_eq!(service_names(&loaded.snapshot), ["s", "t"]);
        let mut paths: Vec<_> = loaded.errors.iter().map(|e| e.path.clone()).collect();
        paths.sort();
        assert_eq!(paths, [d.join("a"), d.join("b"), d.join("sub/up")]);
        assert!(
            loaded
                .errors
                .iter()
                .all(|e| e.message.contains("symlink loop")),
            "{:?}",
            loaded.errors
        );
    }

    #[test]
    fn a_single_loop_loads_each_object_once() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, "s.yaml", &service("s"));
        symlink(".", d.join("loop")).unwrap();
        // A second link to the same file is read once, under its first name.
        symlink("s.yaml", d.join("t.yaml")).unwrap();
        let loaded = load_bounded(d);
        assert_eq!(service_names(&loaded.snapshot), ["s"]);
        let [e] = loaded.errors.as_slice() else {
            panic!("{:?}", loaded.errors)
        };
        assert_eq!(e.path, d.join("loop"));
    }

    /// The layout kubelet gives a mounted ConfigMap: `x.yaml -> ..data/x.yaml`,
    /// `..data -> ..<timestamp>`, updated by swapping `..data` with a rename.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mounted_configmap_links_load_and_follow_updates() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, "..v1/svc.yaml", &service("v1"));
        symlink("..v1", d.join("..data")).unwrap();
        symlink("..data/svc.yaml", d.join("svc.yaml")).unwrap();
        let (snapshot, _) = load(d);
        assert_eq!(service_names(&snapshot), ["v1"]);

        let (mut rx, watcher) = watched(d, Metrics::new());
        write(d, "..v2/svc.yaml", &service("v2"));
        symlink("..v2", d.join("..data_tmp")).unwrap();
        std::fs::rename(d.join("..data_tmp"), d.join("..data")).unwrap();
        wait_for(&mut rx, |s| service_names(s) == ["v2"]).await;
        drop(watcher);
    }

    /// With loops in the directory, the watch still starts and changes still go live; the
    /// loops are reported once, not on every reload.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn loops_are_reported_once_and_changes_still_go_live() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, "a.yaml", &service("a"));
        symlink(".", d.join("x")).unwrap();
        symlink(".", d.join("y")).unwrap();
        let mut config = ConfigDir::new(d, builtin::crds());
        let first = config.load().unwrap();
        assert_eq!(first.errors.len(), 2, "{:?}", first.errors);
        let (tx, mut rx) = watch::channel(Arc::new(first.snapshot));
        let metrics = Metrics::new();
        let watcher = watch_dir(config, tx, metrics.clone()).unwrap();
        for i in 0..3 {
            write(d, "b.yaml", &service(&format!("b{i}")));
            let want = format!("b{i}");
            wait_for(&mut rx, |s| service_names(s) == ["a", want.as_str()]).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(metrics.config_errors.with_label_values(&["file"]).get(), 0);
        drop(watcher);
    }
}

/// A file rewritten in place (truncated, then written in two chunks with a pause, on one open
/// handle or on two) never loses its objects: every snapshot sent holds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_place_rewrites_never_drop_the_file_objects() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = |gen: usize| {
        (0..20)
            .map(|i| service(&format!("s{i}-g{gen}")).replace("port: 80", "port: 8080"))
            .collect::<Vec<_>>()
            .join("---\n")
    };
    write(d, "svc.yaml", &text(0));
    let (mut rx, watcher) = watched(d, Metrics::new());
    let path = d.join("svc.yaml");
    for gen in 1..=6 {
        let next = text(gen);
        let (head, tail) = next.split_at(next.len() / 2);
        if gen % 2 == 1 {
            // One handle: truncate, write, pause, write, close.
            let mut f = std::fs::File::create(&path).unwrap();
            tokio::time::sleep(Duration::from_millis(30)).await;
            f.write_all(head.as_bytes()).unwrap();
            tokio::time::sleep(Duration::from_millis(60)).await;
            f.write_all(tail.as_bytes()).unwrap();
            drop(f);
        } else {
            // As a shell would: `: > f`, then two appends, each closing the file.
            std::fs::File::create(&path).unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(head.as_bytes()).unwrap();
            drop(f);
            tokio::time::sleep(Duration::from_millis(20)).await;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(tail.as_bytes()).unwrap();
            drop(f);
        }
        let want = format!("s19-g{gen}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = rx.borrow_and_update().clone();
            assert_eq!(
                s.services.len(),
                20,
                "a snapshot lost objects: {:?}",
                service_names(&s)
            );
            if service_names(&s).contains(&want) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                tokio::time::timeout(left, rx.changed()).await.is_ok(),
                "generation {gen} never loaded"
            );
        }
    }
    drop(watcher);
}
