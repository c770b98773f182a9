//! How reflectors retry and what they make of a kind the API server does not serve: a capped,
//! jittered exponential backoff that only progress resets, and a kind whose list answers 404
//! (its CRD is not installed) treated as empty, reported once, shown in
//! `edgeplane_watch_kind_available` and picked up when the CRD appears.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use kube::runtime::watcher::{self, Event};
use prometheus::IntGauge;

/// The first wait after a failed list or watch.
pub const DEFAULT_RETRY_INITIAL: Duration = Duration::from_secs(1);
/// The longest wait between two attempts, as client-go's reflectors: a CRD installed while the
/// controller runs is picked up within about this long.
pub const DEFAULT_RETRY_MAX: Duration = Duration::from_secs(30);

/// Waits between attempts of one reflector: `initial`, doubling after every failure up to
/// `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            initial: DEFAULT_RETRY_INITIAL,
            max: DEFAULT_RETRY_MAX,
        }
    }
}

/// The waits of one run of failures.
#[derive(Debug)]
pub struct Backoff {
    policy: RetryPolicy,
    failures: u32,
}

impl Backoff {
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            failures: 0,
        }
    }

    /// The wait before the next attempt: `initial * 2^failures`, capped at `max`, then
    /// shortened by up to a quarter at random so that replicas that failed together do not
    /// retry together. Never longer than `max`.
    pub fn next_delay(&mut self) -> Duration {
        let factor = 1u32.checked_shl(self.failures.min(31)).unwrap_or(u32::MAX);
        self.failures = self.failures.saturating_add(1);
        let full = self
            .policy
            .initial
            .saturating_mul(factor)
            .min(self.policy.max);
        full.mul_f64(1.0 - fastrand::f64() * 0.25)
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// The wait before polling the watcher again after `item`: the next delay after an error;
    /// none otherwise, and items carrying data from the API server start over. `Init` leaves
    /// the run of failures as it is: the watcher emits it before every list attempt.
    pub fn after<K>(&mut self, item: &WatchItem<K>) -> Option<Duration> {
        match item {
            Err(_) => Some(self.next_delay()),
            Ok(Event::Init) => None,
            Ok(_) => {
                self.reset();
                None
            }
        }
    }
}

/// One item of a watcher stream.
pub type WatchItem<K> = Result<Event<K>, watcher::Error>;

/// Retries a watcher stream: after an error it waits the backoff's next delay before polling
/// the watcher again (which then relists or watches again). Items that carry data from the API
/// server reset the backoff; `Init` does not, since the watcher emits it before every list
/// attempt, failed ones included. (kube's `default_backoff` resets on any item, `Init` too, so
/// a list that fails every time was retried about once a second, forever.)
pub fn with_backoff<K, S>(stream: S, policy: RetryPolicy) -> impl Stream<Item = WatchItem<K>>
where
    S: Stream<Item = WatchItem<K>> + Send + 'static,
    K: Send + 'static,
{
    let state = (Box::pin(stream), Backoff::new(policy), None::<Duration>);
    futures_util::stream::unfold(state, |(mut stream, mut backoff, wait)| async move {
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        let item = stream.next().await?;
        let wait = backoff.after(&item);
        Some((item, (stream, backoff, wait)))
    })
}

/// Whether the API server serves a kind, as far as its reflector knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    Unknown,
    Yes,
    No,
}

/// Turns a kind the API server does not serve (its list answers 404: the CRD is not
/// installed; or its watch does: the CRD was deleted) into an empty kind, so that the other
/// kinds are still served. The first 404 in
/// a row becomes an empty list (`Init`, `InitDone`: the store is ready and empty), one WARN
/// line naming the kind and what to install, and the gauge at 0; later 404s pass silently
/// (the watcher keeps retrying with [`with_backoff`]). The first list that succeeds (or watch
/// event, when a watch resumes) sets the gauge to 1 and, after a 404, logs that the kind was
/// picked up.
pub struct NotServedAsEmpty {
    kind: String,
    group: String,
    gauge: IntGauge,
    served: Served,
}

impl NotServedAsEmpty {
    /// For `kind` of API group `group`, reporting in `gauge`.
    pub fn new(kind: &str, group: &str, gauge: IntGauge) -> Self {
        Self {
            kind: kind.to_owned(),
            group: group.to_owned(),
            gauge,
            served: Served::Unknown,
        }
    }

