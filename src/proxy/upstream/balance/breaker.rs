//! Circuit breaking per Service: limits on requests in flight, requests still waiting for a
//! response head, and upstream connections. Over a limit a request is refused at once (503
//! with `x-edgeplane-overloaded`) instead of queueing without bound behind a slow backend.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::proxy::error::Overload;

/// Limits per Service. Defaults are generous (1024 each, like Envoy): they stop a runaway
/// backlog, not normal traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerLimits {
    /// Requests in flight to the Service (head sent, response not yet fully streamed).
    pub max_requests: usize,
    /// Requests waiting for a connection or a response head.
    pub max_pending: usize,
    /// Upstream connections open to the Service's endpoints: when that many are open and all
    /// busy, a request that would need another one is refused (HTTP/1.1 backends only; h2c
    /// multiplexes on one connection per endpoint).
    pub max_connections: usize,
}

impl Default for BreakerLimits {
    fn default() -> Self {
        Self {
            max_requests: 1024,
            max_pending: 1024,
            max_connections: 1024,
        }
    }
}

/// The counters of one Service that the limits apply to.
#[derive(Debug, Default)]
pub struct Load {
    pub requests: AtomicUsize,
    pub pending: AtomicUsize,
}

impl Load {
    /// Takes a request slot and a pending slot, or says which limit is reached.
    /// `connections` is asked only when the requests in flight could have filled them: it
    /// returns the connections open to the Service's endpoints, or None when they do not
    /// count (h2c).
    pub fn admit(
        &self,
        limits: &BreakerLimits,
        connections: impl FnOnce() -> Option<usize>,
    ) -> Result<(), Overload> {
        let requests = self.requests.fetch_add(1, Ordering::Relaxed);
        if requests >= limits.max_requests {
            self.requests.fetch_sub(1, Ordering::Relaxed);
            return Err(Overload::MaxRequests);
        }
        // Each HTTP/1.1 request in flight holds a connection: with fewer requests than the
        // limit the connections cannot all be busy.
        if requests >= limits.max_connections {
            if let Some(open) = connections() {
                if open >= limits.max_connections && requests >= open {
                    self.requests.fetch_sub(1, Ordering::Relaxed);
                    return Err(Overload::MaxConnections);
                }
            }
        }
        if self.pending.fetch_add(1, Ordering::Relaxed) >= limits.max_pending {
            self.pending.fetch_sub(1, Ordering::Relaxed);
            self.requests.fetch_sub(1, Ordering::Relaxed);
            return Err(Overload::MaxPending);
        }
        Ok(())
    }

    /// The response head arrived (or the attempt failed): no longer pending.
    pub fn head_done(&self) {
        self.pending.fetch_sub(1, Ordering::Relaxed);
    }

    /// The request's exchange ended.
    pub fn done(&self) {
        self.requests.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(r: usize, p: usize, c: usize) -> BreakerLimits {
        BreakerLimits {
            max_requests: r,
            max_pending: p,
            max_connections: c,
        }
    }

    #[test]
    fn requests_over_the_limit_are_refused_until_one_ends() {
        let load = Load::default();
        let l = limits(2, 10, 10);
        assert_eq!(load.admit(&l, || None), Ok(()));
        assert_eq!(load.admit(&l, || None), Ok(()));
        assert_eq!(load.admit(&l, || None), Err(Overload::MaxRequests));
        load.head_done();
        load.done();
        assert_eq!(load.admit(&l, || None), Ok(()));
        assert_eq!(load.requests.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn pending_counts_until_the_head_arrives() {
        let load = Load::default();
        let l = limits(10, 1, 10);
        assert_eq!(load.admit(&l, || None), Ok(()));
        assert_eq!(load.admit(&l, || None), Err(Overload::MaxPending));
        load.head_done();
        assert_eq!(load.admit(&l, || None), Ok(()));
        assert_eq!(load.requests.load(Ordering::Relaxed), 2, "refusals undo");
    }

    #[test]
    fn connections_refuse_only_when_all_are_busy() {
        let load = Load::default();
        let l = limits(10, 10, 2);
        assert_eq!(load.admit(&l, || Some(2)), Ok(()));
        assert_eq!(load.admit(&l, || Some(2)), Ok(()));
        // Two requests hold the two connections.
        assert_eq!(load.admit(&l, || Some(2)), Err(Overload::MaxConnections));
        // h2c: connections do not count.
        assert_eq!(load.admit(&l, || None), Ok(()));
        // More connections than requests: one is idle.
        assert_eq!(load.admit(&l, || Some(9)), Ok(()));
    }
}
