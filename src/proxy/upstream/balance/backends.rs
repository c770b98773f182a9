//! The endpoint registry ([`Backends`]): Service state (load, breaker, retry budget, balancer)
//! and endpoint state, and the pick of one endpoint for an attempt ([`Picked`] holds it).

use foldhash::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::breaker::BreakerLimits;
use super::endpoints::Endpoints;
use super::outlier::OutlierOptions;
use super::{breaker, endpoints, outlier, overrides, pick, ring};

use crate::metrics::Metrics;
use crate::proxy::error::ProxyError;
use crate::proxy::upstream::retry::BudgetLimits;
use crate::table::{Balance, ServiceBackend, ServiceKey, ServiceLimits, UpstreamProtocol};
use endpoints::EndpointState;
use outlier::{nanos, Ejections};
pub use pick::{PickedBy, Tier, Why};
use ring::Ring;

/// What a request brings to endpoint choice.
#[derive(Debug, Default, Clone, Copy)]
pub struct PickRequest<'a> {
    /// The request's consistent-hash key, when the Service balances by hash ([`hash_key`]).
    pub hash: Option<u64>,
    /// The endpoint the request's session is bound to, if any.
    pub pinned: Option<SocketAddr>,
    /// Endpoints already tried by this request: avoided while another one is available.
    pub exclude: &'a [SocketAddr],
}

/// How an exchange with an endpoint ended, for passive health tracking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A response that says the endpoint works (anything but a 5xx).
    Success,
    /// A 5xx response, or a connect or exchange failure.
    Failure,
}

/// What every Service's state refers to: options, metrics and the clock.
#[derive(Debug)]
struct Settings {
    outlier: OutlierOptions,
    limits: BreakerLimits,
    metrics: Arc<Metrics>,
    endpoints: Arc<Endpoints>,
    epoch: Instant,
}

impl Settings {
    /// Nanoseconds since the epoch; never 0.
    fn now(&self) -> u64 {
        nanos(self.epoch.elapsed()).saturating_add(1)
    }

    /// Counts and logs the end of an ejection.
    fn returned(&self, addr: SocketAddr, service: &dyn std::fmt::Display) {
        self.endpoints.ejected.fetch_sub(1, Ordering::Relaxed);
        self.metrics.outlier_ejected.dec();
        tracing::info!(endpoint = %addr, service = %service, "ejected endpoint returns to balancing");
    }
}

/// State of one Service port, shared across tables.
#[derive(Debug)]
struct ServiceState {
    key: ServiceKey,
    settings: Arc<Settings>,
    load: breaker::Load,
    /// Round-robin position.
    next: AtomicUsize,
    /// Retries in flight, for the retry budget.
    retries: AtomicUsize,
    /// Endpoints at the last pick, for the ejection cap.
    size: AtomicUsize,
    ejections: Ejections,
    /// The hash ring of the endpoint set last hashed over.
    ring: RwLock<Option<Arc<Ring>>>,
}

impl ServiceState {
    /// The ring of `pool`, built once per endpoint set.
    fn ring(&self, pool: &[SocketAddr]) -> Arc<Ring> {
        if let Some(r) = self.ring.read().ok().and_then(|r| r.clone()) {
            if r.serves(pool) {
                return r;
            }
        }
        let ring = Arc::new(Ring::new(pool));
        if let Ok(mut slot) = self.ring.write() {
            *slot = Some(ring.clone());
        }
        ring
    }

    /// Counts a failure of `addr`; ejects it when its run of failures is long enough and the
    /// Service can spare it.
    fn failure(&self, addr: SocketAddr, state: &EndpointState, limits: Option<&ServiceLimits>) {
        let s = &self.settings;
        let outlier = overrides::outlier(&s.outlier, limits);
        if !state.health.failure(outlier.consecutive_failures) {
            return;
        }
        let size = self.size.load(Ordering::Relaxed);
        let now = s.now();
        if let Some((time, continued)) =
            self.ejections
                .try_eject(addr, &state.health, size, now, &outlier)
        {
            if !continued {
                s.endpoints.ejected.fetch_add(1, Ordering::Relaxed);
                s.metrics.outlier_ejected.inc();
            }
            s.metrics
                .outlier_ejections
                .with_label_values(&[&self.key.to_string()])
                .inc();
            tracing::warn!(
                endpoint = %addr,
                service = %self.key,
                seconds = time.as_secs_f64(),
                "endpoint ejected after {} consecutive failures",
                outlier.consecutive_failures
            );
        }
    }
}

