//! The file provider: a directory of YAML/JSON manifests read into a [`Snapshot`], and re-read on
//! change with `notify`. Objects are admitted as an API server would admit them (see
//! [`super::admitted`]); a bad file or object never takes the others down.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::admitted::{Admission, Applied, ObjectKey, Taken};
pub use super::admitted::{Reading, SkippedKind};
use super::changed::{read_text, Changes, Shape};
use super::manifest::ManifestError;
use super::stamp;
use super::walk::{ignored_name, walk};
use crate::admission::Crds;
use crate::kinds::KindSet;
use crate::metrics::Metrics;
use crate::snapshot::Snapshot;

/// Quiet time after the last event of a burst before the directory is read, unless that
/// event completed a file (closed after writing, renamed into place, removed): then the
/// reading starts at once.
pub const SETTLE: Duration = Duration::from_millis(3);

/// A burst of events that never goes quiet is read at the latest this long after it started.
pub const SETTLE_CAP: Duration = Duration::from_millis(100);

/// A file being written (modified, not yet closed) holds the reading back this long at most.
pub const WRITE_CAP: Duration = Duration::from_secs(1);

/// A file that looks half-written after a change is read again after this delay...
pub const RETRY_DELAY: Duration = Duration::from_millis(50);

/// ...this many times, before the last reading is taken as final.
pub const RETRIES: u32 = 3;

/// The Kubernetes atomic writer's switch in a mounted ConfigMap or Secret: hidden, but its
/// rename is the change.
const ATOMIC_WRITER_LINK: &str = "..data";

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
pub struct DirLoad<S = Snapshot> {
    pub snapshot: S,
    /// Kinds the product does not read, each logged once.
    pub skipped: Vec<SkippedKind>,
    /// Files that did not parse and objects that were not admitted.
    pub errors: Vec<ManifestError>,
}

/// A config directory and the admission state of its objects across reloads. `S` is the set
/// of kinds read ([`Snapshot`]'s unless built with [`ConfigDir::for_kinds`]); documents of
/// other kinds are skipped.
pub struct ConfigDir<S = Snapshot> {
    dir: PathBuf,
    admission: Admission<S>,
    /// Symlink loops reported by the last walk: reported once, not on every reload.
    walk_errors: BTreeSet<String>,
    /// The tree as the last walk found it; `None` before the first.
    shape: Option<Shape>,
}

impl ConfigDir {
    /// A directory whose objects are admitted through `crds`; nothing is read yet.
    pub fn new(dir: &Path, crds: Arc<Crds>) -> Self {
        Self::for_kinds(dir, crds)
    }
}

impl<S: KindSet> ConfigDir<S> {
    /// A directory read into snapshots of the kinds of `S`, admitted through `crds`; nothing
    /// is read yet.
    pub fn for_kinds(dir: &Path, crds: Arc<Crds>) -> Self {
        Self {
            dir: dir.to_owned(),
            admission: Admission::for_kinds(crds),
            walk_errors: BTreeSet::new(),
            shape: None,
        }
    }

    /// The directory read.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// `path:line` of the document the admitted object was read from (API group, kind,
    /// namespace, name), for log lines.
    pub fn location(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<String> {
        let key = ObjectKey::new(group, kind, namespace, name);
        let (path, line) = self.admission.location(&key)?;
        Some(format!("{}:{line}", path.display()))
    }

    /// Reads the directory again, taking every file as it is ([`Reading::Final`]).
    pub fn reload(&mut self) -> Result<(Applied, S), ManifestError> {
        self.read(Reading::Final)
    }

    /// Reads the directory again. Fails only when the directory itself cannot be listed; a
    /// file that does not parse or an object that is rejected is an entry of `errors`, and
    /// its objects keep their last admitted versions. A symlink loop is an error the first
    /// time it is seen.
    pub fn read(&mut self, reading: Reading) -> Result<(Applied, S), ManifestError> {
        let found = walk(&self.dir)?;
        self.shape = Some(Shape::of(&found));
        // Files unchanged since a trusted stamp are not opened: their text is the one held.
        let mut opened = Vec::new();
        let files = found
            .files
            .iter()
            .map(|path| {
                // Only a held file has a stamp.
                let taken = match stamp::check(self.admission.stamp(path), path) {
                    Ok(()) => Taken::Held,
                    Err(pending) => {
                        let text = read_text(path);
                        opened.push((path.clone(), pending, text.clone().ok()));
                        Taken::Read(text)
                    }
                };
                (path.clone(), taken)
            })
            .collect();
        let mut applied = self.admission.apply(files, reading);
        for (path, pending, text) in opened {
            let kept = text.is_some_and(|t| self.admission.holds_text(&path, &t));
            self.admission.set_stamp(&path, pending.keep(kept));
        }
        let seen: BTreeSet<String> = found.errors.iter().map(ToString::to_string).collect();
        let new = found
            .errors
            .into_iter()
            .filter(|e| !self.walk_errors.contains(&e.to_string()));
        applied.errors.splice(0..0, new);
        self.walk_errors = seen;
        Ok((applied, self.admission.snapshot()))
    }

    /// Reads only the files in `paths` (what change events named) when they are plain
    /// manifest files of directories already walked; otherwise, or with `None`, the whole
    /// directory ([`ConfigDir::read`]). Only the objects those files define or defined are
    /// admitted again.
    pub fn read_changed(
        &mut self,
        paths: Option<&BTreeSet<PathBuf>>,
        reading: Reading,
    ) -> Result<(Applied, S), ManifestError> {
        let changes = match (paths, &self.shape) {
            (Some(paths), Some(shape)) => shape.read(paths),
            _ => None,
        };
        let Some(changes) = changes else {
            return self.read(reading);
        };
        for (path, _) in &changes {
            self.admission.set_stamp(path, None);
        }
        let applied = self.admission.apply_changes(changes, reading);
        Ok((applied, self.admission.snapshot()))
    }

    /// Reads the directory once, logging each skipped kind.
    pub fn load(&mut self) -> Result<DirLoad<S>, ManifestError> {
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

/// Keeps a directory watched; dropping it stops the watcher and its reload task.
pub struct DirWatcher {
    _watcher: notify::RecommendedWatcher,
    task: JoinHandle<()>,
    reloads: Arc<AtomicU64>,
}

impl DirWatcher {
    /// Number of readings since the watch started (successful or not, retries included).
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
                p.file_name().is_none_or(|n| {
                    let n = n.to_string_lossy();
                    n == ATOMIC_WRITER_LINK || !ignored_name(&n)
                })
            }))
}

