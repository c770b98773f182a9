//! The access log's writer: lines leave the request through a bounded queue drained by a thread
//! of their own, so a slow or stuck sink (a full disk, a pipe nobody reads) never holds a
//! request; when the queue is full the line is counted as dropped
//! (`edgeplane_access_log_dropped_total`) instead. A file sink is reopened when the process
//! gets SIGHUP ([`AccessLogger::reopen`]) or when the file at its path is no longer the one
//! open (renamed or removed by a log rotator).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus::IntCounter;

use super::line::LineWriter;
use super::{Entry, OtlpLines};

/// Lines the queue holds by default before new ones are dropped.
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

/// The sending side: what requests and sessions hand their lines to.
#[derive(Debug, Clone)]
pub(crate) struct AccessLogger {
    queue: SyncSender<Box<Entry>>,
    reopen: Arc<AtomicBool>,
    dropped: IntCounter,
}

impl AccessLogger {
    /// Starts the writer thread for `sink`, with a queue of `capacity` lines; lines the queue
    /// has no room for count in `dropped`.
    /// With `otlp`, every line is also sent as an OTLP log record.
    pub(crate) fn start(
        sink: AccessSink,
        capacity: usize,
        dropped: IntCounter,
        otlp: Option<OtlpLines>,
    ) -> Self {
        let (queue, lines) = mpsc::sync_channel(capacity.max(1));
        let reopen = Arc::new(AtomicBool::new(false));
        let flag = reopen.clone();
        let spawned = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || drain(lines, sink, &flag, otlp.as_ref()));
        if let Err(error) = spawned {
            tracing::error!(%error, "cannot start the access log writer: lines will be dropped");
        }
        Self {
            queue,
            reopen,
            dropped,
        }
    }

    /// Queues `line`, or counts it as dropped when the queue is full (or the writer is gone).
    pub(crate) fn log(&self, line: Box<Entry>) {
        match self.queue.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => self.dropped.inc(),
        }
    }

    /// Makes a file sink reopen its path before the next line (SIGHUP).
    pub(crate) fn reopen(&self) {
        self.reopen.store(true, Ordering::Relaxed);
    }
}

/// The writer thread: formats and writes every queued line, flushing whenever the queue is
/// empty. Ends when every sender is gone.
fn drain(
    lines: Receiver<Box<Entry>>,
    sink: AccessSink,
    reopen: &AtomicBool,
    otlp: Option<&OtlpLines>,
) {
    let mut out = Output::open(sink);
    let mut checked = Instant::now();
    // One line buffer and one formatter for the thread's life.
    let (mut line, mut formatter) = (String::with_capacity(512), LineWriter::default());
    let mut write = |out: &mut Output, entry: &Entry| {
        line.clear();
        formatter.write(entry, &mut line);
        out.write(&line);
        if let Some(otlp) = otlp {
            otlp.send(entry, &line);
        }
    };
    loop {
        // Everything queued, then one flush. The thread sleeps between batches instead of
        // waiting on the queue: a waiting receiver costs every request a wake-up (a futex call
        // and a context switch), a sleeping one costs nothing.
        let mut ended = false;
        loop {
            match lines.try_recv() {
                Ok(entry) => write(&mut out, &entry),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    ended = true;
                    break;
                }
            }
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

    fn write(&mut self, line: &str) {
        let result = match self {
            Self::Stdout(out) => write_line(out, line),
            Self::File {
                file: Some((out, _)),
                ..
            } => write_line(out, line),
            Self::File { file: None, .. } => Ok(()),
            Self::Capture(lines) => {
                if let Ok(mut lines) = lines.lock() {
                    lines.push(line.to_owned());
                }
                Ok(())
            }
        };
        if let Err(error) = result {
            tracing::warn!(%error, "access log line not written");
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

/// Writes `line` and its newline.
fn write_line(out: &mut impl Write, line: &str) -> std::io::Result<()> {
    out.write_all(line.as_bytes())?;
    out.write_all(b"\n")
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
