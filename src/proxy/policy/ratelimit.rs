//! Local rate limiting: token buckets in one proxy-wide registry, keyed by the limit's id and
//! the request's key value, so buckets outlive table swaps (a changed rate has a new id and so
//! fresh buckets). Memory is bounded: a bucket that has refilled completely is the same as a
//! missing one and is swept when the registry grows, and a hard cap sheds the oldest half.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::table::RateLimit;

/// Shards of the registry: requests to different buckets rarely wait on each other.
const SHARDS: usize = 16;
/// Buckets per shard at which an insert first sweeps full buckets.
const SWEEP_FIRST: usize = 1024;
/// Buckets per shard never exceeded: past it the least recently used half is dropped.
const HARD_CAP: usize = 64 * 1024;

/// The value a request is counted under, borrowed from the request.
#[derive(Debug, Clone, Copy, Hash)]
pub(crate) enum KeyValue<'a> {
    Ip(IpAddr),
    /// A header's value (empty when absent: requests without the header share one bucket).
    Bytes(&'a [u8]),
    /// The matched route's namespace and name.
    Route(&'a str, &'a str),
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

#[derive(Debug, Default)]
struct Shard {
    buckets: HashMap<u64, Bucket>,
    sweep_at: usize,
}

/// Every bucket of every rate limit. Keys are a keyed hash (SipHash with a random key) of the
/// limit's id and the key value: no allocation per request, and collisions cannot be forced.
#[derive(Debug)]
pub(crate) struct RateLimits {
    hasher: RandomState,
    shards: Vec<Mutex<Shard>>,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            hasher: RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        buckets: HashMap::new(),
                        sweep_at: SWEEP_FIRST,
                    })
                })
                .collect(),
        }
    }
}

impl RateLimits {
    /// Takes a token from the bucket of `key` under `limit`; when it is empty, how long until
    /// the next token.
    pub(crate) fn take(&self, limit: &RateLimit, key: KeyValue<'_>) -> Result<(), Duration> {
        self.take_at(limit, key, Instant::now())
    }

    fn take_at(&self, limit: &RateLimit, key: KeyValue<'_>, now: Instant) -> Result<(), Duration> {
        let mut h = self.hasher.build_hasher();
        limit.id.hash(&mut h);
        key.hash(&mut h);
        let hash = h.finish();
        let capacity = f64::from(limit.capacity.max(1));
        // Tokens per second; a zero rate or period never refills.
        let rate = if limit.per.is_zero() {
            0.0
        } else {
            f64::from(limit.requests) / limit.per.as_secs_f64()
        };
        let mut shard = self.shard(hash);
        if !shard.buckets.contains_key(&hash) && shard.buckets.len() >= shard.sweep_at {
            shard.sweep(now, rate, capacity);
        }
        let bucket = shard.buckets.entry(hash).or_insert(Bucket {
            tokens: capacity,
            last: now,
        });
        let elapsed = now.saturating_duration_since(bucket.last).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(capacity);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        if rate <= 0.0 {
            return Err(Duration::from_secs(3600));
        }
        let wait = (1.0 - bucket.tokens) / rate;
        Err(Duration::from_secs_f64(wait.clamp(0.0, 86_400.0)))
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        super::shard_of(&self.shards, hash)
    }

    /// Buckets kept (tests check that they are swept).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.buckets.len()))
            .sum()
    }
}

impl Shard {
    /// Drops buckets that are full again by `now` (judged with the rate of the limit being
    /// asked: buckets of slower limits may go early, which only forgets a partial debt of a
    /// bucket idle for a whole refill period of the faster limit), then, over the hard cap,
    /// the least recently used half.
    fn sweep(&mut self, now: Instant, rate: f64, capacity: f64) {
        let refill = if rate > 0.0 {
            Duration::from_secs_f64((capacity / rate).min(86_400.0))
        } else {
            Duration::from_secs(86_400)
        };
        self.buckets
            .retain(|_, b| now.saturating_duration_since(b.last) < refill);
        if self.buckets.len() >= HARD_CAP {
            let mut ages: Vec<Instant> = self.buckets.values().map(|b| b.last).collect();
            let mid = ages.len() / 2;
            let (_, median, _) = ages.select_nth_unstable(mid);
            let median = *median;
            self.buckets.retain(|_, b| b.last > median);
        }
        self.sweep_at = (self.buckets.len() * 2).max(SWEEP_FIRST);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::RateLimitKey;

    fn limit(id: &str, requests: u32, per: Duration, burst: u32) -> RateLimit {
        RateLimit {
            id: id.into(),
            requests,
            per,
            capacity: requests + burst,
            key: RateLimitKey::ClientIp,
        }
    }

    #[test]
    fn a_bucket_allows_its_capacity_then_refills_at_the_rate() {
        let limits = RateLimits::default();
        let l = limit("a", 5, Duration::from_secs(1), 0);
        let key = KeyValue::Ip("192.0.2.1".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..5 {
            assert_eq!(limits.take_at(&l, key, t0), Ok(()));
        }
        let wait = limits.take_at(&l, key, t0).unwrap_err();
        assert!(wait > Duration::from_millis(150) && wait <= Duration::from_millis(200));
        assert_eq!(
            limits.take_at(&l, key, t0 + Duration::from_millis(200)),
            Ok(())
        );
        // Another key and another limit have their own buckets.
        let other = KeyValue::Ip("192.0.2.2".parse().unwrap());
        assert_eq!(limits.take_at(&l, other, t0), Ok(()));
        let l2 = limit("b", 5, Duration::from_secs(1), 0);
        assert_eq!(limits.take_at(&l2, key, t0), Ok(()));
    }

    #[test]
    fn full_buckets_are_swept_as_the_registry_grows() {
        let limits = RateLimits::default();
        let l = limit("a", 1, Duration::from_millis(10), 0);
        let t0 = Instant::now();
        for i in 0..(SHARDS * SWEEP_FIRST * 2) as u32 {
            let key = i.to_be_bytes();
            let _ = limits.take_at(&l, KeyValue::Bytes(&key), t0);
        }
        let later = t0 + Duration::from_secs(1);
        for i in 0..(SHARDS * SWEEP_FIRST * 2) as u32 {
            let key = (u32::MAX - i).to_be_bytes();
            let _ = limits.take_at(&l, KeyValue::Bytes(&key), later);
        }
        // The first round's buckets had refilled: most of them are gone.
        assert!(
            limits.len() < SHARDS * SWEEP_FIRST * 3,
            "{} buckets",
            limits.len()
        );
    }
}