/// What the watcher saw since the directory was last read.
#[derive(Debug, Default)]
struct Activity {
    last_event: Option<Instant>,
    /// Whether the last event completed a file: written and closed, renamed, or removed.
    last_completed: bool,
    /// Files modified and not closed since, with when their writing was first seen. The
    /// kernel reports a close after writing (inotify `IN_CLOSE_WRITE`); until then the file
    /// may be half-written.
    writing: HashMap<PathBuf, Instant>,
    /// The paths the events named, for a reading of those files alone.
    changes: Changes,
}

impl Activity {
    fn observe(&mut self, event: &notify::Event, now: Instant) {
        self.changes.record(event);
        self.last_completed = false;
        match event.kind {
            EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any) => {
                for p in &event.paths {
                    self.writing.entry(p.clone()).or_insert(now);
                }
            }
            EventKind::Access(AccessKind::Close(AccessMode::Write))
            | EventKind::Remove(_)
            | EventKind::Modify(ModifyKind::Name(_)) => {
                for p in &event.paths {
                    self.writing.remove(p);
                }
                self.last_completed = true;
            }
            _ => {}
        }
        self.last_event = Some(now);
    }

    /// When the burst that started at `started` may be read: [`SETTLE`] after its last event
    /// (at most [`SETTLE_CAP`] after it started), at once when that event completed a file,
    /// and not while a file is being written (for at most [`WRITE_CAP`] per file). Reading
    /// at once is safe: a file that still looks half-written is read again
    /// ([`Reading::Tentative`]), and events that arrive during a reading start the next one.
    fn ready_at(&mut self, started: Instant, now: Instant) -> Instant {
        self.writing.retain(|_, since| *since + WRITE_CAP > now);
        let quiet = match self.last_event {
            None => now,
            Some(t) if self.last_completed => t,
            Some(t) => t + SETTLE,
        }
        .min(started + SETTLE_CAP);
        self.writing
            .values()
            .map(|since| *since + WRITE_CAP)
            .fold(quiet, Instant::max)
    }
}

/// Waits until the burst that started at `started` has settled; wake-ups that arrive meanwhile
/// are consumed.
async fn settle(activity: &Mutex<Activity>, wake: &mut mpsc::Receiver<()>, started: Instant) {
    loop {
        let now = Instant::now();
        let at = match activity.lock() {
            Ok(mut a) => a.ready_at(started, now),
            Err(_) => return,
        };
        if at <= now {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep_until(at) => {}
            w = wake.recv() => if w.is_none() { return },
        }
    }
}

/// Watches `config`'s directory recursively and sends a new snapshot on `sender` after every
/// change that alters what is admitted. A change is read once complete: [`SETTLE`] after the
/// last event of a burst, and after files being written are closed. A file that then looks
/// half-written (does not parse, or became empty) keeps its objects and is read again
/// ([`RETRIES`] times, [`RETRY_DELAY`] apart) before it is reported; other files' changes go
/// live at once. Bursts coalesce: events during a reading cause one follow-up reading. Every
/// error (a file that does not parse, a rejected object, a symlink loop) is logged with its
/// path and line and counted in `config_errors_total{source="file"}`; the affected objects
/// keep their last admitted versions. Must be called inside a tokio runtime.
pub fn watch_dir<S: KindSet>(
    config: ConfigDir<S>,
    sender: watch::Sender<Arc<S>>,
    metrics: Arc<Metrics>,
) -> Result<DirWatcher, WatchError> {
    watch_shared(Arc::new(Mutex::new(config)), sender, metrics)
}

