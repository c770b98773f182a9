//! Policies into the table's routes and virtual hosts. Gateway and listener targets give the
//! virtual hosts of that listener their `RequestPolicy`; HTTPRoute and rule targets give each
//! rule its own (merged by the proxy over the host's). Timeouts and retries have no place on a
//! host, so they go on the rules: the rule's own `timeouts`/`retry` first, then rule, route,
//! listener and Gateway policies. A rule reached through listeners whose policies differ is
//! copied once per difference; the copies serve the attachments they belong to. Routes no
//! policy touches are handed on as they are (the same `Arc`s). Pure.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::Arc;

use crate::kinds::httproute::HttpRoute;

use super::{Compiled, Policies, Setting, Target, TargetKind, REQUEST_SETTINGS};
use crate::kinds::routes::RouteKindId;
use crate::snapshot::{namespace_of, Snapshot};
use crate::table::{RequestPolicy, RetryPolicy, RouteRule, RuleFilters, Timeouts};
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::routes::attach::{Attached, Attachment};
use crate::translate::routes::rules::CompiledRoute;

/// The table's inputs with policies applied.
#[derive(Debug, Default)]
pub struct Applied {
    /// The routes the table is built from: each as compiled, or its copies carrying policy
    /// settings, each copy with the attachments it serves.
    pub routes: Vec<(Arc<Attached>, Arc<CompiledRoute>)>,
    /// The `RequestPolicy` of the virtual hosts of each Gateway listener, by (Gateway,
    /// listener) index.
    pub hosts: HashMap<(usize, usize), Arc<RequestPolicy>>,
}

/// The copies of routes made by the previous translation, by the address of the compiled
/// route each was made from: a route whose compiled rules and policy outcome are unchanged
/// keeps its copy, so its virtual hosts are reused rather than sorted and indexed again.
#[derive(Debug, Default)]
pub struct RouteMemo {
    entries: HashMap<usize, Vec<Memo>>,
}

#[derive(Debug)]
struct Memo {
    /// Held so that its address is not reused while the entry lives.
    from: Arc<CompiledRoute>,
    effects: BTreeMap<u32, Effect>,
    made: Arc<CompiledRoute>,
}

/// The previous translation's copies and this one's.
struct Memos<'m> {
    previous: RouteMemo,
    next: &'m mut RouteMemo,
}

impl Memos<'_> {
    /// `compiled` serving with `effects`: the previous copy when there is one.
    fn copy(
        &mut self,
        compiled: &Arc<CompiledRoute>,
        effects: BTreeMap<u32, Effect>,
    ) -> Arc<CompiledRoute> {
        let key = Arc::as_ptr(compiled) as usize;
        let found = self.previous.entries.get_mut(&key).and_then(|list| {
            let at = list
                .iter()
                .position(|m| Arc::ptr_eq(&m.from, compiled) && m.effects == effects)?;
            Some(list.swap_remove(at))
        });
        let memo = found.unwrap_or_else(|| Memo {
            from: compiled.clone(),
            made: Arc::new(with_effects(compiled, &effects)),
            effects,
        });
        let made = memo.made.clone();
        self.next.entries.entry(key).or_default().push(memo);
        made
    }
}

/// What one rule serves with: its timeouts, retry and request policy.
#[derive(Debug, Clone, PartialEq)]
struct Effect {
    timeouts: Timeouts,
    retry: Option<RetryPolicy>,
    policy: Option<Arc<RequestPolicy>>,
}

impl Effect {
    fn of(filters: &RuleFilters) -> Self {
        Self {
            timeouts: filters.timeouts,
            retry: filters.retry.as_deref().cloned(),
            policy: filters.policy.clone(),
        }
    }
}

/// The policy targets of a Gateway listener, most specific first: the listener (a Gateway's
/// own listener only; ListenerSet listeners are not sections of the Gateway), then the Gateway.
fn listener_keys(g: &GatewayModel<'_>, listener: usize) -> Vec<Target> {
    let gateway = Target {
        kind: TargetKind::Gateway,
        namespace: g.namespace.to_owned(),
        name: g.name.to_owned(),
        section: None,
    };
    let mut keys = Vec::with_capacity(2);
    if let Some(l) = g.listeners.get(listener).filter(|l| l.origin.is_none()) {
        keys.push(Target {
            section: Some(l.spec.name.clone()),
            ..gateway.clone()
        });
    }
    keys.push(gateway);
    keys
}

