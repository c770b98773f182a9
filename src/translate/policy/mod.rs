//! TrafficPolicy attachment (Gateway API policy attachment by `targetRefs`, all in the
//! policy's namespace) and precedence. Each policy is compiled once (`compile`); then, one
//! setting at a time, the most specific target wins (HTTPRoute rule > HTTPRoute > Gateway
//! listener > Gateway; Service port > Service) and among policies on the same target the
//! oldest (creationTimestamp, then namespace/name). What wins goes into the table: Gateway and
//! listener targets on the virtual hosts of that listener, route and rule targets on the
//! rules (`apply`), Service targets on the resolved Service ports (`ServiceOverlays`, read by
//! backend resolution). `status` gives each policy its conditions per ancestor. Pure.

mod apply;
mod auth;
mod compile;
mod ext_auth;
mod ingress;
#[cfg(test)]
mod schema_tests;
mod status;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use foldhash::HashMap;
use std::sync::Arc;

use crate::kinds::crd::TrafficPolicy;
use crate::kinds::routes::RouteKindId;
use crate::snapshot::{namespace_of, Snapshot};
use crate::status::conditions::Stamp;
use crate::status::{ObjectKind, ObjectStatus, StatusBody, StatusReport};
use crate::table::ServiceKey;
use crate::translate::backends::{ServiceOverlay, ServiceOverlays};
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::routes::attach::Attached;
use crate::translate::routes::kinds_conflict::Counted;
use crate::translate::routes::rules::CompiledRoute;
use crate::translate::TranslateOptions;

pub use apply::{apply_policies, Applied, RouteMemo};
pub use auth::referenced_policy_objects;
pub use auth::{parse_htpasswd, parse_jwks};
pub use compile::{compile_policy, Compiled, CompiledPolicy, Target, TargetKind};
pub use ingress::{ingress_policy_problems, route_policy};
pub use status::{policy_statuses, StatusInputs};

/// A setting of a TrafficPolicy: the unit of precedence. A policy that loses every setting it
/// sets on a target to older policies on the same target is `Conflicted` there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Setting {
    Timeouts,
    Retry,
    RateLimit,
    ConcurrencyLimit,
    BasicAuth,
    Jwt,
    IpAccess,
    BodyLimits,
    ExternalAuth,
    ErrorPages,
    LoadBalancer,
    CircuitBreaker,
    OutlierDetection,
    RetryBudget,
}

impl Setting {
    /// The spec field that sets it.
    pub fn field(self) -> &'static str {
        match self {
            Self::Timeouts => "timeouts",
            Self::Retry => "retry",
            Self::RateLimit => "rateLimit",
            Self::ConcurrencyLimit => "concurrencyLimit",
            Self::BasicAuth => "basicAuth",
            Self::Jwt => "jwt",
            Self::IpAccess => "ipAccess",
            Self::BodyLimits => "bodyLimits",
            Self::ExternalAuth => "externalAuth",
            Self::ErrorPages => "errorPages",
            Self::LoadBalancer => "loadBalancer",
            Self::CircuitBreaker => "circuitBreaker",
            Self::OutlierDetection => "outlierDetection",
            Self::RetryBudget => "retry.budget",
        }
    }
}

/// The settings that go on a Service port.
pub const SERVICE_SETTINGS: &[Setting] = &[
    Setting::LoadBalancer,
    Setting::CircuitBreaker,
    Setting::OutlierDetection,
    Setting::RetryBudget,
];

/// The per-request settings a virtual host or a rule carries in its `RequestPolicy`.
pub const REQUEST_SETTINGS: &[Setting] = &[
    Setting::RateLimit,
    Setting::ConcurrencyLimit,
    Setting::BasicAuth,
    Setting::Jwt,
    Setting::IpAccess,
    Setting::BodyLimits,
    Setting::ExternalAuth,
    Setting::ErrorPages,
];