/// [`watch_dir`] on a directory others may look into between readings (for
/// [`ConfigDir::location`]); a reading holds the lock while it runs.
pub fn watch_shared<S: KindSet>(
    config: Arc<Mutex<ConfigDir<S>>>,
    sender: watch::Sender<Arc<S>>,
    metrics: Arc<Metrics>,
) -> Result<DirWatcher, WatchError> {
    let dir = match config.lock() {
        Ok(c) => c.path().to_owned(),
        Err(p) => p.get_ref().path().to_owned(),
    };
    // Capacity one: a pending wake-up absorbs every further event until the reload takes it.
    let (wake_tx, mut wake_rx) = mpsc::channel::<()>(1);
    let activity = Arc::new(Mutex::new(Activity::default()));
    let seen = activity.clone();
    let notify_err = |source| WatchError::Notify {
        path: dir.clone(),
        source,
    };
    let mut watcher =
        notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            Ok(event) if !relevant(&event) => {}
            Ok(event) => {
                if let Ok(mut a) = seen.lock() {
                    a.observe(&event, Instant::now());
                }
                let _ = wake_tx.try_send(());
            }
            Err(e) => {
                tracing::warn!(error = %e, "file watch error; reloading");
                if let Ok(mut a) = seen.lock() {
                    a.changes.rescan();
                }
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
        while wake_rx.recv().await.is_some() {
            let started = Instant::now();
            settle(&activity, &mut wake_rx, started).await;
            let settled_us = started.elapsed().as_micros() as u64;
            // The first reading takes only the files the events named; a retry reads all.
            let mut paths = activity.lock().ok().and_then(|mut a| a.changes.take());
            let mut attempt = 0;
            loop {
                let reading = if attempt < RETRIES {
                    Reading::Tentative
                } else {
                    Reading::Final
                };
                counter.fetch_add(1, Ordering::Relaxed);
                let read_started = Instant::now();
                let Some(result) = read_blocking(config.clone(), paths.take(), reading).await
                else {
                    return;
                };
                let (applied, snapshot) = match result {
                    Ok(r) => r,
                    Err(e) => {
                        metrics.config_errors.with_label_values(&["file"]).inc();
                        tracing::error!(error = %e, "configuration directory not read; keeping the previous objects");
                        break;
                    }
                };
                if applied.changed {
                    tracing::info!(
                        dir = %dir.display(),
                        objects = snapshot.count(),
                        settled_us,
                        read_us = read_started.elapsed().as_micros() as u64,
                        "configuration reloaded"
                    );
                    let snapshot = Arc::new(snapshot);
                    metrics.received.mark(&*snapshot, started.into_std());
                    if sender.send(snapshot).is_err() {
                        return; // nobody listens any more
                    }
                }
                if applied.unsettled.is_empty() || reading == Reading::Final {
                    report_errors(&applied.errors, &metrics);
                    break;
                }
                tracing::debug!(files = ?applied.unsettled, "files look half-written; reading them again");
                attempt += 1;
                tokio::time::sleep(RETRY_DELAY).await;
                settle(&activity, &mut wake_rx, Instant::now()).await;
            }
        }
    });
    Ok(DirWatcher {
        _watcher: watcher,
        task,
        reloads,
    })
}

/// One reading off the async workers; `None` when the blocking task failed (now or in an
/// earlier reading, which left the state poisoned).
async fn read_blocking<S: KindSet>(
    config: Arc<Mutex<ConfigDir<S>>>,
    paths: Option<BTreeSet<PathBuf>>,
    reading: Reading,
) -> Option<ReadResult<S>> {
    let read = tokio::task::spawn_blocking(move || {
        let mut config = config.lock().ok()?;
        Some(config.read_changed(paths.as_ref(), reading))
    });
    match read.await {
        Ok(Some(r)) => Some(r),
        Ok(None) => {
            tracing::error!("config reload state lost in an earlier failed reading");
            None
        }
        Err(e) => {
            tracing::error!(error = %e, "config reload task failed");
            None
        }
    }
}

/// One reading's outcome: what changed and the snapshot, or why the directory was not read.
type ReadResult<S> = Result<(Applied, S), ManifestError>;

/// Logs and counts the errors of one reading.
pub fn report_errors(errors: &[ManifestError], metrics: &Metrics) {
    for e in errors {
        metrics.config_errors.with_label_values(&["file"]).inc();
        tracing::error!(error = %e, "configuration error");
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