/// The registry of endpoint and Service state.
#[derive(Debug)]
pub struct Backends {
    settings: Arc<Settings>,
    services: RwLock<HashMap<ServiceKey, Arc<ServiceState>>>,
    /// Service map size at which inserting sweeps.
    services_sweep_at: AtomicUsize,
    /// When picks next sweep ended ejections (nanoseconds since the epoch).
    next_sweep: AtomicU64,
    /// The retry budget of every Service.
    budget: BudgetLimits,
}

/// Interval of sweeps for ended ejections while some endpoint is ejected.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

impl Backends {
    /// A registry with the outlier and breaker options, counting connections in `endpoints`
    /// (the map the upstream pools count into).
    pub fn new(
        outlier: OutlierOptions,
        limits: BreakerLimits,
        metrics: Arc<Metrics>,
        endpoints: Arc<Endpoints>,
    ) -> Self {
        Self {
            settings: Arc::new(Settings {
                outlier,
                limits,
                metrics,
                endpoints,
                epoch: Instant::now(),
            }),
            services: RwLock::default(),
            services_sweep_at: AtomicUsize::new(64),
            next_sweep: AtomicU64::new(0),
            budget: BudgetLimits::default(),
        }
    }

    /// The registry with `budget` as every Service's retry budget.
    pub fn with_retry_budget(mut self, budget: BudgetLimits) -> Self {
        self.budget = budget;
        self
    }

    /// A retry of a request to `service`, if its budget allows one more in flight: fewer
    /// retries in flight than the budget's share of the requests in flight to the Service, or
    /// than its floor (the Service's own budget when a TrafficPolicy sets `limits`). Asked
    /// only when a request is about to be retried, so a request that succeeds at once never
    /// touches the budget.
    pub fn retry_permit(
        &self,
        service: &ServiceKey,
        limits: Option<&ServiceLimits>,
    ) -> Option<RetryPermit> {
        let svc = self.service(service);
        let budget = overrides::budget(self.budget, limits);
        let active = svc.load.requests.load(Ordering::Relaxed);
        let share = active * budget.percent as usize / 100;
        let allowed = share.max(budget.min_concurrent);
        if svc.retries.fetch_add(1, Ordering::AcqRel) < allowed {
            Some(RetryPermit { service: svc })
        } else {
            svc.retries.fetch_sub(1, Ordering::AcqRel);
            None
        }
    }

