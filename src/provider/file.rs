//! The file provider: a directory of YAML/JSON manifests read into a [`Snapshot`], and re-read on
//! change with `notify`. Objects are admitted as an API server would admit them (see
//! [`super::admitted`]); a bad file or object never takes the others down.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

pub use super::admitted::SkippedKind;
use super::admitted::{Admission, Applied};
use super::manifest::ManifestError;
use crate::admission::Crds;
use crate::metrics::Metrics;
use crate::snapshot::Snapshot;

/// Directories nested deeper than this are not read (guards against symlink loops).
const MAX_DEPTH: usize = 32;

/// Time given to a writer to finish a file after the first event of a burst.
const SETTLE: Duration = Duration::from_millis(5);

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

/// One reading of a config directory: what is admitted now and what was not.
#[derive(Debug)]
pub struct DirLoad {
    pub snapshot: Snapshot,
    /// Kinds the product does not read, each logged once.
    pub skipped: Vec<SkippedKind>,
    /// Files that did not parse and objects that were not admitted.
    pub errors: Vec<ManifestError>,
}

/// A config directory and the admission state of its objects across reloads.
pub struct ConfigDir {
    dir: PathBuf,
    admission: Admission,
}

impl ConfigDir {
    /// A directory whose objects are admitted through `crds`; nothing is read yet.
    pub fn new(dir: &Path, crds: Arc<Crds>) -> Self {
        Self {
            dir: dir.to_owned(),
            admission: Admission::new(crds),
        }
    }

    /// The directory read.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Reads the directory again. Fails only when the directory itself cannot be listed; a
    /// file that does not parse or an object that is rejected is an entry of `errors`, and
    /// its objects keep their last admitted versions.
    pub fn reload(&mut self) -> Result<(Applied, Snapshot), ManifestError> {
        let mut files = Vec::new();
        collect_files(&self.dir, 0, &mut files)?;
        files.sort();
        let reading = files
            .into_iter()
            .map(|path| {
                let text = std::fs::read_to_string(&path).map_err(|e| e.to_string());
                (path, text)
            })
            .collect();
        let applied = self.admission.apply(reading);
        Ok((applied, self.admission.snapshot()))
    }

    /// Reads the directory once, logging each skipped kind.
    pub fn load(&mut self) -> Result<DirLoad, ManifestError> {
        let (applied, snapshot) = self.reload()?;
        for s in &applied.skipped {
            tracing::info!(dir = %self.dir.display(), kind = %s, "ignoring objects of a kind edgeplane does not read");
        }
        Ok(DirLoad {
            snapshot,
            skipped: applied.skipped.into_iter().collect(),
            errors: applied.errors,
        })
    }
}

/// Reads every manifest below `dir` once, admitting objects through `crds`.
pub fn load_dir(dir: &Path, crds: Arc<Crds>) -> Result<DirLoad, ManifestError> {
    ConfigDir::new(dir, crds).load()
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

/// Watches `config`'s directory recursively and sends a new snapshot on `sender` after every
/// change that alters what is admitted. Bursts coalesce: a reload starts at once when idle, and
/// events during a reload cause exactly one follow-up reload. Every error (a file that does not
/// parse, a rejected object) is logged with its path and line and counted in
/// `config_errors_total{source="file"}`; the affected objects keep their last admitted versions
/// while every other change goes live. Must be called inside a tokio runtime.
pub fn watch_dir(
    config: ConfigDir,
    sender: watch::Sender<Arc<Snapshot>>,
    metrics: Arc<Metrics>,
) -> Result<DirWatcher, WatchError> {
    let dir = config.path().to_owned();
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
        let mut config = Some(config);
        while wake_rx.recv().await.is_some() {
            tokio::time::sleep(SETTLE).await;
            while wake_rx.try_recv().is_ok() {}
            counter.fetch_add(1, Ordering::Relaxed);
            let Some(mut c) = config.take() else { break };
            let (c, result) = match tokio::task::spawn_blocking(move || {
                let r = c.reload();
                (c, r)
            })
            .await
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "config reload task failed");
                    break;
                }
            };
            config = Some(c);
            let (applied, snapshot) = match result {
                Ok(r) => r,
                Err(e) => {
                    metrics.config_errors.with_label_values(&["file"]).inc();
                    tracing::error!(error = %e, "configuration directory not read; keeping the previous objects");
                    continue;
                }
            };
            report_errors(&applied.errors, &metrics);
            if !applied.changed {
                continue;
            }
            tracing::info!(dir = %dir.display(), objects = snapshot.len(), "configuration reloaded");
            if sender.send(Arc::new(snapshot)).is_err() {
                break; // nobody listens any more
            }
        }
    });
    Ok(DirWatcher {
        _watcher: watcher,
        task,
        reloads,
    })
}

/// Logs and counts the errors of one reading.
pub fn report_errors(errors: &[ManifestError], metrics: &Metrics) {
    for e in errors {
        metrics.config_errors.with_label_values(&["file"]).inc();
        tracing::error!(error = %e, "configuration error");
    }
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
