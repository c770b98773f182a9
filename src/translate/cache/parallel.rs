//! Compiling the routes of a full translation (start-up, a new memory) on several threads:
//! each thread compiles one contiguous part of the route list, resolving backends on its own
//! caches over the snapshot's shared index, and the parts are joined in list order, so the
//! result does not depend on which thread finishes first and equals compiling the routes one
//! after the other. The threads live only for the call: the translator stays pure.

use crate::translate::backends::resolve::Backends;
use crate::translate::cache::incremental::{compile_entry, RouteEntry};
use crate::translate::common::parts;
use crate::translate::routes::http_like::Source;

/// Fewer routes per thread than this and the routes are compiled on the calling thread
/// alone: starting a thread and merging its caches would cost more than it saves.
const MIN_ROUTES_PER_THREAD: usize = 512;

/// How many threads compile `routes` routes of a full translation: `threads` when the caller
/// chose, else one per available core, each with at least [`MIN_ROUTES_PER_THREAD`] routes
/// ([`parts::threads_for`]).
pub(super) fn threads_for(routes: usize, threads: Option<usize>) -> usize {
    parts::threads_for(routes, MIN_ROUTES_PER_THREAD, threads)
}

/// Compiles `routes` (each with its position) on `threads` threads, the first part on this
/// one with `backends`, which takes over what the others resolved (in part order).
pub(super) fn compile_parts(
    routes: &[(usize, Source)],
    threads: usize,
    backends: &mut Backends<'_>,
) -> Vec<(usize, RouteEntry)> {
    let size = routes.len().div_ceil(threads.max(1)).max(1);
    let mut parts = routes.chunks(size);
    let Some(first) = parts.next() else {
        return Vec::new();
    };
    let workers: Vec<_> = parts.clone().map(|_| backends.worker()).collect();
    let (mut out, done) = std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .zip(workers)
            .map(|(part, mut worker)| {
                scope.spawn(move || {
                    let entries: Vec<_> = part
                        .iter()
                        .map(|(at, route)| (*at, compile_entry(route, &mut worker)))
                        .collect();
                    (entries, worker)
                })
            })
            .collect();
        let out: Vec<_> = first
            .iter()
            .map(|(at, route)| (*at, compile_entry(route, backends)))
            .collect();
        // A panic in a part is the translation's, as it would be on one thread.
        let done: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        (out, done)
    });
    out.reserve(routes.len() - out.len());
    for (entries, worker) in done {
        out.extend(entries);
        backends.absorb(worker);
    }
    out
}