    /// Picks an endpoint of `service` for one attempt: a ready one, or a terminating one while
    /// none is ready, by the Service's balancer, skipping ejected endpoints and those in
    /// `exclude` while others are left. 503 when the Service has no endpoint or is over a
    /// circuit-breaker limit.
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
        if pool.is_empty() {
            return Err(ProxyError::NoEndpoints {
                service: service.service.clone(),
            });
        }
        let svc = self.service(&service.service);
        if svc.size.load(Ordering::Relaxed) != pool.len() {
            svc.size.store(pool.len(), Ordering::Relaxed);
        }
        let s = &*self.settings;
        let limits = overrides::breaker(&s.limits, service.limits.as_deref());
        let admitted = svc.load.admit(&limits, || {
            (service.protocol == UpstreamProtocol::Http1)
                .then(|| pool.iter().map(|a| s.endpoints.connections(*a)).sum())
        });
        if let Err(limit) = admitted {
            s.metrics
                .overloaded
                .with_label_values(&[&service.service.to_string(), limit.as_str()])
                .inc();
            return Err(ProxyError::Overloaded {
                service: service.service.clone(),
                limit,
            });
        }
        // From here the slots are held by `Picked` (or given back below).
        let now = (s.endpoints.ejected.load(Ordering::Relaxed) > 0).then(|| self.now_sweeping());
        let ejected = |a: SocketAddr| match now {
            None => false,
            Some(now) => s.endpoints.get(a).is_some_and(|e| {
                if e.health.take_return(now) {
                    s.returned(a, &service.service);
                }
                e.health.is_ejected(now)
            }),
        };
        let fresh = |a: SocketAddr| !request.exclude.contains(&a) && !ejected(a);
        let healthy = |a: SocketAddr| !ejected(a);
        let tiers: [&dyn Fn(SocketAddr) -> bool; 3] = [&fresh, &healthy, &|_| true];
        let terminating = service.endpoints.is_empty();
        let pinned = request.pinned.filter(|p| pool.contains(p) && fresh(*p));
        let chosen = match pinned {
            Some(addr) => Some((addr, (PickedBy::Session, Tier::Fresh))),
            None => tiers.iter().zip(Tier::ALL).find_map(|(ok, tier)| {
                self.choose(service, &svc, pool, request.hash, *ok)
                    .map(|(addr, by)| (addr, (by, tier)))
            }),
        };
        match chosen {
            Some((addr, (by, tier))) => Ok(Picked::start(
                addr,
                self.endpoint(addr),
                svc,
                service.limits.clone(),
                Why {
                    by,
                    tier,
                    terminating,
                },
            )),
            None => {
                svc.load.head_done();
                svc.load.done();
                Err(ProxyError::NoEndpoints {
                    service: service.service.clone(),
                })
            }
        }
    }

    /// An endpoint outside the balancer's counts (a mirrored copy, an L4 stream or datagram
    /// session): at random among the ready ones (the terminating ones while none is ready),
    /// never an ejected one or one of `exclude` while another is left.
    pub fn spare_endpoint(
        &self,
        service: &ServiceBackend,
        exclude: &[SocketAddr],
    ) -> Result<SocketAddr, ProxyError> {
        let s = &*self.settings;
        let now = (s.endpoints.ejected.load(Ordering::Relaxed) > 0).then(|| s.now());
        let healthy = |a: &SocketAddr| {
            now.is_none_or(|now| {
                s.endpoints
                    .get(*a)
                    .is_none_or(|e| !e.health.is_ejected(now))
            })
        };
        let pool = if service.endpoints.is_empty() {
            &service.terminating
        } else {
            &service.endpoints
        };
        let n = pool.len();
        if n == 0 {
            return Err(ProxyError::NoEndpoints {
                service: service.service.clone(),
            });
        }
        let start = fastrand::usize(..n);
        let rotated = || (0..n).map(|k| pool[(start + k) % n]);
        Ok(rotated()
            .find(|a| healthy(a) && !exclude.contains(a))
            .or_else(|| rotated().find(|a| healthy(a)))
            .unwrap_or(pool[start]))
    }

    fn choose(
        &self,
        service: &ServiceBackend,
        svc: &ServiceState,
        pool: &[SocketAddr],
        hash: Option<u64>,
        ok: &dyn Fn(SocketAddr) -> bool,
    ) -> Option<(SocketAddr, PickedBy)> {
        match (&service.balance, hash) {
            (Balance::ConsistentHash { .. }, Some(key)) => {
                pick::hashed(&svc.ring(pool), key, ok).map(|a| (a, PickedBy::Hash))
            }
            (Balance::RoundRobin, _) => {
                pick::round_robin(pool, &svc.next, ok).map(|a| (a, PickedBy::RoundRobin))
            }
            _ => pick::least_request(pool, ok, |a| self.settings.endpoints.load(a))
                .map(|a| (a, PickedBy::LeastRequest)),
        }
    }

    /// The clock, sweeping ended ejections of endpoints no pick looks at any more (they left
    /// every table) every [`SWEEP_EVERY`].
    fn now_sweeping(&self) -> u64 {
        let s = &*self.settings;
        let now = s.now();
        let due = self.next_sweep.load(Ordering::Relaxed);
        let next = now.saturating_add(nanos(SWEEP_EVERY));
        if now >= due
            && self
                .next_sweep
                .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            s.endpoints
                .sweep(|addr, e| self.keep_endpoint(now, addr, e));
        }
        now
    }

    /// Whether unused endpoint state is worth keeping at `now`; reports ended ejections.
    fn keep_endpoint(&self, now: u64, addr: &SocketAddr, e: &EndpointState) -> bool {
        let s = &*self.settings;
        if e.health.take_return(now) {
            s.returned(*addr, &"(left the table)");
        }
        e.health.remembered(now, s.outlier.max_ejection)
    }

    fn endpoint(&self, addr: SocketAddr) -> Arc<EndpointState> {
        let s = &*self.settings;
        s.endpoints
            .state(addr, |a, e| self.keep_endpoint(s.now(), a, e))
    }

    /// The state of Service port `key`, created on first use (which may sweep unused ones).
    fn service(&self, key: &ServiceKey) -> Arc<ServiceState> {
        if let Some(s) = self.services.read().ok().and_then(|m| m.get(key).cloned()) {
            return s;
        }
        let fresh = || {
            Arc::new(ServiceState {
                key: key.clone(),
                settings: self.settings.clone(),
                load: Default::default(),
                next: AtomicUsize::new(fastrand::usize(..)),
                retries: AtomicUsize::new(0),
                size: AtomicUsize::new(0),
                ejections: Ejections::default(),
                ring: RwLock::default(),
            })
        };
        let Ok(mut map) = self.services.write() else {
            return fresh();
        };
        if map.len() >= self.services_sweep_at.load(Ordering::Relaxed) {
            let now = self.settings.now();
            map.retain(|_, s| Arc::strong_count(s) > 1 || s.ejections.any(now));
            self.services_sweep_at
                .store((map.len() * 2).max(64), Ordering::Relaxed);
        }
        map.entry(key.clone()).or_insert_with(fresh).clone()
    }

    /// Endpoints that outlier detection keeps out of balancing now, sorted.
    pub fn ejected(&self) -> Vec<SocketAddr> {
        let s = &*self.settings;
        let now = s.now();
        let mut out = s.endpoints.matching(|e| e.health.is_ejected(now));
        out.sort_unstable();
        out
    }

    /// Entries in the endpoint and Service maps (tests check that they are swept).
    #[cfg(test)]
    pub fn sizes(&self) -> (usize, usize) {
        let services = self.services.read().map_or(0, |m| m.len());
        (self.settings.endpoints.len(), services)
    }
}

