//! The status of each TrafficPolicy: one `ancestors[]` entry per ancestor (Gateway API
//! `PolicyStatus`), each with an `Accepted` condition. Ancestors: the Gateway of a Gateway or
//! listener target (`sectionName` set for a listener), each of our Gateways an HTTPRoute
//! target is accepted by, and for a Service target each of our Gateways whose routes reach
//! the Service. A target that does not exist (or whose `sectionName` does not) is its own
//! ancestor, with reason `TargetNotFound`. Policies without an ancestor of ours get no status.
//! Of the settings on a Gateway or listener target only `ipAccess` applies to TLS, TCP and UDP
//! listeners: the message names the others that do not apply there, and a policy none of whose
//! settings applies to any listener it targets is not accepted (`Invalid`). Pure.

use std::collections::{BTreeMap, BTreeSet};

use gateway_api::apis::standard::backendtlspolicies::{
    BackendTlsPolicyStatusAncestors, BackendTlsPolicyStatusAncestorsAncestorRef,
};

use super::{Policies, Setting, Target, TargetKind};
use crate::kinds::crd::{TrafficPolicy, TrafficPolicyStatus};
use crate::snapshot::{namespace_of, Snapshot};
use crate::status::conditions::{ConditionType, Reason, Stamp};
use crate::status::GATEWAY_GROUP;
use crate::table::ServiceKey;
use crate::translate::gateways::gateway::GatewayModel;

/// What one target makes of the policy at one ancestor.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Applied,
    /// Every setting is taken by these older policies.
    Shadowed(BTreeSet<String>),
    NotFound(String),
}

/// `(group, kind, namespace, name, sectionName)` of an ancestor.
type AncestorKey = (String, String, String, String, Option<String>);

fn gateway_ancestor(ns: &str, name: &str, section: Option<&str>) -> AncestorKey {
    (
        GATEWAY_GROUP.to_owned(),
        "Gateway".to_owned(),
        ns.to_owned(),
        name.to_owned(),
        section.map(str::to_owned),
    )
}

fn target_ancestor(t: &Target) -> AncestorKey {
    let (group, kind) = t.kind.group_kind();
    (
        group.to_owned(),
        kind.to_owned(),
        t.namespace.clone(),
        t.name.clone(),
        t.section.clone(),
    )
}

/// The inputs status needs besides the policies.
pub struct StatusInputs<'a, 'g> {
    pub snapshot: &'a Snapshot,
    pub gateways: &'a [GatewayModel<'g>],
    /// Our Gateways (indexes) accepting each HTTPRoute, by `(namespace, name)`.
    pub routes: &'a BTreeMap<(&'a str, &'a str), BTreeSet<usize>>,
    /// Our Gateways (indexes) whose routes reach each Service port.
    pub used: &'a BTreeMap<ServiceKey, BTreeSet<usize>>,
    pub controller: &'a str,
}

