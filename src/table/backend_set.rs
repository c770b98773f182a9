//! Where a rule's requests go: its weighted backendRefs, each a resolved Service port with its
//! endpoints and how to reach them, or the reason it could not be resolved. Part of the route
//! table; built by the translator, read by the proxy's balancer.

use std::net::SocketAddr;
use std::sync::Arc;

use serde::Serialize;

use super::policy::ServiceLimits;
use super::resilience::Balance;
use super::RuleFilters;

/// The weighted backends of a rule. An empty set, or one whose weights are all zero, answers 500.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendSet {
    pub backends: Vec<WeightedBackend>,
    total_weight: u64,
}

impl BackendSet {
    /// Builds a set; backends of weight 0 stay listed (for `/debug/config`) but never receive traffic.
    pub fn new(mut backends: Vec<WeightedBackend>) -> Self {
        // Built by pushing; a table keeps one set per rule for as long as the rule stands.
        backends.shrink_to_fit();
        let total_weight = backends.iter().map(|b| u64::from(b.weight)).sum();
        Self {
            backends,
            total_weight,
        }
    }

    /// Sum of all weights.
    pub fn total_weight(&self) -> u64 {
        self.total_weight
    }

    /// Picks a backend in proportion to its weight, given a uniform random number.
    pub fn pick(&self, random: u64) -> Option<&WeightedBackend> {
        if self.total_weight == 0 {
            return None;
        }
        let mut point = random % self.total_weight;
        for b in &self.backends {
            let w = u64::from(b.weight);
            if point < w {
                return Some(b);
            }
            point -= w;
        }
        None
    }
}

/// One `backendRefs` entry: its weight, where it goes, and its own filters.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WeightedBackend {
    pub weight: u32,
    pub target: BackendTarget,
    /// Shared, like a rule's: most backendRefs have none ([`RuleFilters::none`]).
    pub filters: Arc<RuleFilters>,
}

/// Where a backendRef sends traffic.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum BackendTarget {
    /// A resolved Service port with its ready endpoints (possibly none: 503).
    Service(Arc<ServiceBackend>),
    /// A reference that could not be resolved (missing, not permitted, wrong kind): 500.
    Invalid { reason: String },
}

/// Identifies a Service port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceKey {
    pub namespace: String,
    pub name: String,
    pub port: u16,
}

impl std::fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}:{}", self.namespace, self.name, self.port)
    }
}

/// A Service port resolved to its endpoints.
#[derive(Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceBackend {
    pub service: ServiceKey,
    /// Ready endpoints: the ones that take requests.
    pub endpoints: Vec<SocketAddr>,
    /// Endpoints still serving but terminating: used only while no endpoint is ready (as
    /// kube-proxy does), so a Service whose every pod is rolling keeps answering.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub terminating: Vec<SocketAddr>,
    pub protocol: UpstreamProtocol,
    /// How a request picks an endpoint.
    #[serde(skip_serializing_if = "Balance::is_default")]
    pub balance: Balance,
    /// Circuit-breaker, outlier and retry-budget settings of TrafficPolicies targeting the
    /// Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<Arc<ServiceLimits>>,
}

/// How the proxy talks to a backend (from the Service port's `appProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamProtocol {
    /// HTTP/1.1 (upgrades such as WebSocket included).
    #[default]
    Http1,
    /// HTTP/2 over cleartext with prior knowledge (`kubernetes.io/h2c`).
    H2c,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(weight: u32) -> WeightedBackend {
        WeightedBackend {
            weight,
            target: BackendTarget::Invalid {
                reason: format!("w{weight}"),
            },
            filters: RuleFilters::none(),
        }
    }

    #[test]
    fn pick_follows_weights_and_skips_zero() {
        let set = BackendSet::new(vec![backend(0), backend(1), backend(3)]);
        assert_eq!(set.total_weight(), 4);
        let picks: Vec<u32> = (0..8)
            .map(|r| set.pick(r).map(|b| b.weight).unwrap_or(99))
            .collect();
        assert_eq!(picks, vec![1, 3, 3, 3, 1, 3, 3, 3]);
    }

    #[test]
    fn all_zero_weights_pick_nothing() {
        let set = BackendSet::new(vec![backend(0), backend(0)]);
        assert!(set.pick(7).is_none());
        assert!(BackendSet::default().pick(0).is_none());
    }
}
