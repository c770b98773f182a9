//! Passive outlier detection: consecutive failures of an endpoint eject it from balancing for
//! a time that grows with each ejection, while a cap keeps most of a Service's endpoints (and
//! always at least one) eligible. No timers: an ejection ends when a pick finds its time has
//! passed. Times are nanoseconds since the registry's epoch, passed in so tests choose them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// When endpoints are ejected and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlierOptions {
    /// Consecutive failures (any 5xx response, connect or exchange errors) that eject an
    /// endpoint; 0 turns ejection off. 5, like Envoy: a single bad response is noise.
    pub consecutive_failures: u32,
    /// The first ejection lasts this long, the n-th n times as long. 30 s.
    pub base_ejection: Duration,
    /// Longest ejection, however often the endpoint was ejected. 300 s.
    pub max_ejection: Duration,
    /// Share of a Service's endpoints that may be ejected at once, in percent. 50: a Service
    /// whose endpoints all fail is better served by all of them than by one.
    pub max_ejected_percent: u8,
}

impl Default for OutlierOptions {
    fn default() -> Self {
        Self {
            consecutive_failures: 5,
            base_ejection: Duration::from_secs(30),
            max_ejection: Duration::from_secs(300),
            max_ejected_percent: 50,
        }
    }
}

/// The passive health of one endpoint.
#[derive(Debug, Default)]
pub struct Health {
    consecutive: AtomicU32,
    /// Set while the endpoint counts as ejected (until a pick sees `until` pass).
    ejected: AtomicBool,
    /// End of the latest ejection (nanoseconds since the epoch).
    until: AtomicU64,
    /// Ejections so far: the next one lasts `base x (times + 1)`.
    times: AtomicU32,
}

impl Health {
    /// True while an ejection lasts at `now`.
    pub fn is_ejected(&self, now: u64) -> bool {
        self.ejected.load(Ordering::Relaxed) && now < self.until.load(Ordering::Relaxed)
    }

    /// True once for an ejection that has ended at `now`: the caller logs the return.
    pub fn take_return(&self, now: u64) -> bool {
        self.ejected.load(Ordering::Relaxed)
            && now >= self.until.load(Ordering::Relaxed)
            && self
                .ejected
                .compare_exchange(true, false, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// True while state is worth keeping for an endpoint nobody uses: it is ejected, or its
    /// last ejection ended less than `memory` ago (so a relapse is ejected for longer).
    pub fn remembered(&self, now: u64, memory: Duration) -> bool {
        self.ejected.load(Ordering::Relaxed)
            || (self.times.load(Ordering::Relaxed) > 0
                && now
                    < self
                        .until
                        .load(Ordering::Relaxed)
                        .saturating_add(nanos(memory)))
    }

    /// A success ends the run of failures.
    pub fn success(&self) {
        if self.consecutive.load(Ordering::Relaxed) != 0 {
            self.consecutive.store(0, Ordering::Relaxed);
        }
    }

    /// Counts a failure; true when the run reaches `threshold` (the caller then tries to eject).
    pub fn failure(&self, threshold: u32) -> bool {
        threshold > 0 && self.consecutive.fetch_add(1, Ordering::Relaxed) + 1 >= threshold
    }

    /// Ejects from `now`; returns how long, and whether the endpoint still counted as ejected
    /// (an ended ejection no pick had noticed yet, which this one continues).
    fn eject(&self, now: u64, options: &OutlierOptions) -> (Duration, bool) {
        let times = self.times.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        let time = options
            .base_ejection
            .saturating_mul(times)
            .min(options.max_ejection);
        self.until
            .store(now.saturating_add(nanos(time)), Ordering::Relaxed);
        self.consecutive.store(0, Ordering::Relaxed);
        let continued = self.ejected.swap(true, Ordering::AcqRel);
        (time, continued)
    }
}

/// Nanoseconds of `d`, saturating.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The endpoints one Service has ejected and until when, for the cap on the ejected share.
#[derive(Debug, Default)]
pub struct Ejections {
    list: Mutex<Vec<(SocketAddr, u64)>>,
}

impl Ejections {
    /// Ejects `addr` (whose health is `health`) if the Service of `size` endpoints may lose
    /// another one at `now`; returns the ejection time and whether the endpoint still counted
    /// as ejected (so the caller does not count it twice). Taken on failures only, so the lock
    /// is off the path of successful requests.
    pub fn try_eject(
        &self,
        addr: SocketAddr,
        health: &Health,
        size: usize,
        now: u64,
        options: &OutlierOptions,
    ) -> Option<(Duration, bool)> {
        if health.is_ejected(now) {
            return None;
        }
        let mut list = self.list.lock().ok()?;
        list.retain(|(a, until)| *a != addr && now < *until);
        let cap = (size * usize::from(options.max_ejected_percent.min(100)) / 100)
            .min(size.saturating_sub(1));
        if list.len() >= cap {
            return None;
        }
        let (time, continued) = health.eject(now, options);
        list.push((addr, now.saturating_add(nanos(time))));
        Some((time, continued))
    }

    /// True while some ejection of this Service may still last.
    pub fn any(&self, now: u64) -> bool {
        self.list
            .lock()
            .map(|l| l.iter().any(|(_, until)| now < *until))
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn addr(i: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, i], 80))
    }

