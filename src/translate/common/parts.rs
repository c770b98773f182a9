//! Work of one translation split over threads: how many a piece of work gets, and running a
//! list in contiguous parts joined in list order, so that the result does not depend on which
//! thread finishes first. The threads live only for the call: the translator stays pure.

use std::num::NonZeroUsize;

/// At most this many threads, however many cores there are: translation shares the machine
/// with the proxy's workers.
const MAX_THREADS: usize = 4;

/// How many threads `items` pieces of work get when each thread should have at least
/// `per_thread` of them: `chosen` when the caller chose, else one per available core (as the
/// process's CPU affinity and cgroup quota allow), at most [`MAX_THREADS`].
pub(in crate::translate) fn threads_for(
    items: usize,
    per_thread: usize,
    chosen: Option<usize>,
) -> usize {
    match chosen {
        Some(n) => n.clamp(1, items.max(1)),
        None => {
            let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
            cores.min(MAX_THREADS).min(items / per_thread.max(1)).max(1)
        }
    }
}

/// `f` of every item, in order: the first part on the calling thread, the others on
/// `threads - 1` scoped threads. A panic in a part is the caller's, as on one thread.
pub(in crate::translate) fn map_in_parts<T: Send, R: Send>(
    items: Vec<T>,
    threads: usize,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 || items.len() < 2 {
        return items.into_iter().map(f).collect();
    }
    let size = items.len().div_ceil(threads).max(1);
    let total = items.len();
    let mut items = items.into_iter();
    let first: Vec<T> = items.by_ref().take(size).collect();
    let f = &f;
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads - 1);
        while items.len() > 0 {
            let part: Vec<T> = items.by_ref().take(size).collect();
            handles.push(scope.spawn(move || part.into_iter().map(f).collect::<Vec<R>>()));
        }
        let mut out: Vec<R> = Vec::with_capacity(total);
        out.extend(first.into_iter().map(f));
        for h in handles {
            out.extend(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts are joined in list order whatever the thread count.
    #[test]
    fn parts_keep_list_order() {
        let items: Vec<u32> = (0..1000).collect();
        let expected: Vec<u64> = items.iter().map(|&i| u64::from(i) * 3).collect();
        for threads in [1, 2, 3, 4, 7] {
            assert_eq!(
                map_in_parts(items.clone(), threads, |i| u64::from(i) * 3),
                expected
            );
        }
        assert!(map_in_parts(Vec::<u32>::new(), 4, |i| i).is_empty());
    }

    #[test]
    fn a_chosen_count_is_kept_within_the_work() {
        assert_eq!(threads_for(10, 512, Some(3)), 3);
        assert_eq!(threads_for(2, 512, Some(8)), 2);
        assert_eq!(threads_for(0, 512, Some(0)), 1);
        assert_eq!(threads_for(100, 512, None), 1);
        assert!(threads_for(100_000, 512, None) <= MAX_THREADS);
    }
}