/// Applies `policies` to the compiled `routes` (named by `names`, `(kind, namespace, name)`
/// in the same order) and to the listeners of `gateways`.
pub fn apply_policies(
    policies: &Policies<'_>,
    snapshot: &Snapshot,
    gateways: &[GatewayModel<'_>],
    names: &[(RouteKindId, &str, &str)],
    routes: &[(Arc<Attached>, Arc<CompiledRoute>)],
    memo: &mut RouteMemo,
) -> Applied {
    let mut memos = Memos {
        previous: std::mem::take(memo),
        next: memo,
    };
    let mut wanted = vec![Setting::Timeouts, Setting::Retry];
    wanted.extend_from_slice(REQUEST_SETTINGS);
    // What the Gateway and listener policies decide, per listener.
    let mut listeners: HashMap<(usize, usize), Compiled> = HashMap::default();
    let mut hosts = HashMap::default();
    for (gi, g) in gateways.iter().enumerate() {
        for li in 0..g.listeners.len() {
            let keys = listener_keys(g, li);
            if !keys.iter().any(|k| policies.targets(k)) {
                continue;
            }
            let merged = policies.merged(&keys, &wanted);
            if !merged.request.is_empty() {
                hosts.insert((gi, li), Arc::new(merged.request.clone()));
            }
            listeners.insert((gi, li), merged);
        }
    }
    let targeted: std::collections::HashSet<(&str, &str)> = policies
        .by_target
        .keys()
        .filter(|t| t.kind == TargetKind::HttpRoute)
        .map(|t| (t.namespace.as_str(), t.name.as_str()))
        .collect();
    let timed =
        |c: &Compiled| c.sets.contains(&Setting::Timeouts) || c.sets.contains(&Setting::Retry);
    // Made at the first route a policy touches.
    let mut specs: Option<HashMap<(&str, &str), &HttpRoute>> = None;
    let mut out = Vec::with_capacity(routes.len());
    for (i, (attached, compiled)) in routes.iter().enumerate() {
        let &(kind, ns, name) = &names[i];
        let touched = kind == RouteKindId::HttpRoute
            && (targeted.contains(&(ns, name))
                || attached
                    .attachments
                    .iter()
                    .any(|a| listeners.get(&(a.gateway, a.listener)).is_some_and(timed)));
        if !touched {
            out.push((attached.clone(), compiled.clone()));
            continue;
        }
        let specs = specs.get_or_insert_with(|| {
            snapshot
                .http_routes
                .iter()
                .map(|r| {
                    let name = r.metadata.name.as_deref().unwrap_or("");
                    ((namespace_of(&r.metadata), name), r.as_ref())
                })
                .collect()
        });
        match specs.get(&(ns, name)) {
            Some(spec) => {
                let route = RouteInputs {
                    policies,
                    spec,
                    ns,
                    name,
                    wanted: &wanted,
                };
                decorate(&route, attached, compiled, &listeners, &mut memos, &mut out);
            }
            None => out.push((attached.clone(), compiled.clone())),
        }
    }
    Applied { routes: out, hosts }
}

struct RouteInputs<'a, 'p> {
    policies: &'a Policies<'p>,
    spec: &'a HttpRoute,
    ns: &'a str,
    name: &'a str,
    wanted: &'a [Setting],
}

/// Pushes `compiled` onto `out` once per distinct outcome of the policies over its
/// attachments.
fn decorate(
    route: &RouteInputs<'_, '_>,
    attached: &Arc<Attached>,
    compiled: &Arc<CompiledRoute>,
    listeners: &HashMap<(usize, usize), Compiled>,
    memos: &mut Memos<'_>,
    out: &mut Vec<(Arc<Attached>, Arc<CompiledRoute>)>,
) {
    if attached.attachments.is_empty() {
        out.push((attached.clone(), compiled.clone()));
        return;
    }
    let whole = Target {
        kind: TargetKind::HttpRoute,
        namespace: route.ns.to_owned(),
        name: route.name.to_owned(),
        section: None,
    };
    let own = rule_policies(route, compiled, &whole);
    let policy: BTreeMap<u32, Option<Arc<RequestPolicy>>> = own
        .iter()
        .map(|(&i, rule)| {
            let request = &rule.merged.request;
            (i, (!request.is_empty()).then(|| Arc::new(request.clone())))
        })
        .collect();
    let none = Compiled::default();
    let mut groups: Vec<(BTreeMap<u32, Effect>, Vec<Attachment>)> = Vec::new();
    for a in &attached.attachments {
        let outer = listeners.get(&(a.gateway, a.listener)).unwrap_or(&none);
        let effects = effects_at(&own, &policy, outer);
        match groups.iter_mut().find(|(e, _)| *e == effects) {
            Some((_, list)) => list.push(a.clone()),
            None => groups.push((effects, vec![a.clone()])),
        }
    }
    let single = groups.len() == 1;
    for (effects, attachments) in groups {
        let unchanged = own
            .iter()
            .all(|(i, rule)| effects[i] == Effect::of(rule.filters));
        let c = if unchanged {
            compiled.clone()
        } else {
            memos.copy(compiled, effects)
        };
        let a = if single {
            attached.clone()
        } else {
            Arc::new(Attached {
                status: None,
                attachments,
                counted: Vec::new(),
            })
        };
        out.push((a, c));
    }
}

/// What the policies of one rule (and its route) decide, and what the rule sets itself.
struct RulePolicies<'a> {
    merged: Compiled,
    filters: &'a RuleFilters,
    /// The rule sets `timeouts` itself: policies' timeouts do not apply.
    timeouts_set: bool,
    /// The rule sets `retry` itself: policies' retries do not apply.
    retry_set: bool,
}