    #[test]
    fn consecutive_failures_eject_for_a_growing_capped_time() {
        let options = OutlierOptions::default();
        let h = Health::default();
        let e = Ejections::default();
        for _ in 0..4 {
            assert!(!h.failure(5));
        }
        h.success();
        for _ in 0..4 {
            assert!(!h.failure(5), "a success restarted the count");
        }
        assert!(h.failure(5));
        let now = 10 * S;
        assert_eq!(
            e.try_eject(addr(1), &h, 4, now, &options),
            Some((Duration::from_secs(30), false))
        );
        assert!(h.is_ejected(now + 29 * S));
        assert!(!h.take_return(now + 29 * S));
        assert!(!h.is_ejected(now + 30 * S));
        assert!(h.take_return(now + 30 * S));
        assert!(!h.take_return(now + 31 * S), "a return is reported once");
        // The second ejection lasts twice as long; later ones stop at the cap.
        let now = 100 * S;
        assert_eq!(
            e.try_eject(addr(1), &h, 4, now, &options),
            Some((Duration::from_secs(60), false))
        );
        for i in 1..=20 {
            let now = now + i * 1000 * S;
            h.take_return(now);
            let got = e.try_eject(addr(1), &h, 4, now, &options);
            assert!(got.is_some_and(|(t, _)| t <= Duration::from_secs(300)));
        }
        assert!(h.remembered(now + 20_100 * S, Duration::from_secs(300)));
        h.take_return(now + 20_400 * S);
        assert!(!h.remembered(now + 21_000 * S, Duration::from_secs(300)));
    }

    #[test]
    fn the_cap_keeps_half_and_always_one_endpoint() {
        let options = OutlierOptions::default();
        let e = Ejections::default();
        let hs: Vec<Health> = (0..4).map(|_| Health::default()).collect();
        let now = S;
        assert!(e.try_eject(addr(1), &hs[0], 4, now, &options).is_some());
        assert!(e.try_eject(addr(2), &hs[1], 4, now, &options).is_some());
        assert!(e.try_eject(addr(3), &hs[2], 4, now, &options).is_none());
        // After the first two return, others may go.
        assert!(e
            .try_eject(addr(3), &hs[2], 4, now + 31 * S, &options)
            .is_some());
        // An ended ejection nobody noticed is continued, not counted again.
        let stale = Ejections::default();
        let h = Health::default();
        assert_eq!(
            stale.try_eject(addr(5), &h, 4, now, &options).map(|e| e.1),
            Some(false)
        );
        assert_eq!(
            stale
                .try_eject(addr(5), &h, 4, now + 40 * S, &options)
                .map(|e| e.1),
            Some(true)
        );
        // A lone endpoint is never ejected, even at 100%.
        let all = OutlierOptions {
            max_ejected_percent: 100,
            ..options.clone()
        };
        let lone = Ejections::default();
        assert!(lone.try_eject(addr(1), &hs[3], 1, now, &all).is_none());
        let two = Ejections::default();
        let fresh: Vec<Health> = (0..2).map(|_| Health::default()).collect();
        assert!(two.try_eject(addr(1), &fresh[0], 2, now, &all).is_some());
        assert!(two.try_eject(addr(2), &fresh[1], 2, now, &all).is_none());
        assert!(two.any(now));
        assert!(!two.any(now + 31 * S));
    }
}
