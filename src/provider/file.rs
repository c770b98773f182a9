//! The file provider: a directory of YAML/JSON manifests read into a [`Snapshot`], and re-read on
//! change with `notify`. A directory that fails to load keeps the previous snapshot in place.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::manifest::{parse_manifests, ManifestError, Object};
use crate::metrics::Metrics;
use crate::snapshot::Snapshot;

/// Directories nested deeper than this are not read (guards against symlink loops).
const MAX_DEPTH: usize = 32;

/// Time given to a writer to finish a file after the first event of a burst.
const SETTLE: Duration = Duration::from_millis(5);

/// A kind the product does not read, found while loading a directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SkippedKind {
    pub api_version: String,
    pub kind: String,
}

impl std::fmt::Display for SkippedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)
    }
}

/// Errors of the watcher itself (not of the files it reads).
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("watch {}: {source}", path.display())]
    Notify {
        path: PathBuf,
        #[source]
        source: notify::Error,
    },
}

/// Reads every manifest below `dir` into one snapshot. Returns the distinct kinds it skipped
/// (each logged once). The first file that cannot be read or parsed fails the whole load.
pub fn load_dir(dir: &Path) -> Result<(Snapshot, Vec<SkippedKind>), ManifestError> {
    load(dir).map(|l| (l.snapshot, l.skipped))
}

struct Loaded {
    snapshot: Snapshot,
    skipped: Vec<SkippedKind>,
    /// Hash of every file's path and content, to skip reloads that change nothing.
    fingerprint: u64,
}

fn load(dir: &Path) -> Result<Loaded, ManifestError> {
    let mut files = Vec::new();
    collect_files(dir, 0, &mut files)?;
    files.sort();
    let mut hasher = DefaultHasher::new();
    let mut objects = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).map_err(|e| io_error(path, &e))?;
        path.hash(&mut hasher);
        text.hash(&mut hasher);
        objects.extend(parse_manifests(path, &text)?);
    }
    let mut skipped = BTreeSet::new();
    for o in &objects {
        if let Object::Skipped {
            api_version, kind, ..
        } = o
        {
            skipped.insert(SkippedKind {
                api_version: api_version.clone(),
                kind: kind.clone(),
            });
        }
    }
    for s in &skipped {
        tracing::info!(dir = %dir.display(), kind = %s, "ignoring objects of a kind edgeplane does not read");
    }
    Ok(Loaded {
        snapshot: Snapshot::from_objects(objects),
        skipped: skipped.into_iter().collect(),
        fingerprint: hasher.finish(),
    })
}

fn io_error(path: &Path, e: &std::io::Error) -> ManifestError {
    ManifestError {
        path: path.to_owned(),
        line: None,
        column: None,
        message: e.to_string(),
    }
}

/// Hidden files and the temporary files of editors (`.x.swp`, `x~`, `#x#`) are never read.
fn ignored_name(name: &str) -> bool {
    name.starts_with('.')
        || name.starts_with('#')
        || name.ends_with('~')
        || name.ends_with(".swp")
        || name.ends_with(".swx")
        || name.ends_with(".tmp")
}

fn is_manifest(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

fn collect_files(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), ManifestError> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| io_error(dir, &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, &e))?;
        let path = entry.path();
        let name = entry.file_name();
        if ignored_name(&name.to_string_lossy()) {
            continue;
        }
        // Follows symlinks, as in mounted ConfigMaps (`x.yaml -> ..data/x.yaml`).
        let Ok(meta) = std::fs::metadata(&path) else {
            continue; // a dangling link, or a file deleted while we list
        };
        if meta.is_dir() {
            collect_files(&path, depth + 1, out)?;
        } else if meta.is_file() && is_manifest(&path) {
            out.push(path);
        }
    }
    Ok(())
}

/// Keeps a directory watched; dropping it stops the watcher and its reload task.
pub struct DirWatcher {
    _watcher: notify::RecommendedWatcher,
    task: JoinHandle<()>,
    reloads: Arc<AtomicU64>,
}

impl DirWatcher {
    /// Number of reloads attempted since the watch started (successful or not).
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }
}

