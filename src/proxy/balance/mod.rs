//! Endpoint choice and the per-endpoint state behind it, shared by every table so it survives
//! table swaps: requests in flight per endpoint (for least-request balancing). Keyed by endpoint
//! address, never by route, so routes sharing a Service share its state.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use super::error::ProxyError;
use crate::table::ServiceBackend;

/// What a request brings to endpoint choice.
#[derive(Debug, Default, Clone, Copy)]
pub struct PickRequest<'a> {
    /// The request's consistent-hash key, when the Service balances by hash.
    pub hash: Option<u64>,
    /// The endpoint the request's session is bound to, if any.
    pub pinned: Option<SocketAddr>,
    /// Endpoints already tried by this request: avoided while another one is available.
    pub exclude: &'a [SocketAddr],
}

/// How an exchange with an endpoint ended, for passive health tracking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A response that says the endpoint works (anything but a 5xx gateway error).
    Success,
    /// A 5xx response, or a connect or exchange failure.
    Failure,
}

/// State of one endpoint, shared across tables.
#[derive(Debug, Default)]
pub struct EndpointState {
    in_flight: AtomicUsize,
}

/// The registry of endpoint state.
#[derive(Debug, Default)]
pub struct Backends {
    endpoints: RwLock<HashMap<SocketAddr, Arc<EndpointState>>>,
}

impl Backends {
    /// Picks an endpoint of `service` for one attempt: a ready one, or a terminating one while
    /// none is ready; answers 503 when it has neither.
    pub fn pick(
        &self,
        service: &ServiceBackend,
        request: &PickRequest<'_>,
    ) -> Result<Picked, ProxyError> {
        let pool = if service.endpoints.is_empty() {
            &service.terminating
        } else {
            &service.endpoints
        };
        let fresh: Vec<SocketAddr> = pool
            .iter()
            .copied()
            .filter(|e| !request.exclude.contains(e))
            .collect();
        let candidates = if fresh.is_empty() { pool } else { &fresh };
        let addr = match request.pinned.filter(|p| candidates.contains(p)) {
            Some(p) => p,
            None => match candidates.len() {
                0 => {
                    return Err(ProxyError::NoEndpoints {
                        service: service.service.clone(),
                    })
                }
                n => {
                    let at = request.hash.unwrap_or_else(|| fastrand::u64(..));
                    candidates[(at % n as u64) as usize]
                }
            },
        };
        Ok(Picked::start(addr, self.state(addr)))
    }

    /// The state of `addr`, created on first use.
    fn state(&self, addr: SocketAddr) -> Arc<EndpointState> {
        if let Some(s) = self
            .endpoints
            .read()
            .ok()
            .and_then(|m| m.get(&addr).cloned())
        {
            return s;
        }
        match self.endpoints.write() {
            Ok(mut m) => m.entry(addr).or_default().clone(),
            Err(_) => Arc::default(),
        }
    }
}

/// An endpoint picked for one attempt; counts as in flight on it until dropped.
#[derive(Debug)]
pub struct Picked {
    pub addr: SocketAddr,
    state: Arc<EndpointState>,
}

impl Picked {
    fn start(addr: SocketAddr, state: Arc<EndpointState>) -> Self {
        state.in_flight.fetch_add(1, Ordering::Relaxed);
        Self { addr, state }
    }

    /// Records how the attempt ended.
    pub fn report(&self, _outcome: Outcome) {}
}

impl Drop for Picked {
    fn drop(&mut self) {
        self.state.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}
