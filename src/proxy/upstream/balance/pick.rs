//! The three balancers over a list of endpoints, given which endpoints are eligible (`ok`):
//! power-of-two-choices least request, round robin, and the consistent-hash ring. Pure apart
//! from the random draws, so each is tested alone. [`Why`] says which of them chose an endpoint
//! and what it had to settle for (the request tracer prints it).

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::ring::Ring;

/// Why an endpoint was picked: by whom, from which endpoints, and what the pick settled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Why {
    pub by: PickedBy,
    /// The eligible endpoints the balancer chose among ([`Tier`]).
    pub tier: Tier,
    /// The Service had no ready endpoint: the pick is among the terminating ones.
    pub terminating: bool,
}

/// Who chose the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickedBy {
    /// The request's session cookie or header is bound to it.
    Session,
    /// The consistent-hash ring, from the request's key.
    Hash,
    /// Round robin.
    RoundRobin,
    /// Power of two choices, least requests in flight (also a hashed Service's request that
    /// has no key).
    LeastRequest,
}

/// Which endpoints were eligible, in the order the balancer tries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Not ejected and not tried yet by this request.
    Fresh,
    /// Every endpoint not ejected was tried already: one of them again.
    Tried,
    /// Every endpoint is ejected: one of them anyway (no endpoint at all would be worse).
    Ejected,
}

impl Tier {
    /// The tiers in the order they are tried.
    pub const ALL: [Tier; 3] = [Tier::Fresh, Tier::Tried, Tier::Ejected];
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.by {
            PickedBy::Session => "bound by the request's session",
            PickedBy::Hash => "consistent hash of the request's key",
            PickedBy::RoundRobin => "round robin",
            PickedBy::LeastRequest => "least requests of two random endpoints",
        })?;
        f.write_str(match self.tier {
            Tier::Fresh => "",
            Tier::Tried => ", again: every endpoint not ejected was tried already",
            Tier::Ejected => ", among ejected endpoints (every endpoint is ejected)",
        })?;
        if self.terminating {
            f.write_str(", from terminating endpoints (none is ready)")?;
        }
        Ok(())
    }
}

/// Of two distinct random endpoints, the eligible one with fewer requests in flight (`load`);
/// when neither of the two is eligible, the first eligible one from a random start.
pub fn least_request(
    pool: &[SocketAddr],
    ok: &dyn Fn(SocketAddr) -> bool,
    load: impl Fn(SocketAddr) -> usize,
) -> Option<SocketAddr> {
    let n = pool.len();
    if n < 2 {
        return pool.first().copied().filter(|a| ok(*a));
    }
    let i = fastrand::usize(..n);
    let mut j = fastrand::usize(..n - 1);
    if j >= i {
        j += 1;
    }
    let (a, b) = (pool[i], pool[j]);
    match (ok(a), ok(b)) {
        (true, true) => Some(if load(b) < load(a) { b } else { a }),
        (true, false) => Some(a),
        (false, true) => Some(b),
        (false, false) => scan(pool, fastrand::usize(..n), ok),
    }
}

/// The next eligible endpoint after the Service's counter (shared across tables).
pub fn round_robin(
    pool: &[SocketAddr],
    counter: &AtomicUsize,
    ok: &dyn Fn(SocketAddr) -> bool,
) -> Option<SocketAddr> {
    if pool.is_empty() {
        return None;
    }
    scan(pool, counter.fetch_add(1, Ordering::Relaxed), ok)
}

/// The endpoint owning `key` on `ring`, skipping ineligible ones.
pub fn hashed(ring: &Ring, key: u64, ok: &dyn Fn(SocketAddr) -> bool) -> Option<SocketAddr> {
    ring.lookup(key, ok)
}

/// The first eligible endpoint from `start`, wrapping around.
fn scan(pool: &[SocketAddr], start: usize, ok: &dyn Fn(SocketAddr) -> bool) -> Option<SocketAddr> {
    let n = pool.len();
    (0..n).map(|k| pool[(start + k) % n]).find(|a| ok(*a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(n: u8) -> Vec<SocketAddr> {
        (1..=n)
            .map(|i| SocketAddr::from(([10, 0, 0, i], 80)))
            .collect()
    }

    #[test]
    fn least_request_prefers_the_less_loaded_endpoint() {
        let p = pool(2);
        let load = |a: SocketAddr| if a == p[0] { 10 } else { 0 };
        for _ in 0..100 {
            assert_eq!(least_request(&p, &|_| true, load), Some(p[1]));
        }
        // Of three, the busiest is never chosen: it loses to whichever other one is drawn.
        let p3 = pool(3);
        let load3 = |a: SocketAddr| if a == p3[2] { 5 } else { 1 };
        for _ in 0..100 {
            assert_ne!(least_request(&p3, &|_| true, load3), Some(p3[2]));
        }
        // Ineligible endpoints are skipped, even when idle.
        for _ in 0..100 {
            assert_eq!(least_request(&p, &|a| a == p[0], load), Some(p[0]));
        }
        assert_eq!(least_request(&p, &|_| false, load), None);
        assert_eq!(least_request(&p[..1], &|_| true, load), Some(p[0]));
        assert_eq!(least_request(&[], &|_| true, load), None);
    }

    #[test]
    fn round_robin_cycles_and_skips_ineligible_endpoints() {
        let p = pool(3);
        let c = AtomicUsize::new(0);
        let got: Vec<_> = (0..6)
            .filter_map(|_| round_robin(&p, &c, &|_| true))
            .collect();
        assert_eq!(got, [p[0], p[1], p[2], p[0], p[1], p[2]]);
        let got: Vec<_> = (0..4)
            .filter_map(|_| round_robin(&p, &c, &|a| a != p[1]))
            .collect();
        assert!(!got.contains(&p[1]));
        assert_eq!(round_robin(&[], &c, &|_| true), None);
    }

    #[test]
    fn why_says_who_chose_and_what_it_settled_for() {
        let why = Why {
            by: PickedBy::Hash,
            tier: Tier::Fresh,
            terminating: false,
        };
        assert_eq!(why.to_string(), "consistent hash of the request's key");
        let settled = Why {
            by: PickedBy::LeastRequest,
            tier: Tier::Ejected,
            terminating: true,
        };
        assert_eq!(
            settled.to_string(),
            "least requests of two random endpoints, among ejected endpoints (every endpoint is \
             ejected), from terminating endpoints (none is ready)"
        );
    }

    #[test]
    fn hashing_keeps_a_key_on_one_endpoint() {
        let p = pool(4);
        let ring = Ring::new(&p);
        let first = hashed(&ring, 42, &|_| true);
        for _ in 0..10 {
            assert_eq!(hashed(&ring, 42, &|_| true), first);
        }
    }
}