impl Drop for DirWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// True for events that may change what [`load_dir`] reads; our own reads (open/close) are not.
fn relevant(event: &notify::Event) -> bool {
    let kind_matters = match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    };
    kind_matters
        && (event.paths.is_empty()
            || event.paths.iter().any(|p| {
                p.file_name()
                    .is_none_or(|n| !ignored_name(&n.to_string_lossy()))
            }))
}

/// Watches `dir` recursively and sends a new snapshot on `sender` after every change that loads.
/// Bursts coalesce: a reload starts at once when idle, and events during a reload cause exactly
/// one follow-up reload. A failed load is logged with its path and line, counted in
/// `config_errors_total{source="file"}`, and the previous snapshot stays.
/// Must be called inside a tokio runtime.
pub fn watch_dir(
    dir: &Path,
    sender: watch::Sender<Arc<Snapshot>>,
    metrics: Arc<Metrics>,
) -> Result<DirWatcher, WatchError> {
    let dir = dir.to_owned();
    // Capacity one: a pending wake-up absorbs every further event until the reload takes it.
    let (wake_tx, mut wake_rx) = mpsc::channel::<()>(1);
    let notify_err = |source| WatchError::Notify {
        path: dir.clone(),
        source,
    };
    let mut watcher =
        notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            Ok(event) if !relevant(&event) => {}
            Ok(_) => {
                let _ = wake_tx.try_send(());
            }
            Err(e) => {
                tracing::warn!(error = %e, "file watch error; reloading");
                let _ = wake_tx.try_send(());
            }
        })
        .map_err(notify_err)?;
    watcher
        .watch(&dir, RecursiveMode::Recursive)
        .map_err(notify_err)?;

    let reloads = Arc::new(AtomicU64::new(0));
    let counter = reloads.clone();
    let task = tokio::spawn(async move {
        // The caller's first load is what `sender` holds; only changes are sent from here.
        let mut last = None;
        while wake_rx.recv().await.is_some() {
            tokio::time::sleep(SETTLE).await;
            while wake_rx.try_recv().is_ok() {}
            counter.fetch_add(1, Ordering::Relaxed);
            let d = dir.clone();
            let result = match tokio::task::spawn_blocking(move || load(&d)).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "config reload task failed");
                    continue;
                }
            };
            match result {
                Ok(loaded) => {
                    if last == Some(loaded.fingerprint) {
                        continue;
                    }
                    last = Some(loaded.fingerprint);
                    tracing::info!(
                        dir = %dir.display(),
                        objects = loaded.snapshot.len(),
                        "configuration reloaded"
                    );
                    if sender.send(Arc::new(loaded.snapshot)).is_err() {
                        break; // nobody listens any more
                    }
                }
                Err(e) => {
                    // Forget the fingerprint so that restoring the last good files reloads.
                    last = None;
                    metrics.config_errors.with_label_values(&["file"]).inc();
                    tracing::error!(error = %e, "configuration not loaded; keeping the previous one");
                }
            }
        }
    });
    Ok(DirWatcher {
        _watcher: watcher,
        task,
        reloads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editor_and_hidden_files_are_ignored() {
        for n in [
            ".x.yaml",
            "x.yaml~",
            "#x.yaml#",
            ".x.yaml.swp",
            "x.yaml.tmp",
        ] {
            assert!(ignored_name(n), "{n}");
        }
        assert!(!ignored_name("x.yaml"));
        assert!(is_manifest(Path::new("a/b.yml")));
        assert!(is_manifest(Path::new("b.json")));
        assert!(!is_manifest(Path::new("b.txt")));
    }

    #[test]
    fn own_reads_do_not_trigger_reloads() {
        let open = notify::Event::new(EventKind::Access(AccessKind::Open(AccessMode::Any)))
            .add_path(PathBuf::from("/d/a.yaml"));
        assert!(!relevant(&open));
        let write = notify::Event::new(EventKind::Access(AccessKind::Close(AccessMode::Write)))
            .add_path(PathBuf::from("/d/a.yaml"));
        assert!(relevant(&write));
        let swap = notify::Event::new(EventKind::Create(notify::event::CreateKind::File))
            .add_path(PathBuf::from("/d/.a.yaml.swp"));
        assert!(!relevant(&swap));
    }
}
