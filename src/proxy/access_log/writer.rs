//! The access log's writer: a request formats its line when it ends, on its own thread, into
//! one of a few shared buffers, and a thread of its own takes the buffers every 20 ms and
//! writes them, so a slow or stuck sink (a full disk, a pipe nobody reads) never holds a
//! request. At most the queue's capacity of lines waits to be written; past it a line is
//! counted as dropped (`edgeplane_access_log_dropped_total`) instead. Formatting where the
//! request ends reads an entry still in the CPU's cache, and the entry is freed by the thread
//! that allocated it. A file sink is reopened when the process gets SIGHUP
//! ([`AccessLogger::reopen`]) or when the file at its path is no longer the one open (renamed
//! or removed by a log rotator).

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

use prometheus::IntCounter;

use super::line::LineWriter;
use super::{Entry, OtlpLines};

/// Lines waiting to be written by default before new ones are dropped.
pub const DEFAULT_QUEUE: usize = 4096;

/// How long lines wait at most before they are written: the queue must hold what arrives in
/// that time (4,096 lines = 200k lines per second).
const BATCH_EVERY: Duration = Duration::from_millis(20);

/// How often a file sink checks whether its path still names the open file.
const ROTATION_CHECK: Duration = Duration::from_secs(1);

/// Where access log lines go.
#[derive(Debug, Clone, Default)]
pub enum AccessSink {
    /// Standard output, apart from the process's own log (standard error).
    #[default]
    Stdout,
    /// A file, appended to (created when missing) and reopened on SIGHUP or rotation.
    File(PathBuf),
    /// A list tests read.
    Capture(Arc<Mutex<Vec<String>>>),
}

/// Formatted lines not yet written, and the formatter that wrote them.
#[derive(Default)]
struct Batch {
    /// Lines, each ending in a newline.
    text: String,
    lines: usize,
    formatter: LineWriter,
}

/// What requests and the writer thread share.
struct Shared {
    /// One batch per request thread, about: a thread takes the one its index names, or the
    /// next free one when the writer is taking it.
    batches: Box<[Mutex<Batch>]>,
    /// Lines formatted and not yet written.
    waiting: AtomicUsize,
    capacity: usize,
    otlp: Option<OtlpLines>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("batches", &self.batches.len())
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

/// The sending side: what requests and sessions hand their lines to.
#[derive(Debug, Clone)]
pub(crate) struct AccessLogger {
    shared: Arc<Shared>,
    reopen: Arc<AtomicBool>,
    dropped: IntCounter,
}

thread_local! {
    /// The batch this thread starts with (threads take turns over the batches).
    static BATCH_INDEX: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Threads that have logged so far: the next one's batch index.
static THREADS: AtomicUsize = AtomicUsize::new(0);

fn batch_index() -> usize {
    BATCH_INDEX.with(|i| {
        i.get().unwrap_or_else(|| {
            let next = THREADS.fetch_add(1, Ordering::Relaxed);
            i.set(Some(next));
            next
        })
    })
}

impl AccessLogger {
    /// Starts the writer thread for `sink`, with room for `capacity` lines waiting; lines
    /// past it count in `dropped`. With `otlp`, every line is also sent as an OTLP log record.
    pub(crate) fn start(
        sink: AccessSink,
        capacity: usize,
        dropped: IntCounter,
        otlp: Option<OtlpLines>,
    ) -> Self {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let shared = Arc::new(Shared {
            batches: (0..threads * 2).map(|_| Mutex::default()).collect(),
            waiting: AtomicUsize::new(0),
            capacity: capacity.max(1),
            otlp,
        });
        let reopen = Arc::new(AtomicBool::new(false));
        let (flag, drained) = (reopen.clone(), shared.clone());
        let spawned = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || drain(&drained, sink, &flag));
        if let Err(error) = spawned {
            tracing::error!(%error, "cannot start the access log writer: lines will be dropped");
            // Nobody writes: every line is dropped.
            shared.waiting.store(usize::MAX / 2, Ordering::Relaxed);
        }
        Self {
            shared,
            reopen,
            dropped,
        }
    }

    /// Formats `entry`'s line into a batch, or counts it as dropped when `capacity` lines
    /// wait already.
    pub(crate) fn log(&self, entry: Box<Entry>) {
        let shared = &*self.shared;
        if shared.waiting.fetch_add(1, Ordering::Relaxed) >= shared.capacity {
            shared.waiting.fetch_sub(1, Ordering::Relaxed);
            self.dropped.inc();
            return;
        }
        let count = shared.batches.len();
        let first = batch_index() % count;
        // The writer holds a batch only to swap its text out; another batch is free then.
        let mut batch = (0..count)
            .find_map(|i| match shared.batches[(first + i) % count].try_lock() {
                Ok(batch) => Some(batch),
                Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            })
            .unwrap_or_else(|| {
                shared.batches[first]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            });
        let Batch {
            text,
            lines,
            formatter,
        } = &mut *batch;
        let at = text.len();
        formatter.write(&entry, text);
        if let Some(otlp) = &shared.otlp {
            otlp.send(&entry, &text[at..]);
        }
        text.push('\n');
        *lines += 1;
    }

    /// Makes a file sink reopen its path before the next line (SIGHUP).
    pub(crate) fn reopen(&self) {
        self.reopen.store(true, Ordering::Relaxed);
    }
}

/// The writer thread: every [`BATCH_EVERY`], takes each batch's lines and writes them, then
/// flushes. Ends, after a last round, when every logger is gone.
fn drain(shared: &Arc<Shared>, sink: AccessSink, reopen: &AtomicBool) {
    let mut out = Output::open(sink);
    let mut checked = Instant::now();
    // Swapped with each batch's text: two buffers per batch for the thread's life.
    let mut spare = String::new();
    loop {
        // Sleeping between rounds rather than being woken by each line spares every request
        // a wake-up (a futex call and a context switch).
        let ended = Arc::strong_count(shared) == 1;
        for batch in shared.batches.iter() {
            let lines = {
                let mut batch = batch
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                std::mem::swap(&mut batch.text, &mut spare);
                std::mem::take(&mut batch.lines)
            };
            if lines > 0 {
                out.write(&spare);
                shared.waiting.fetch_sub(lines, Ordering::Relaxed);
            }
            spare.clear();
        }
        out.flush();
        if ended {
            break;
        }
        if reopen.swap(false, Ordering::Relaxed) || checked.elapsed() >= ROTATION_CHECK {
            checked = Instant::now();
            out.reopen_if_moved();
        }
        std::thread::sleep(BATCH_EVERY);
    }
}

/// An open sink.
enum Output {
    Stdout(BufWriter<std::io::Stdout>),
    File {
        path: PathBuf,
        file: Option<(BufWriter<File>, u64)>,
    },
    Capture(Arc<Mutex<Vec<String>>>),
}

impl Output {
    fn open(sink: AccessSink) -> Self {
        match sink {
            AccessSink::Stdout => {
                Self::Stdout(BufWriter::with_capacity(WRITE_BUFFER, std::io::stdout()))
            }
            AccessSink::File(path) => {
                let file = open_file(&path);
                Self::File { path, file }
            }
            AccessSink::Capture(lines) => Self::Capture(lines),
        }
    }

