//! A string-keyed map split into shards behind `Arc`s, for maps that each table keeps a copy
//! of and the next table patches: a clone shares every shard, and a change copies only the
//! shard it falls in. At 5,000 virtual hosts, a table built after one route changed copies
//! about eighty entries instead of five thousand, and the two tables share the rest. Pure.

use std::hash::BuildHasher;
use std::sync::Arc;

use foldhash::HashMap;

/// Number of shards once the map holds anything: a power of two.
const SHARDS: usize = 64;

/// Values by string key; see the module documentation.
#[derive(Debug, Clone)]
pub struct Shards<T> {
    /// Empty until the first insertion (most maps of a table hold a handful of entries or
    /// none), then [`SHARDS`] long. Keys are boxed strs: a map of hosts keeps one per host.
    shards: Vec<Arc<HashMap<Box<str>, T>>>,
    len: usize,
}

impl<T> Default for Shards<T> {
    fn default() -> Self {
        Self {
            shards: Vec::new(),
            len: 0,
        }
    }
}

/// The shard of `key`: the top bits of a hash with a fixed seed (the shards' own maps hash
/// with theirs, so the two do not correlate).
fn shard_of(key: &str) -> usize {
    let hash = foldhash::fast::FixedState::with_seed(0x5eed).hash_one(key);
    (hash >> (64 - SHARDS.trailing_zeros())) as usize
}

impl<T> Shards<T> {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&T> {
        if self.len == 0 {
            return None;
        }
        self.shards.get(shard_of(key))?.get(key)
    }

    /// Every value, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.shards.iter().flat_map(|s| s.values())
    }
}

impl<T: Clone> Shards<T> {
    /// The shard `key` falls in, copied first when another map shares it.
    fn shard_mut(&mut self, key: &str) -> &mut HashMap<Box<str>, T> {
        if self.shards.is_empty() {
            self.shards = (0..SHARDS).map(|_| Arc::default()).collect();
        }
        Arc::make_mut(&mut self.shards[shard_of(key)])
    }

    /// Adds `value` for `key` unless the key has one already; true when added.
    pub fn insert_new(&mut self, key: &str, value: T) -> bool {
        if self.get(key).is_some() {
            return false;
        }
        self.shard_mut(key).insert(key.into(), value);
        self.len += 1;
        true
    }

    /// Sets the value of `key`, returning the one it replaces.
    pub fn put(&mut self, key: &str, value: T) -> Option<T> {
        let old = self.shard_mut(key).insert(key.into(), value);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Removes the value of `key`, if it has one.
    pub fn remove(&mut self, key: &str) -> Option<T> {
        self.get(key)?;
        let old = self.shard_mut(key).remove(key);
        self.len -= usize::from(old.is_some());
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_map() {
        let mut m = Shards::default();
        assert_eq!(m.get("a"), None);
        assert!(m.insert_new("a", 1));
        assert!(!m.insert_new("a", 2), "the first value of a key wins");
        assert_eq!(m.put("b", 3), None);
        assert_eq!(m.put("b", 4), Some(3));
        assert_eq!((m.get("a"), m.get("b"), m.len), (Some(&1), Some(&4), 2));
        assert_eq!(m.remove("a"), Some(1));
        assert_eq!(m.remove("a"), None);
        assert_eq!((m.get("a"), m.len), (None, 1));
        let mut values: Vec<i32> = m.values().copied().collect();
        values.sort_unstable();
        assert_eq!(values, [4]);
    }

    #[test]
    fn a_clone_shares_every_shard_but_the_one_changed() {
        let mut first = Shards::default();
        for i in 0..1000 {
            first.put(&format!("host-{i}.example"), i);
        }
        let mut second = first.clone();
        second.put("host-7.example", -7);
        let shared = first
            .shards
            .iter()
            .zip(&second.shards)
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count();
        assert_eq!(shared, SHARDS - 1);
        assert_eq!(first.get("host-7.example"), Some(&7));
        assert_eq!(second.get("host-7.example"), Some(&-7));
        assert_eq!(second.remove("host-8.example"), Some(8));
        assert_eq!(first.get("host-8.example"), Some(&8));
        assert_eq!((first.len, second.len), (1000, 999));
    }
}