/// The rule and route policies of `compiled`, per rule index.
fn rule_policies<'c>(
    route: &RouteInputs<'_, '_>,
    compiled: &'c CompiledRoute,
    whole: &Target,
) -> BTreeMap<u32, RulePolicies<'c>> {
    let mut own = BTreeMap::new();
    for r in &compiled.rules {
        own.entry(r.rule_index).or_insert_with(|| {
            let rule_key = r.rule_name.as_ref().map(|n| Target {
                section: Some(n.to_string()),
                ..whole.clone()
            });
            let merged = route
                .policies
                .merged(rule_key.iter().chain([whole]), route.wanted);
            let spec = route
                .spec
                .spec
                .rules
                .as_ref()
                .and_then(|rules| rules.get(r.rule_index as usize));
            RulePolicies {
                merged,
                filters: &r.filters,
                timeouts_set: spec.is_some_and(|s| s.timeouts.is_some()),
                retry_set: spec.is_some_and(|s| s.retry.is_some()),
            }
        });
    }
    own
}

/// The effect of every rule on one attachment: the rule's own policies first, then those of
/// the listener (`outer`) it is attached through, for what the rule does not set itself.
fn effects_at(
    own: &BTreeMap<u32, RulePolicies<'_>>,
    policy: &BTreeMap<u32, Option<Arc<RequestPolicy>>>,
    outer: &Compiled,
) -> BTreeMap<u32, Effect> {
    own.iter()
        .map(|(&i, rule)| {
            let m = &rule.merged;
            let pick = |s: Setting| {
                if m.sets.contains(&s) {
                    Some(m)
                } else if outer.sets.contains(&s) {
                    Some(outer)
                } else {
                    None
                }
            };
            let mut e = Effect::of(rule.filters);
            if !rule.timeouts_set {
                if let Some(c) = pick(Setting::Timeouts) {
                    e.timeouts = c.timeouts;
                }
            }
            if !rule.retry_set {
                if let Some(c) = pick(Setting::Retry) {
                    e.retry = c.retry.clone();
                }
            }
            if let Some(p) = &policy[&i] {
                e.policy = Some(p.clone());
            }
            (i, e)
        })
        .collect()
}

/// A copy of `compiled` whose rules serve with `effects` (matches of one rule keep sharing
/// their filters; rules without a change keep their `Arc`).
fn with_effects(compiled: &CompiledRoute, effects: &BTreeMap<u32, Effect>) -> CompiledRoute {
    let mut filters: HashMap<u32, Arc<RuleFilters>> = HashMap::default();
    let rules = compiled
        .rules
        .iter()
        .map(|r| {
            let Some(e) = effects
                .get(&r.rule_index)
                .filter(|e| **e != Effect::of(&r.filters))
            else {
                return r.clone();
            };
            let f = filters
                .entry(r.rule_index)
                .or_insert_with(|| {
                    let mut f = (*r.filters).clone();
                    f.timeouts = e.timeouts;
                    f.retry = e.retry.clone().map(Box::new);
                    f.policy = e.policy.clone();
                    Arc::new(f)
                })
                .clone();
            Arc::new(RouteRule {
                route: r.route.clone(),
                created: r.created,
                rule_index: r.rule_index,
                match_index: r.match_index,
                rule_name: r.rule_name.clone(),
                matcher: r.matcher.clone(),
                filters: f,
                backends: r.backends.clone(),
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
