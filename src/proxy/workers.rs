//! The data plane's workers: one thread per core, each running its own current-thread Tokio
//! runtime. Every TCP listener address gets one socket per worker (`SO_REUSEPORT`: the kernel
//! spreads new connections over them), and a connection, its requests, the tasks it spawns and
//! the upstream connections it uses stay on the worker whose socket accepted it: no request
//! crosses threads, and no two workers share a queue. With one worker there is no thread of
//! its own: the runtime that created the proxy serves it, as a single-threaded process.

use std::cell::Cell;
use std::num::NonZeroUsize;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

thread_local! {
    /// The index of the worker this thread runs (0 on any other thread).
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// The worker running on this thread: 0 outside the workers' threads (the runtime that created
/// the proxy, which is worker 0 when there is only one).
pub(crate) fn current() -> usize {
    INDEX.with(Cell::get)
}

/// How many data-plane workers the process runs: `TOKIO_WORKER_THREADS` when set to a number
/// of at least 1, else one per CPU the process may run on (its affinity and cgroup quota).
pub fn count_from_env() -> usize {
    std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n >= 1)
        .or_else(|| {
            std::thread::available_parallelism()
                .ok()
                .map(NonZeroUsize::get)
        })
        .unwrap_or(1)
}

/// The runtimes of the workers. Dropping it ends the workers' threads (their runtimes drop
/// whatever tasks are left).
pub(crate) struct Workers {
    /// One per worker; empty when there is one worker and no runtime was current to serve it
    /// (then spawning falls back to the caller's runtime).
    handles: Vec<Handle>,
    /// Dropped with `Workers`: each worker's runtime returns from `block_on` and ends.
    _stop: Vec<oneshot::Sender<()>>,
}

impl Workers {
    /// Starts `count` workers. One worker is the current runtime (no thread). A worker whose
    /// thread or runtime cannot be created is logged and left out; if none starts, the current
    /// runtime serves alone.
    pub(crate) fn start(count: usize) -> Self {
        let current = || Self {
            handles: Handle::try_current().into_iter().collect(),
            _stop: Vec::new(),
        };
        if count <= 1 {
            return current();
        }
        let mut handles = Vec::with_capacity(count);
        let mut stops = Vec::with_capacity(count);
        for index in 0..count {
            match spawn_worker(index) {
                Ok((handle, stop)) => {
                    handles.push(handle);
                    stops.push(stop);
                }
                Err(error) => tracing::error!(worker = index, %error, "cannot start a worker"),
            }
        }
        if handles.is_empty() {
            return current();
        }
        Self {
            handles,
            _stop: stops,
        }
    }

    /// The number of workers (at least 1).
    pub(crate) fn len(&self) -> usize {
        self.handles.len().max(1)
    }

    /// The runtime of worker `index`, `None` when the caller's runtime is the only worker.
    pub(crate) fn handle(&self, index: usize) -> Option<&Handle> {
        self.handles.get(index)
    }
}

/// Starts worker `index`'s thread and runtime; returns its handle and the sender whose drop
/// ends it.
fn spawn_worker(index: usize) -> std::io::Result<(Handle, oneshot::Sender<()>)> {
    let (stop, stopped) = oneshot::channel::<()>();
    let (ready, handle) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name(format!("edgeplane-worker-{index}"))
        .spawn(move || {
            INDEX.with(|i| i.set(index));
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let _ = ready.send(Ok(runtime.handle().clone()));
            // Runs every task spawned on this worker until the proxy lets go of it.
            runtime.block_on(async move {
                let _ = stopped.await;
            });
        })?;
    let handle = handle
        .recv()
        .map_err(|_| std::io::Error::other("the worker thread ended before its runtime ran"))??;
    Ok((handle, stop))
}

/// One `T` per worker, each used by its own worker's thread: state bound to a runtime, such as
/// pooled upstream connections (registered with the reactor of the runtime that opened them).
pub(crate) struct PerWorker<T>(Box<[T]>);

impl<T> PerWorker<T> {
    /// `count` values (at least one) made by `make`.
    pub(crate) fn new(count: usize, make: impl FnMut() -> T) -> Self {
        Self(std::iter::repeat_with(make).take(count.max(1)).collect())
    }

    /// The value of the worker running on this thread.
    pub(crate) fn mine(&self) -> &T {
        &self.0[current() % self.0.len()]
    }

    /// Every worker's value.
    pub(crate) fn all(&self) -> impl Iterator<Item = &T> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_worker_runs_its_tasks_on_its_own_thread() {
        let workers = Workers::start(2);
        assert_eq!(workers.len(), 2);
        let mut seen = Vec::new();
        for index in 0..2 {
            let handle = workers.handle(index).expect("a worker runtime");
            let ran = handle
                .spawn(async { (current(), std::thread::current().name().map(String::from)) })
                .await
                .expect("task ran");
            seen.push(ran);
        }
        assert_eq!(
            seen,
            vec![
                (0, Some("edgeplane-worker-0".to_owned())),
                (1, Some("edgeplane-worker-1".to_owned()))
            ]
        );
        let slots = PerWorker::new(2, || std::sync::Mutex::new(0));
        let handle = workers.handle(1).expect("worker 1");
        let slots = std::sync::Arc::new(slots);
        let mine = slots.clone();
        handle
            .spawn(async move { *mine.mine().lock().expect("slot") += 1 })
            .await
            .expect("task ran");
        let counts: Vec<i32> = slots.all().map(|s| *s.lock().expect("slot")).collect();
        assert_eq!(counts, vec![0, 1], "worker 1 used its own slot");
    }

    #[tokio::test]
    async fn one_worker_is_the_current_runtime() {
        let workers = Workers::start(1);
        assert_eq!(workers.len(), 1);
        let here = std::thread::current().id();
        let handle = workers.handle(0).expect("the current runtime");
        let there = handle
            .spawn(async { std::thread::current().id() })
            .await
            .expect("task ran");
        assert_eq!(here, there, "no thread of its own");
    }
}