/// One retry in flight, counted against its Service's budget until dropped.
#[derive(Debug)]
pub struct RetryPermit {
    service: Arc<ServiceState>,
}

impl Drop for RetryPermit {
    fn drop(&mut self) {
        self.service.retries.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An endpoint picked for one attempt: counts as in flight on the endpoint and the Service
/// until dropped (the response body holds it until sent), and as pending until reported.
#[derive(Debug)]
pub struct Picked {
    pub addr: SocketAddr,
    state: Arc<EndpointState>,
    service: Arc<ServiceState>,
    pending: AtomicBool,
    /// The Service's own limits (outlier detection), when a TrafficPolicy sets them.
    limits: Option<Arc<ServiceLimits>>,
    /// Why the balancer picked it.
    pub why: Why,
}

impl Picked {
    fn start(
        addr: SocketAddr,
        state: Arc<EndpointState>,
        service: Arc<ServiceState>,
        limits: Option<Arc<ServiceLimits>>,
        why: Why,
    ) -> Self {
        state.in_flight.fetch_add(1, Ordering::Relaxed);
        Self {
            addr,
            state,
            service,
            pending: AtomicBool::new(true),
            limits,
            why,
        }
    }

    /// Records how the attempt ended (its response head arrived, or it failed): feeds the
    /// endpoint's outlier detection and ends the pending state.
    pub fn report(&self, outcome: Outcome) {
        if self.pending.swap(false, Ordering::Relaxed) {
            self.service.load.head_done();
        }
        match outcome {
            Outcome::Success => self.state.health.success(),
            Outcome::Failure => {
                self.service
                    .failure(self.addr, &self.state, self.limits.as_deref())
            }
        }
    }
}

impl Drop for Picked {
    fn drop(&mut self) {
        self.state.in_flight.fetch_sub(1, Ordering::Relaxed);
        if self.pending.load(Ordering::Relaxed) {
            self.service.load.head_done();
        }
        self.service.load.done();
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