/// Copies `setting` from `from` into `into` and records it as set.
fn copy(setting: Setting, from: &Compiled, into: &mut Compiled) {
    match setting {
        Setting::Timeouts => into.timeouts = from.timeouts,
        Setting::Retry => into.retry = from.retry.clone(),
        Setting::RateLimit => into.request.rate_limit = from.request.rate_limit.clone(),
        Setting::ConcurrencyLimit => {
            into.request.concurrency_limit = from.request.concurrency_limit.clone();
        }
        Setting::BasicAuth => into.request.basic_auth = from.request.basic_auth.clone(),
        Setting::Jwt => into.request.jwt = from.request.jwt.clone(),
        Setting::IpAccess => into.request.ip_access = from.request.ip_access.clone(),
        Setting::BodyLimits => {
            into.request.max_request_body = from.request.max_request_body;
            into.request.max_response_body = from.request.max_response_body;
        }
        Setting::ExternalAuth => into.request.external_auth = from.request.external_auth.clone(),
        Setting::ErrorPages => into.request.error_pages = from.request.error_pages.clone(),
        Setting::LoadBalancer => into.balance = from.balance.clone(),
        Setting::CircuitBreaker => {
            into.limits.max_connections = from.limits.max_connections;
            into.limits.max_pending_requests = from.limits.max_pending_requests;
            into.limits.max_requests = from.limits.max_requests;
        }
        Setting::OutlierDetection => {
            into.limits.outlier_consecutive_errors = from.limits.outlier_consecutive_errors;
            into.limits.outlier_base_ejection = from.limits.outlier_base_ejection;
            into.limits.outlier_max_ejection_percent = from.limits.outlier_max_ejection_percent;
        }
        Setting::RetryBudget => {
            into.limits.retry_budget_percent = from.limits.retry_budget_percent;
            into.limits.retry_budget_min = from.limits.retry_budget_min;
        }
    }
    into.sets.push(setting);
}

/// Every TrafficPolicy of a snapshot, compiled, indexed by target.
#[derive(Debug, Default)]
pub struct Policies<'a> {
    pub(super) policies: Vec<(&'a TrafficPolicy, CompiledPolicy)>,
    /// Policy indexes by target, oldest policy first.
    pub(super) by_target: BTreeMap<Target, Vec<usize>>,
}

/// Older first, then `namespace/name` ([`crate::translate::common::precedence`]): the order among policies on
/// the same target.
fn age(p: &TrafficPolicy) -> crate::translate::common::precedence::Precedence<'_> {
    crate::translate::common::precedence::of(&p.metadata)
}

impl<'a> Policies<'a> {
    /// Compiles every policy of `snapshot`.
    pub fn new(snapshot: &'a Snapshot) -> Self {
        let mut policies: Vec<(&TrafficPolicy, CompiledPolicy)> = snapshot
            .traffic_policies
            .iter()
            .map(|p| (p.as_ref(), compile_policy(snapshot, p)))
            .collect();
        policies.sort_by(|a, b| age(a.0).cmp(&age(b.0)));
        let mut by_target: BTreeMap<Target, Vec<usize>> = BTreeMap::new();
        for (i, (_, c)) in policies.iter().enumerate() {
            for t in &c.targets {
                let list = by_target.entry(t.clone()).or_default();
                if !list.contains(&i) {
                    list.push(i);
                }
            }
        }
        Self {
            policies,
            by_target,
        }
    }

    /// True when the snapshot has no policy.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// True when some policy targets `target`.
    pub fn targets(&self, target: &Target) -> bool {
        self.by_target.contains_key(target)
    }

