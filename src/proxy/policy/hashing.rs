//! The bounded pool bcrypt verifications run on. A bcrypt check costs milliseconds of CPU by
//! design; unbounded, a flood of wrong passwords takes every core and a blocking thread each,
//! and unrelated routes wait behind it. Here at most `workers` checks run at once, on tokio's
//! blocking threads (never the threads serving requests), at most `queue` more wait for one,
//! and a check past that is refused at once: the request is answered 503 with `Retry-After`.

use std::sync::Arc;

use prometheus::IntGauge;
use tokio::sync::Semaphore;

use crate::metrics::Metrics;

/// Size and queue of the hashing pool (`--basic-auth-workers`, `--basic-auth-queue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashLimits {
    /// bcrypt verifications running at once. 2: on a small node the other cores keep serving
    /// requests; a cost-10 hash takes ~50 ms, so two workers check ~40 passwords a second.
    pub workers: usize,
    /// Verifications waiting for a worker; one more is refused (503). 64: at ~40 checks a
    /// second a waiting client is answered within ~2 s, and a flood holds at most this many.
    pub queue: usize,
}

impl Default for HashLimits {
    fn default() -> Self {
        Self {
            workers: 2,
            queue: 64,
        }
    }
}

/// The pool is full: the request is refused rather than queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Busy;

/// Admission (workers + queue permits) and the workers themselves.
#[derive(Debug)]
pub(crate) struct HashPool {
    admitted: Arc<Semaphore>,
    running: Arc<Semaphore>,
    metrics: Arc<Metrics>,
}

/// Decrements a gauge when dropped: a waiting request whose client goes away leaves the queue.
struct Held(IntGauge);

impl Held {
    fn new(gauge: &IntGauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl HashPool {
    /// A pool of `limits`, published in `edgeplane_basic_auth_workers` and `_queue_limit`.
    pub(crate) fn new(limits: HashLimits, metrics: Arc<Metrics>) -> Self {
        let workers = limits.workers.max(1);
        metrics.basic_auth_workers.set(gauge_value(workers));
        metrics
            .basic_auth_queue_limit
            .set(gauge_value(limits.queue));
        Self {
            admitted: Arc::new(Semaphore::new(workers.saturating_add(limits.queue))),
            running: Arc::new(Semaphore::new(workers)),
            metrics,
        }
    }

    /// Verifies `password` against the bcrypt `hash` on the pool; `false` for a malformed
    /// hash. [`Busy`] at once when every worker and queue place is taken.
    pub(crate) async fn verify_bcrypt(&self, password: String, hash: String) -> Result<bool, Busy> {
        let Ok(admitted) = self.admitted.clone().try_acquire_owned() else {
            self.metrics.basic_auth_rejected.inc();
            return Err(Busy);
        };
        let queued = Held::new(&self.metrics.basic_auth_queued);
        // The semaphore is never closed; a closed one would refuse like a full pool.
        let running = self
            .running
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Busy)?;
        drop(queued);
        let metrics = self.metrics.clone();
        // The permits travel with the work: a client that goes away does not free its place
        // before the hash it started is done.
        let work = tokio::task::spawn_blocking(move || {
            let _permits = (admitted, running);
            let _busy = Held::new(&metrics.basic_auth_busy);
            metrics
                .basic_auth_verifications
                .with_label_values(&["bcrypt"])
                .inc();
            bcrypt::verify(password.as_bytes(), &hash).unwrap_or(false)
        });
        Ok(work.await.unwrap_or(false))
    }
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_workers_and_queue_a_check_is_refused_at_once() {
        let metrics = Metrics::new();
        let pool = Arc::new(HashPool::new(
            HashLimits {
                workers: 1,
                queue: 0,
            },
            metrics.clone(),
        ));
        // Hold the only worker's admission from outside: the next check is refused.
        let held = pool.admitted.clone().try_acquire_owned().unwrap();
        let hash = bcrypt::hash("pw", 4).unwrap();
        assert_eq!(
            pool.verify_bcrypt("pw".into(), hash.clone()).await,
            Err(Busy)
        );
        assert_eq!(metrics.basic_auth_rejected.get(), 1);
        drop(held);
        assert_eq!(
            pool.verify_bcrypt("pw".into(), hash.clone()).await,
            Ok(true)
        );
        assert_eq!(pool.verify_bcrypt("px".into(), hash).await, Ok(false));
        assert_eq!(metrics.basic_auth_busy.get(), 0);
        assert_eq!(metrics.basic_auth_queued.get(), 0);
        assert_eq!(metrics.basic_auth_workers.get(), 1);
    }
}
