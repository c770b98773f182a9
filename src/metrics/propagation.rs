//! Propagation lag: when the change a snapshot carries was received (a file change seen by the
//! watcher, a watch event received from the API server), carried from the provider that sends
//! the snapshot to the reconciler that publishes its table, for
//! `edgeplane_propagation_seconds`. Marks are keyed by the snapshot's address: the reconciler
//! takes the marks of the snapshot it read and of every earlier one (a snapshot carries the
//! changes of those it replaced), never those of a snapshot sent after it.

use std::sync::Mutex;
use std::time::Instant;

/// At most this many marks wait (a reconciler that stopped reading cannot grow the list).
const MAX_PENDING: usize = 64;

/// Receive times of snapshots sent and not yet read, oldest first, and the earliest of the
/// snapshots read since the last publication (a failed rebuild keeps it for the next one).
#[derive(Debug, Default)]
pub struct Received {
    pending: Mutex<Vec<(usize, Instant)>>,
    read: Mutex<Option<Instant>>,
}

impl Received {
    /// Provider side, before sending the snapshot at `snapshot`: the change it carries was
    /// received at `at`.
    pub fn mark<T>(&self, snapshot: &T, at: Instant) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.len() >= MAX_PENDING {
            pending.remove(0);
        }
        pending.push((std::ptr::from_ref(snapshot) as usize, at));
    }

    /// Reconciler side, having read the snapshot at `snapshot`: the earliest receive time of
    /// the changes it carries, if it was marked (the marks of earlier snapshots go with it).
    pub fn take<T>(&self, snapshot: &T) -> Option<Instant> {
        let key = std::ptr::from_ref(snapshot) as usize;
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let last = pending.iter().rposition(|(k, _)| *k == key)?;
        let taken: Vec<_> = pending.drain(..=last).collect();
        taken.into_iter().map(|(_, at)| at).min()
    }
}

impl Received {
    /// Reconciler side: `snapshot` was read; its changes' receive time waits for a publication.
    pub fn read<T>(&self, snapshot: &T) {
        let taken = self.take(snapshot);
        let mut read = self.read.lock().unwrap_or_else(|p| p.into_inner());
        *read = read.into_iter().chain(taken).min();
    }

    /// Reconciler side: a table was published; the receive time of what it serves, if marked.
    pub fn published(&self) -> Option<Instant> {
        self.read.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_snapshot_takes_its_marks_and_those_it_replaced_but_not_later_ones() {
        let r = Received::default();
        let (a, b, c) = (Box::new(1u8), Box::new(2u8), Box::new(3u8));
        let t0 = Instant::now();
        r.mark(&*a, t0);
        r.mark(&*b, t0 + Duration::from_millis(5));
        r.mark(&*c, t0 + Duration::from_millis(9));
        assert_eq!(r.take(&*b), Some(t0), "b carries a's change too");
        assert_eq!(r.take(&*a), None, "taken with b");
        assert_eq!(r.take(&*c), Some(t0 + Duration::from_millis(9)));
        assert_eq!(r.take(&*c), None);
    }
}
