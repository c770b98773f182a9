//! Re-pointing a compiled route at new endpoint sets: when the only thing that changed for a
//! route is which endpoints some of its Service ports have (an EndpointSlice changed), its
//! rules are copied with the new `ServiceBackend`s instead of compiled again: no matcher,
//! filter, regular expression or reference is looked at. Pure.

use foldhash::HashMap;
use std::sync::Arc;

use crate::table::{
    AuthBackend, BackendSet, BackendTarget, RouteRule, RuleFilters, ServiceBackend, ServiceKey,
    WeightedBackend,
};
use crate::translate::backends::resolve::Resolved;
use crate::translate::routes::rules::CompiledRoute;

/// True when `before` and `now` are the same Service port with the same upstream protocol,
/// differing at most in endpoints: a route using it needs a relink, not a compilation.
pub fn endpoints_only(before: &Resolved, now: &Resolved) -> bool {
    match (before, now) {
        (Ok(a), Ok(b)) => a.service == b.service && a.protocol == b.protocol,
        _ => false,
    }
}

/// `compiled` with every Service port replaced by the one of `current` with the same key
/// (the outcomes of this translation); everything else is the same, shared where it holds no
/// Service port.
pub fn relink(compiled: &CompiledRoute, current: &[Resolved]) -> CompiledRoute {
    let swap: HashMap<&ServiceKey, &Arc<ServiceBackend>> = current
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|b| (&b.service, b))
        .collect();
    let backend = |b: &Arc<ServiceBackend>| {
        swap.get(&b.service)
            .map_or_else(|| b.clone(), |n| Arc::clone(n))
    };
    // Matches of one rule share its filters and backends; keep them shared.
    let mut per_rule: HashMap<u32, (Arc<RuleFilters>, Arc<BackendSet>)> = HashMap::default();
    let rules = compiled
        .rules
        .iter()
        .map(|r| {
            let (filters, backends) = per_rule
                .entry(r.rule_index)
                .or_insert_with(|| {
                    let filters = filters_with(&r.filters, &backend).shared();
                    let set = r
                        .backends
                        .backends
                        .iter()
                        .map(|w| WeightedBackend {
                            weight: w.weight,
                            target: match &w.target {
                                BackendTarget::Service(b) => BackendTarget::Service(backend(b)),
                                BackendTarget::Invalid { reason } => BackendTarget::Invalid {
                                    reason: reason.clone(),
                                },
                            },
                            filters: filters_with(&w.filters, &backend).shared(),
                        })
                        .collect();
                    (filters, Arc::new(BackendSet::new(set)))
                })
                .clone();
            Arc::new(RouteRule {
                route: r.route.clone(),
                created: r.created,
                rule_index: r.rule_index,
                match_index: r.match_index,
                rule_name: r.rule_name.clone(),
                matcher: r.matcher.clone(),
                filters,
                backends,
            })
        })
        .collect();
    CompiledRoute {
        kind: compiled.kind,
        rules,
        total: compiled.total,
        problems: compiled.problems.clone(),
        rule_hosts: compiled.rule_hosts.clone(),
    }
}

/// A copy of `filters` whose mirrors and authorizers go to the current Service ports.
fn filters_with(
    filters: &RuleFilters,
    backend: &impl Fn(&Arc<ServiceBackend>) -> Arc<ServiceBackend>,
) -> RuleFilters {
    let mut out = filters.clone();
    for m in &mut out.mirrors {
        m.backend = backend(&m.backend);
    }
    for auth in out
        .external_auth
        .iter_mut()
        .flat_map(|list| list.iter_mut())
    {
        if let AuthBackend::Service(b) = &auth.backend {
            let mut relinked = (**auth).clone();
            relinked.backend = AuthBackend::Service(backend(b));
            *auth = Arc::new(relinked);
        }
    }
    out
}