    /// Writes `text`, whole lines each ending in a newline.
    fn write(&mut self, text: &str) {
        let result = match self {
            Self::Stdout(out) => out.write_all(text.as_bytes()),
            Self::File {
                file: Some((out, _)),
                ..
            } => out.write_all(text.as_bytes()),
            Self::File { file: None, .. } => Ok(()),
            Self::Capture(lines) => {
                if let Ok(mut lines) = lines.lock() {
                    lines.extend(text.lines().map(str::to_owned));
                }
                Ok(())
            }
        };
        if let Err(error) = result {
            tracing::warn!(%error, "access log lines not written");
        }
    }

    fn flush(&mut self) {
        let result = match self {
            Self::Stdout(out) => out.flush(),
            Self::File {
                file: Some((out, _)),
                ..
            } => out.flush(),
            _ => Ok(()),
        };
        if let Err(error) = result {
            tracing::warn!(%error, "access log not flushed");
        }
    }

    /// Reopens a file sink whose path names another file than the open one (or none), or
    /// that could not be opened before.
    fn reopen_if_moved(&mut self) {
        let Self::File { path, file } = self else {
            return;
        };
        let now = std::fs::metadata(&*path).ok().map(|m| m.ino());
        let open = file.as_ref().map(|(_, ino)| *ino);
        if now.is_some() && now == open {
            return;
        }
        if let Some((mut out, _)) = file.take() {
            let _ = out.flush();
        }
        *file = open_file(path);
    }
}

/// Buffered writes of lines: one write call per this many bytes.
const WRITE_BUFFER: usize = 64 * 1024;

/// Opens `path` for appending, with the inode it has (to see it moved).
fn open_file(path: &Path) -> Option<(BufWriter<File>, u64)> {
    let opened = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|f| Ok((f.metadata()?.ino(), f)));
    match opened {
        Ok((ino, f)) => Some((BufWriter::with_capacity(WRITE_BUFFER, f), ino)),
        Err(error) => {
            tracing::error!(path = %path.display(), %error, "cannot open the access log file");
            None
        }
    }
}
