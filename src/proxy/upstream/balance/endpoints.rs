//! Per-endpoint state shared by every table and by the connection pools: requests in flight
//! (least-request balancing), open upstream connections (circuit breaking) and passive health
//! (outlier detection). Keyed by address; entries nobody holds are swept so endpoints that
//! left every table do not accumulate.

use foldhash::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use super::outlier::Health;

/// State of one endpoint.
#[derive(Debug, Default)]
pub struct EndpointState {
    pub in_flight: AtomicUsize,
    pub connections: AtomicUsize,
    pub health: Health,
}

/// The endpoint map.
#[derive(Debug, Default)]
pub struct Endpoints {
    map: RwLock<HashMap<SocketAddr, Arc<EndpointState>>>,
    /// Endpoints currently ejected anywhere: while 0, picks skip health checks and the clock.
    pub ejected: AtomicUsize,
    /// Map size at which inserting sweeps.
    sweep_at: AtomicUsize,
}

/// Smallest map size that triggers a sweep on insert.
const SWEEP_FLOOR: usize = 64;

impl Endpoints {
    /// The state of `addr` if it has one.
    pub fn get(&self, addr: SocketAddr) -> Option<Arc<EndpointState>> {
        self.map.read().ok()?.get(&addr).cloned()
    }

    /// The state of `addr`, created on first use. Creating one may sweep unused entries
    /// (`sweep` decides per entry).
    pub fn state(
        &self,
        addr: SocketAddr,
        sweep: impl FnMut(&SocketAddr, &EndpointState) -> bool,
    ) -> Arc<EndpointState> {
        if let Some(s) = self.get(addr) {
            return s;
        }
        let Ok(mut map) = self.map.write() else {
            return Arc::default();
        };
        if map.len() >= self.sweep_at.load(Ordering::Relaxed).max(SWEEP_FLOOR) {
            retain_used(&mut map, sweep);
            self.sweep_at.store(map.len() * 2, Ordering::Relaxed);
        }
        map.entry(addr).or_default().clone()
    }

    /// Requests in flight on `addr`.
    pub fn load(&self, addr: SocketAddr) -> usize {
        self.get(addr)
            .map_or(0, |s| s.in_flight.load(Ordering::Relaxed))
    }

    /// Connections open to `addr`.
    pub fn connections(&self, addr: SocketAddr) -> usize {
        self.get(addr)
            .map_or(0, |s| s.connections.load(Ordering::Relaxed))
    }

    /// Counts a connection the pools opened to `addr` until the guard drops with it.
    pub fn connection(&self, addr: SocketAddr) -> ConnGuard {
        let state = self.state(addr, |_, _| true);
        state.connections.fetch_add(1, Ordering::Relaxed);
        ConnGuard(state)
    }

    /// Drops the entries nobody holds that `keep` does not want.
    pub fn sweep(&self, keep: impl FnMut(&SocketAddr, &EndpointState) -> bool) {
        if let Ok(mut map) = self.map.write() {
            retain_used(&mut map, keep);
        }
    }

    /// The endpoints whose state `pick` selects (the dashboard's ejected ones).
    pub fn matching(&self, mut pick: impl FnMut(&EndpointState) -> bool) -> Vec<SocketAddr> {
        self.map.read().map_or_else(
            |_| Vec::new(),
            |m| m.iter().filter(|(_, s)| pick(s)).map(|(a, _)| *a).collect(),
        )
    }

    /// Number of entries (tests check sweeping with it).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.read().map_or(0, |m| m.len())
    }
}

fn retain_used(
    map: &mut HashMap<SocketAddr, Arc<EndpointState>>,
    mut keep: impl FnMut(&SocketAddr, &EndpointState) -> bool,
) {
    // Held elsewhere: a request in flight, a pooled connection, a Picked.
    map.retain(|addr, s| Arc::strong_count(s) > 1 || keep(addr, s));
}

/// One open upstream connection, counted on its endpoint while it lives.
#[derive(Debug)]
pub struct ConnGuard(Arc<EndpointState>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}