    /// The items that replace one item of the watcher.
    pub fn map<K>(&mut self, item: WatchItem<K>) -> Vec<WatchItem<K>> {
        match item {
            Err(
                watcher::Error::InitialListFailed(kube::Error::Api(s))
                | watcher::Error::WatchStartFailed(kube::Error::Api(s))
                | watcher::Error::WatchFailed(kube::Error::Api(s)),
            ) if s.code == 404 => {
                if self.served == Served::No {
                    tracing::debug!(kind = self.kind, "still not served by the API server");
                    return Vec::new();
                }
                self.served = Served::No;
                self.gauge.set(0);
                tracing::warn!(
                    kind = self.kind,
                    install = install_hint(&self.group),
                    "kind not served by the API server (its CRD is not installed): treated as \
                     empty; retrying with backoff"
                );
                vec![Ok(Event::Init), Ok(Event::InitDone)]
            }
            // A completed list, or a watch resumed after the CRD came back: served.
            Ok(event @ (Event::InitDone | Event::Apply(_) | Event::Delete(_))) => {
                if self.served == Served::No {
                    tracing::info!(
                        kind = self.kind,
                        "kind now served by the API server (CRD installed): picked up"
                    );
                }
                self.served = Served::Yes;
                self.gauge.set(1);
                vec![Ok(event)]
            }
            other => vec![other],
        }
    }
}

/// What to install so that a kind of `group` is served.
fn install_hint(group: &str) -> &'static str {
    match group {
        "edgeplane.dev" => "edgeplane crds | kubectl apply --server-side -f -",
        "gateway.networking.k8s.io" => {
            "the Gateway API CRDs: kubectl apply --server-side -f standard-install.yaml \
             (experimental-install.yaml for the v1alpha2 route kinds)"
        }
        _ => "the CRD or API that serves it",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_found() -> watcher::Error {
        watcher::Error::InitialListFailed(kube::Error::Api(
            kube::core::Status::failure("not found", "NotFound")
                .with_code(404)
                .boxed(),
        ))
    }

    #[test]
    fn delays_double_up_to_the_cap_with_jitter_below_each_step() {
        let policy = RetryPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
        };
        let mut b = Backoff::new(policy);
        for full in [1, 2, 4, 8, 16, 30, 30, 30] {
            let d = b.next_delay();
            let full = Duration::from_secs(full);
            assert!(d <= full && d >= full.mul_f64(0.75), "{d:?} for {full:?}");
        }
        for _ in 0..100 {
            assert!(b.next_delay() <= policy.max);
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_secs(1));
    }

    #[test]
    fn a_404_is_reported_once_and_the_kind_is_picked_up_when_served() {
        let metrics = crate::metrics::Metrics::new();
        let gauge = metrics
            .watch_kind_available
            .with_label_values(&["TrafficPolicy"]);
        let mut m = NotServedAsEmpty::new("TrafficPolicy", "edgeplane.dev", gauge.clone());
        let first = m.map::<()>(Err(not_found()));
        assert!(matches!(
            first.as_slice(),
            [Ok(Event::Init), Ok(Event::InitDone)]
        ));
        assert_eq!(gauge.get(), 0);
        // The watcher's next attempt: Init, then 404 again; nothing more reaches the store.
        assert!(matches!(
            m.map::<()>(Ok(Event::Init)).as_slice(),
            [Ok(Event::Init)]
        ));
        assert!(m.map::<()>(Err(not_found())).is_empty());
        assert!(m.map::<()>(Err(not_found())).is_empty());
        // Installed: the list succeeds.
        assert!(matches!(
            m.map::<()>(Ok(Event::InitApply(()))).as_slice(),
            [Ok(Event::InitApply(()))]
        ));
        assert!(matches!(
            m.map::<()>(Ok(Event::InitDone)).as_slice(),
            [Ok(Event::InitDone)]
        ));
        assert_eq!(gauge.get(), 1);
        // The CRD deleted: the watch answers 404 (the client reads the Status as the stream's
        // first item). Emptied and reported again.
        let watch_404 = watcher::Error::WatchFailed(kube::Error::Api(
            kube::core::Status::failure("not found", "NotFound")
                .with_code(404)
                .boxed(),
        ));
        assert_eq!(m.map::<()>(Err(watch_404)).len(), 2);
        assert_eq!(gauge.get(), 0);
        assert!(m.map::<()>(Err(not_found())).is_empty());
        // Other errors pass through to be logged and retried.
        let other = m.map::<()>(Err(watcher::Error::NoResourceVersion));
        assert!(matches!(other.as_slice(), [Err(_)]));
    }

    /// A list that fails every time is retried at growing intervals: the `Init` the watcher
    /// emits before each attempt does not reset the backoff; a list that succeeds does.
    #[test]
    fn init_before_each_failed_list_does_not_reset_the_backoff() {
        let policy = RetryPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(8),
        };
        let mut b = Backoff::new(policy);
        let mut waits = Vec::new();
        for _ in 0..6 {
            assert_eq!(b.after::<()>(&Ok(Event::Init)), None);
            waits.extend(b.after::<()>(&Err(not_found())));
        }
        for (wait, full) in waits.iter().zip([1, 2, 4, 8, 8, 8]) {
            let full = Duration::from_secs(full);
            assert!(*wait <= full && *wait >= full.mul_f64(0.75), "{waits:?}");
        }
        assert_eq!(b.after::<()>(&Ok(Event::InitApply(()))), None);
        assert_eq!(b.after::<()>(&Ok(Event::InitDone)), None);
        let wait = b.after::<()>(&Err(not_found())).unwrap();
        assert!(wait <= Duration::from_secs(1), "not reset: {wait:?}");
    }
}
