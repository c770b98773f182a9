//! The reconcile loop's own worker thread: translation, status sealing and the freeing of
//! replaced tables and reports run on it, in order, never on the async workers. Apart from the
//! loop because why it exists is the allocator's, not the loop's: one long-lived thread keeps
//! one malloc arena, so the resident set stays flat across rebuilds.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;

/// Why a job given to the translation worker produced nothing.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("the job panicked: {0}")]
    Panicked(String),
    #[error("the worker thread is gone")]
    Gone,
}

type Job = Box<dyn FnOnce() + Send>;

/// The one thread that translates, seals status and frees replaced tables and reports. With
/// glibc's malloc each thread allocates from an arena of its own and an arena keeps its peak;
/// doing this work on whichever blocking-pool thread is free would grow the resident set
/// towards one rebuild's working set per arena. On one long-lived thread, one arena serves
/// every rebuild and the resident set stays flat across changes. Jobs run in order.
pub(super) struct Worker {
    jobs: Option<mpsc::Sender<Job>>,
}

impl Worker {
    /// Starts the thread; if the OS refuses one, jobs go to the blocking pool instead.
    pub(super) fn start() -> Self {
        let (tx, rx) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("edgeplane-translate".into())
            .spawn(move || {
                // Ends when the reconciler, the only sender, is dropped.
                for job in rx {
                    job();
                }
            });
        match spawned {
            Ok(_) => Self { jobs: Some(tx) },
            Err(e) => {
                tracing::warn!(error = %e, "no translation thread; using the blocking pool");
                Self { jobs: None }
            }
        }
    }

    /// Runs `f` on the worker thread and waits for its result without blocking the caller's
    /// async worker. A panic is caught (the thread lives on) and returned as an error.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, WorkerError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let out = std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
                p.downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".to_owned())
            });
            let _ = tx.send(out);
        });
        let sent = match &self.jobs {
            Some(jobs) => jobs.send(job).map_err(|e| e.0),
            None => Err(job),
        };
        if let Err(job) = sent {
            drop(tokio::task::spawn_blocking(job));
        }
        match rx.await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(message)) => Err(WorkerError::Panicked(message)),
            Err(_) => Err(WorkerError::Gone),
        }
    }
}
