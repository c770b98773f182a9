//! TrafficPolicy enforcement on the request path: the rule's policy merged over its virtual
//! host's, then, before any backend is picked, IP access (403), rate limit (429), concurrency
//! limit (503), basic auth and JWT (401, and 400 for a request with more than one
//! `Authorization` header), and the declared request body size (413). Owns the state that
//! outlives tables (rate-limit buckets, requests in progress per client, remembered bcrypt
//! checks, the bounded pool bcrypt runs on); the tables only describe
//! policies. A request without any policy pays two `Option` checks. The checks are in `check`;
//! external authorization, which runs after them, in `ext_auth`.

mod basic;
mod body;
mod check;
mod concurrency;
pub(crate) mod ext_auth;
mod hashing;
mod ip;
mod jwt;
mod ratelimit;

/// The shard of `shards` for a keyed `hash`, locked. The low bits of the hash went into the
/// shard's map; the high bits pick the shard. A poisoned lock is taken over: a count or bucket
/// is still right after a panic elsewhere.
fn shard_of<T>(shards: &[std::sync::Mutex<T>], hash: u64) -> std::sync::MutexGuard<'_, T> {
    let i = (hash >> 58) as usize % shards.len();
    shards[i]
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(crate) use body::limit_response;
pub use check::*;
pub(crate) use concurrency::Slot;
pub use hashing::HashLimits;
pub(crate) use ip::{allowed as ip_allowed, client_ip};