/// Every policy with an ancestor, with its status.
pub fn policy_statuses<'p>(
    policies: &Policies<'p>,
    inputs: &StatusInputs<'_, '_>,
    stamp: impl Fn(Option<i64>) -> Stamp,
) -> Vec<(&'p TrafficPolicy, TrafficPolicyStatus)> {
    let shadowed = policies.shadowed();
    let mut out = Vec::new();
    for (i, (policy, compiled)) in policies.policies.iter().enumerate() {
        let mut ancestors: BTreeMap<AncestorKey, Vec<Outcome>> = BTreeMap::new();
        let mut l4: BTreeMap<AncestorKey, L4Reach> = BTreeMap::new();
        for t in &compiled.targets {
            if let Some((key, reach)) = l4_reach(t, inputs.gateways) {
                let entry = l4.entry(key).or_default();
                entry.l4.extend(reach.l4);
                entry.other |= reach.other;
            }
            let outcome = match shadowed.get(&(i, t)) {
                Some(winners) => Outcome::Shadowed(winners.clone()),
                None => Outcome::Applied,
            };
            for (key, o) in reach(t, inputs, outcome) {
                ancestors.entry(key).or_default().push(o);
            }
        }
        if ancestors.is_empty() {
            continue;
        }
        let s = stamp(policy.metadata.generation);
        // Settings that cannot apply to TLS, TCP and UDP listeners.
        let unapplied: Vec<&str> = compiled
            .compiled
            .sets
            .iter()
            .filter(|s| **s != Setting::IpAccess)
            .map(|s| s.field())
            .collect();
        let entries = ancestors
            .into_iter()
            .map(|(key, mut outcomes)| {
                outcomes.sort();
                let reach = l4.get(&key).filter(|r| !r.l4.is_empty());
                let note = reach
                    .filter(|_| !unapplied.is_empty())
                    .map(|r| l4_note(&r.l4, &unapplied));
                let nothing_applies = note.is_some()
                    && reach.is_some_and(|r| !r.other)
                    && !compiled.compiled.sets.contains(&Setting::IpAccess)
                    && compiled.error.is_none();
                let accepted = match (&outcomes[0], &compiled.error) {
                    (Outcome::NotFound(m), _) if outcomes.len() == 1 => {
                        s.fail(ConditionType::Accepted, Reason::TargetNotFound, m.clone())
                    }
                    (_, Some(e)) => {
                        let mut message = invalid_message(e, policy);
                        if let Some(n) = &note {
                            message = format!("{message}; {n}");
                        }
                        s.fail(ConditionType::Accepted, Reason::Invalid, message)
                    }
                    (Outcome::Applied, None) if nothing_applies => s.fail(
                        ConditionType::Accepted,
                        Reason::Invalid,
                        format!("nothing applies: {}", note.clone().unwrap_or_default()),
                    ),
                    (Outcome::Applied, None) => match &note {
                        Some(n) => s.ok(ConditionType::Accepted, Reason::Accepted, format!("accepted; {n}")),
                        None => s.ok(ConditionType::Accepted, Reason::Accepted, "accepted"),
                    },
                    (Outcome::Shadowed(w), None) => s.fail(
                        ConditionType::Accepted,
                        Reason::Conflicted,
                        format!(
                            "every setting of this policy here is set by older policy {}, which takes precedence",
                            w.iter().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    ),
                    (Outcome::NotFound(m), None) => {
                        s.fail(ConditionType::Accepted, Reason::TargetNotFound, m.clone())
                    }
                };
                let (group, kind, namespace, name, section_name) = key;
                BackendTlsPolicyStatusAncestors {
                    ancestor_ref: BackendTlsPolicyStatusAncestorsAncestorRef {
                        group: Some(group),
                        kind: Some(kind),
                        name,
                        namespace: Some(namespace),
                        port: None,
                        section_name,
                    },
                    conditions: vec![accepted],
                    controller_name: inputs.controller.to_owned(),
                }
            })
            .collect();
        let targets = policy.spec.target_refs.len();
        out.push((*policy, TrafficPolicyStatus::summarized(entries, targets)));
    }
    out
}

/// The TLS, TCP and UDP listeners a Gateway or listener target reaches.
#[derive(Debug, Default)]
struct L4Reach {
    /// `name (PROTOCOL)` of each.
    l4: BTreeSet<String>,
    /// True when the target reaches other (HTTP, HTTPS) listeners too.
    other: bool,
}

/// The L4 listeners of Gateway or listener target `t`, under its ancestor key.
fn l4_reach(t: &Target, gateways: &[GatewayModel<'_>]) -> Option<(AncestorKey, L4Reach)> {
    if t.kind != TargetKind::Gateway {
        return None;
    }
    let g = gateways
        .iter()
        .find(|g| g.namespace == t.namespace && g.name == t.name)?;
    let mut reach = L4Reach::default();
    let listeners = g.listeners.iter().filter(|l| match &t.section {
        Some(section) => l.origin.is_none() && &l.spec.name == section,
        None => true,
    });
    for l in listeners {
        if l.protocol.is_l4() {
            reach
                .l4
                .insert(format!("{:?} ({})", l.spec.name, l.spec.protocol));
        } else {
            reach.other = true;
        }
    }
    let key = gateway_ancestor(&t.namespace, &t.name, t.section.as_deref());
    Some((key, reach))
}

/// What the status says of settings that do not apply to the L4 listeners `l4`.
fn l4_note(l4: &BTreeSet<String>, unapplied: &[&str]) -> String {
    let listeners: Vec<&str> = l4.iter().map(String::as_str).collect();
    format!(
        "{} not applied on listener(s) {}: only ipAccess applies to TLS, TCP and UDP listeners",
        unapplied.join(", "),
        listeners.join(", ")
    )
}

/// The message of an invalid policy, saying what its access controls do meanwhile: they fail
/// closed, refusing every request on the policy's targets until it is fixed.
fn invalid_message(error: &str, policy: &TrafficPolicy) -> String {
    let spec = &policy.spec;
    let mut refusals = Vec::new();
    if spec.ip_access.is_some() {
        refusals.push("its ipAccess refuses every client (HTTP 403; TLS and TCP connections closed, UDP datagrams dropped)");
    }
    if spec.basic_auth.is_some() || spec.jwt.is_some() {
        refusals.push("its authentication refuses every request (401)");
    }
    if let Some(auth) = &spec.external_auth {
        let status = auth
            .status_on_error
            .unwrap_or(crate::table::DEFAULT_STATUS_ON_ERROR);
        refusals.push(if status == 403 {
            "its externalAuth refuses every request (403)"
        } else {
            "its externalAuth refuses every request (its statusOnError)"
        });
    }
    if refusals.is_empty() {
        format!("{error}; the policy applies nothing")
    } else {
        format!(
            "{error}; access controls fail closed until it is fixed: {} on its targets, and nothing else of the policy applies",
            refusals.join(", and ")
        )
    }
}

/// The ancestors target `t` reaches, each with `outcome` (or `TargetNotFound` as its own).
fn reach(
    t: &Target,
    inputs: &StatusInputs<'_, '_>,
    outcome: Outcome,
) -> Vec<(AncestorKey, Outcome)> {
    let snapshot = inputs.snapshot;
    let named = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        namespace_of(meta) == t.namespace && meta.name.as_deref() == Some(t.name.as_str())
    };
    let not_found = |what: String| vec![(target_ancestor(t), Outcome::NotFound(what))];
    let (_, kind) = t.kind.group_kind();
    let missing = format!("{kind} {}/{} not found", t.namespace, t.name);
    match t.kind {
        TargetKind::Gateway => {
            let Some(gw) = snapshot.gateways.iter().find(|g| named(&g.metadata)) else {
                return not_found(missing);
            };
            if !inputs
                .gateways
                .iter()
                .any(|g| g.namespace == t.namespace && g.name == t.name)
            {
                return Vec::new();
            }
            if let Some(section) = &t.section {
                if !gw.spec.listeners.iter().any(|l| &l.name == section) {
                    return not_found(format!(
                        "Gateway {}/{} has no listener {section:?}",
                        t.namespace, t.name
                    ));
                }
            }
            vec![(
                gateway_ancestor(&t.namespace, &t.name, t.section.as_deref()),
                outcome,
            )]
        }
        TargetKind::HttpRoute => {
            let Some(route) = snapshot.http_routes.iter().find(|r| named(&r.metadata)) else {
                return not_found(missing);
            };
            if let Some(section) = &t.section {
                let rules = route.spec.rules.iter().flatten();
                if !rules
                    .clone()
                    .any(|r| r.name.as_deref() == Some(section.as_str()))
                {
                    return not_found(format!(
                        "HTTPRoute {}/{} has no rule named {section:?}",
                        t.namespace, t.name
                    ));
                }
            }
            let gateways = inputs.routes.get(&(t.namespace.as_str(), t.name.as_str()));
            gateway_ancestors(inputs, gateways.into_iter().flatten().copied(), outcome)
        }
        TargetKind::Service => {
            let Some(svc) = snapshot.services.iter().find(|s| named(&s.metadata)) else {
                return not_found(missing);
            };
            if let Some(section) = &t.section {
                let ports = svc.spec.iter().flat_map(|s| s.ports.iter().flatten());
                if !ports.clone().any(|p| p.name.as_ref() == Some(section)) {
                    return not_found(format!(
                        "Service {}/{} has no port named {section:?}",
                        t.namespace, t.name
                    ));
                }
            }
            let gateways = inputs
                .used
                .iter()
                .filter(|(k, _)| k.namespace == t.namespace && k.name == t.name)
                .flat_map(|(_, g)| g.iter().copied());
            gateway_ancestors(inputs, gateways, outcome)
        }
    }
}

fn gateway_ancestors(
    inputs: &StatusInputs<'_, '_>,
    gateways: impl Iterator<Item = usize>,
    outcome: Outcome,
) -> Vec<(AncestorKey, Outcome)> {
    let set: BTreeSet<usize> = gateways.collect();
    set.into_iter()
        .filter_map(|gi| inputs.gateways.get(gi))
        .map(|g| (gateway_ancestor(g.namespace, g.name, None), outcome.clone()))
        .collect()
}