    /// The settings of `wanted` as the policies on `keys` (most specific first) decide them:
    /// for each setting, the first key with a policy setting it, its oldest such policy.
    pub fn merged<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k Target>,
        wanted: &[Setting],
    ) -> Compiled {
        let mut out = Compiled::default();
        for key in keys {
            for &i in self.by_target.get(key).into_iter().flatten() {
                let c = &self.policies[i].1.compiled;
                for &s in &c.sets {
                    if wanted.contains(&s) && !out.sets.contains(&s) {
                        copy(s, c, &mut out);
                    }
                }
            }
        }
        out
    }

    /// For each (policy, target) whose every setting is taken by older policies on the same
    /// target: the names (`namespace/name`) of those winners.
    pub fn shadowed(&self) -> HashMap<(usize, &Target), BTreeSet<String>> {
        let mut out = HashMap::default();
        for (target, list) in &self.by_target {
            let mut taken: BTreeMap<Setting, usize> = BTreeMap::new();
            for &i in list {
                let sets = &self.policies[i].1.compiled.sets;
                let winners: BTreeSet<String> = sets
                    .iter()
                    .filter_map(|s| taken.get(s))
                    .map(|&w| name_of(self.policies[w].0))
                    .collect();
                if !sets.is_empty() && sets.iter().all(|s| taken.contains_key(s)) {
                    out.insert((i, target), winners);
                }
                for &s in sets {
                    taken.entry(s).or_insert(i);
                }
            }
        }
        out
    }

    /// What the policies targeting Services put on each of their ports.
    pub fn service_overlays(&self, snapshot: &Snapshot) -> ServiceOverlays {
        let mut out = ServiceOverlays::default();
        let targeted: BTreeSet<(&str, &str)> = self
            .by_target
            .keys()
            .filter(|t| t.kind == TargetKind::Service)
            .map(|t| (t.namespace.as_str(), t.name.as_str()))
            .collect();
        for svc in &snapshot.services {
            let ns = namespace_of(&svc.metadata);
            let Some(name) = svc.metadata.name.as_deref() else {
                continue;
            };
            if !targeted.contains(&(ns, name)) {
                continue;
            }
            let whole = Target {
                kind: TargetKind::Service,
                namespace: ns.to_owned(),
                name: name.to_owned(),
                section: None,
            };
            for port in svc.spec.iter().flat_map(|s| s.ports.iter().flatten()) {
                let section = port.name.as_ref().map(|n| Target {
                    section: Some(n.clone()),
                    ..whole.clone()
                });
                let merged = self.merged(section.iter().chain([&whole]), SERVICE_SETTINGS);
                if merged.sets.is_empty() {
                    continue;
                }
                let limits = merged.sets.iter().any(|s| *s != Setting::LoadBalancer);
                out.insert(
                    (ns.to_owned(), name.to_owned(), port.port),
                    ServiceOverlay {
                        balance: merged.balance,
                        limits: limits.then(|| Arc::new(merged.limits)),
                    },
                );
            }
        }
        out
    }
}

/// What the policy stage reads of the translation so far.
pub struct PolicyInputs<'a, 's> {
    pub snapshot: &'s Snapshot,
    /// Our Gateways, validated (policies target them and their listeners).
    pub gateways: &'a [GatewayModel<'s>],
    /// The HTTP-like routes naming our Gateways, with their attachments.
    pub counted: &'a [Counted<'s>],
    /// The same routes' compiled rules, which policies are applied onto.
    pub compiled: &'a [(Arc<Attached>, Arc<CompiledRoute>)],
    /// Each Service port the routes reach, with the Gateways (by index) reaching it.
    pub used: &'a BTreeMap<ServiceKey, BTreeSet<usize>>,
    pub options: &'a TranslateOptions,
}

/// TrafficPolicies: their status into `report`, and the routes and virtual-host policies the
/// table is built with (empty when there is no policy: the routes are used as compiled).
pub fn translate_policies(
    policies: &Policies<'_>,
    inputs: &PolicyInputs<'_, '_>,
    report: &mut StatusReport,
    memo: &mut RouteMemo,
) -> Applied {
    let &PolicyInputs {
        snapshot,
        gateways,
        counted,
        compiled,
        used,
        options,
    } = inputs;
    if policies.is_empty() {
        *memo = RouteMemo::default();
        return Applied::default();
    }
    let names: Vec<(RouteKindId, &str, &str)> = counted
        .iter()
        .map(|c| (c.kind, c.namespace, c.name))
        .collect();
    let mut routes: BTreeMap<(&str, &str), BTreeSet<usize>> = BTreeMap::new();
    for c in counted.iter().filter(|c| c.kind == RouteKindId::HttpRoute) {
        let gateways = c.attached.attachments.iter().map(|a| a.gateway);
        routes
            .entry((c.namespace, c.name))
            .or_default()
            .extend(gateways);
    }
    let inputs = StatusInputs {
        snapshot,
        gateways,
        routes: &routes,
        used,
        controller: &options.controller_name,
    };
    let stamp = |generation| Stamp {
        generation,
        now: options.now,
    };
    for (p, status) in policy_statuses(policies, &inputs, stamp) {
        report.entries.push(ObjectStatus::new(
            ObjectKind::TrafficPolicy,
            Some(namespace_of(&p.metadata)),
            p.metadata.name.as_deref().unwrap_or(""),
            p.metadata.generation,
            StatusBody::TrafficPolicy(Box::new(status)),
        ));
    }
    apply_policies(policies, snapshot, gateways, &names, compiled, memo)
}

/// `namespace/name` of a policy.
fn name_of(p: &TrafficPolicy) -> String {
    format!(
        "{}/{}",
        namespace_of(&p.metadata),
        p.metadata.name.as_deref().unwrap_or("")
    )
}
