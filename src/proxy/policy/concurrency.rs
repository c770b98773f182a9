//! Per-client concurrency limits: how many requests of one client address are in progress
//! under one `concurrencyLimit`, in one proxy-wide registry kept across tables. A request
//! holds a [`Slot`] until its response body is done or it is cancelled; an entry whose count
//! returns to zero is removed, so the registry holds only clients with requests in progress.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::table::ConcurrencyLimit;

/// Shards of the registry: requests of different clients rarely wait on each other.
const SHARDS: usize = 16;

/// Requests in progress, per keyed hash (SipHash with a random key) of the limit's id and the
/// client address: no allocation per request, and collisions cannot be forced.
#[derive(Debug)]
pub(crate) struct Concurrency {
    hasher: RandomState,
    shards: Vec<Mutex<HashMap<u64, u32>>>,
}

impl Default for Concurrency {
    fn default() -> Self {
        Self {
            hasher: RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }
}

/// One request in progress under a limit; dropping it gives the place back.
#[derive(Debug)]
pub(crate) struct Slot {
    registry: Arc<Concurrency>,
    hash: u64,
}

impl Concurrency {
    /// Counts one more request of `client` under `limit`, or `None` when `limit.per_client`
    /// are already in progress.
    pub(crate) fn acquire(
        self: &Arc<Self>,
        limit: &ConcurrencyLimit,
        client: IpAddr,
    ) -> Option<Slot> {
        let mut h = self.hasher.build_hasher();
        limit.id.hash(&mut h);
        client.hash(&mut h);
        let hash = h.finish();
        let mut shard = self.shard(hash);
        let count = shard.entry(hash).or_insert(0);
        if *count >= limit.per_client {
            return None;
        }
        *count += 1;
        Some(Slot {
            registry: self.clone(),
            hash,
        })
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, HashMap<u64, u32>> {
        super::shard_of(&self.shards, hash)
    }

    /// Entries kept (tests check that they are removed).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.len()))
            .sum()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut shard = self.registry.shard(self.hash);
        if let Some(count) = shard.get_mut(&self.hash) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                shard.remove(&self.hash);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(id: &str, per_client: u32) -> ConcurrencyLimit {
        ConcurrencyLimit {
            id: id.into(),
            per_client,
        }
    }

    #[test]
    fn a_client_gets_its_limit_and_a_released_place_back() {
        let registry = Arc::new(Concurrency::default());
        let l = limit("default/p", 2);
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        let first = registry.acquire(&l, client).expect("first");
        let second = registry.acquire(&l, client).expect("second");
        assert!(registry.acquire(&l, client).is_none(), "over the limit");
        // Another client, and another limit for the same client, count apart.
        let other = registry.acquire(&l, "192.0.2.2".parse().unwrap());
        assert!(other.is_some());
        let l2 = limit("default/q", 1);
        assert!(registry.acquire(&l2, client).is_some());
        drop(first);
        let third = registry.acquire(&l, client).expect("a released place");
        assert!(registry.acquire(&l, client).is_none());
        drop((second, third, other));
    }

    #[test]
    fn entries_are_removed_when_their_count_returns_to_zero() {
        let registry = Arc::new(Concurrency::default());
        let l = limit("default/p", 3);
        let mut slots = Vec::new();
        for i in 0..100u8 {
            let client = IpAddr::from([192, 0, 2, i]);
            slots.push(registry.acquire(&l, client).expect("slot"));
            slots.push(registry.acquire(&l, client).expect("slot"));
        }
        assert_eq!(registry.len(), 100);
        slots.truncate(101);
        assert_eq!(registry.len(), 51, "one client still holds one slot");
        slots.clear();
        assert_eq!(registry.len(), 0);
    }
}
