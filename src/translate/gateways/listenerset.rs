//! ListenerSets (Gateway API `ListenerSet`): which ones a Gateway takes in
//! (`spec.allowedListeners`), their listeners joined to the Gateway's in the spec's precedence
//! (the Gateway's own, then ListenerSets by creation time, then `namespace/name`) with conflicts
//! resolved in that order, and each ListenerSet's status. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use std::collections::BTreeMap;

use foldhash::HashMap;

use gateway_api::apis::standard::gateways::{
    GatewayAllowedListenersNamespacesFrom as AllowedFrom, GatewayListeners,
    GatewayListenersAllowedRoutesNamespacesSelector as Selector,
};
use gateway_api::apis::standard::listenersets::{
    ListenerSet, ListenerSetStatus, ListenerSetStatusListeners,
    ListenerSetStatusListenersSupportedKinds,
};

use crate::snapshot::{namespace_of, Snapshot};
use crate::status::GATEWAY_GROUP;
use crate::translate::conditions::*;
use crate::translate::gateways::conflicts::{clash, Served};
use crate::translate::gateways::frontend::Frontends;
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::gateways::listener::{listener_model, selector_matches, ListenerModel};
use crate::translate::gateways::tls::Certificates;
use crate::translate::TranslateOptions;

/// The kind name routes and ReferenceGrants use for a ListenerSet.
pub const LISTENER_SET: &str = "ListenerSet";

/// One ListenerSet whose `parentRef` names one of our Gateways, its listeners converted to the
/// Gateway listener type (the fields are the same), so every listener rule applies unchanged.
#[derive(Debug)]
pub struct SetInput<'a> {
    pub set: &'a ListenerSet,
    pub namespace: &'a str,
    pub name: &'a str,
    /// Gateway `(namespace, name)` its parentRef names.
    pub parent: (&'a str, &'a str),
    pub specs: Vec<GatewayListeners>,
}

/// The ListenerSets of `snapshot` that name a Gateway, in the spec's precedence: oldest first,
/// then by `namespace/name`.
pub fn inputs(snapshot: &Snapshot) -> Vec<SetInput<'_>> {
    let mut out: Vec<SetInput<'_>> = snapshot
        .listener_sets
        .iter()
        .filter_map(|s| {
            let p = &s.spec.parent_ref;
            let group = p.group.as_deref().unwrap_or(GATEWAY_GROUP);
            if group != GATEWAY_GROUP || p.kind.as_deref().unwrap_or("Gateway") != "Gateway" {
                return None;
            }
            let namespace = namespace_of(&s.metadata);
            let specs = s
                .spec
                .listeners
                .iter()
                .filter_map(|l| serde_json::to_value(l).ok())
                .filter_map(|v| serde_json::from_value(v).ok())
                .collect();
            Some(SetInput {
                set: s,
                namespace,
                name: s.metadata.name.as_deref().unwrap_or(""),
                parent: (p.namespace.as_deref().unwrap_or(namespace), p.name.as_str()),
                specs,
            })
        })
        .collect();
    out.sort_by_key(|s| crate::translate::common::precedence::of(&s.set.metadata));
    out
}

/// What became of one ListenerSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Its listeners joined the Gateway (some may be conflicted or invalid).
    Accepted,
    /// The Gateway's `allowedListeners` does not take it.
    NotAllowed,
    /// The Gateway is not accepted.
    ParentNotAccepted,
    /// None of its listeners can be served (conflicted, unsupported, or certificates that
    /// do not resolve).
    ListenersNotValid,
}

/// One ListenerSet naming one of our Gateways, judged.
#[derive(Debug)]
pub struct SetModel<'a> {
    /// Index among the translation's ListenerSets (`ListenerModel::origin`).
    pub index: usize,
    pub namespace: &'a str,
    pub name: &'a str,
    pub generation: Option<i64>,
    /// Index of its Gateway.
    pub gateway: usize,
    pub verdict: Verdict,
    /// The listeners of a ListenerSet that did not join its Gateway, for its status only.
    pub rejected: Vec<ListenerModel<'a>>,
}

/// True when `gateway`'s `allowedListeners` takes ListenerSets from `set_ns` (with `labels`).
fn allowed(gateway: &GatewayModel<'_>, set_ns: &str, labels: &BTreeMap<String, String>) -> bool {
    let Some(ns) = gateway
        .gateway
        .spec
        .allowed_listeners
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
    else {
        return false;
    };
    match ns.from.as_ref() {
        None | Some(AllowedFrom::None) => false,
        Some(AllowedFrom::Same) => set_ns == gateway.namespace,
        Some(AllowedFrom::All) => true,
        Some(AllowedFrom::Selector) => ns
            .selector
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| serde_json::from_value::<Selector>(v).ok())
            .is_some_and(|s| selector_matches(&s, labels)),
    }
}

/// Judges every ListenerSet of `inputs` (already in precedence order) and appends the listeners
/// of the accepted ones to their Gateway's. The merged list is taken in order (the Gateway's
/// own listeners, earlier ListenerSets', then this one's in spec order): a listener conflicts
/// with an earlier one that is not itself conflicted, and the earlier one keeps its port. A
/// ListenerSet none of whose listeners is valid (certificates resolved included) is not
/// accepted and adds nothing.
pub fn join<'a>(
    inputs: &'a [SetInput<'a>],
    gateways: &mut [GatewayModel<'a>],
    labels: &HashMap<&str, BTreeMap<String, String>>,
    certificates: &mut Certificates<'_>,
    frontends: &mut Frontends<'_>,
) -> Vec<SetModel<'a>> {
    let index: HashMap<(&str, &str), usize> = gateways
        .iter()
        .enumerate()
        .map(|(i, g)| ((g.namespace, g.name), i))
        .collect();
    // Per Gateway, its listeners indexed for conflicts (a scan per new listener would be
    // quadratic in the ListenerSets a Gateway takes in).
    let mut served: HashMap<usize, Served<'a>> = HashMap::default();
    let mut out = Vec::new();
    for (si, input) in inputs.iter().enumerate() {
        let Some(&gi) = index.get(&input.parent) else {
            continue;
        };
        let gateway = &mut gateways[gi];
        let served = served.entry(gi).or_insert_with(|| {
            let mut s = Served::default();
            s.add(&gateway.listeners, 0);
            s
        });
        gateway.listener_sets.get_or_insert(0);
        let fallback;
        let set_labels = match labels.get(input.namespace) {
            Some(l) => l,
            None => {
                fallback = crate::translate::gateways::listener::default_labels(input.namespace);
                &fallback
            }
        };
        let mut listeners: Vec<ListenerModel<'a>> = input
            .specs
            .iter()
            .map(|spec| {
                let tls = certificates.listener_of(LISTENER_SET, input.namespace, spec);
                let mut model = listener_model(spec, tls);
                if model.protocol.terminates_tls() {
                    model.client_auth = frontends.listener(gateway.gateway, spec.port);
                }
                model.origin = Some((si, input.namespace, input.name));
                model
            })
            .collect();
        for i in 0..listeners.len() {
            let (earlier, rest) = listeners.split_at_mut(i);
            let l = &mut rest[0];
            l.conflict = served.first_clash(&gateway.listeners, l).or_else(|| {
                earlier
                    .iter()
                    .filter(|e| e.conflict.is_none())
                    .find_map(|e| clash(e, l))
            });
        }
        let verdict = if !allowed(gateway, input.namespace, set_labels) {
            Verdict::NotAllowed
        } else if !gateway.accepted() {
            Verdict::ParentNotAccepted
        } else if !listeners.iter().any(ListenerModel::valid) {
            Verdict::ListenersNotValid
        } else {
            Verdict::Accepted
        };
        let rejected = if verdict == Verdict::Accepted {
            // `GatewayModel::listeners_of` relies on this order: ListenerSets by index.
            debug_assert!(gateway.listeners.last().is_none_or(|l| l.set() < Some(si)));
            let from = gateway.listeners.len();
            gateway.listeners.extend(listeners);
            served.add(&gateway.listeners, from);
            if let Some(n) = gateway.listener_sets.as_mut() {
                *n += 1;
            }
            Vec::new()
        } else {
            listeners
        };
        out.push(SetModel {
            index: si,
            namespace: input.namespace,
            name: input.name,
            generation: input.set.metadata.generation,
            gateway: gi,
            verdict,
            rejected,
        });
    }
    out
}

impl SetModel<'_> {
    /// The ListenerSet's status: `Accepted` and `Programmed`, and each listener's status as a
    /// Gateway listener's (a not allowed ListenerSet lists none).
    pub fn status(
        &self,
        gateway: &GatewayModel<'_>,
        options: &TranslateOptions,
    ) -> ListenerSetStatus {
        let s = Stamp {
            generation: self.generation,
            now: options.now,
        };
        let own: Vec<&ListenerModel<'_>> = match self.verdict {
            Verdict::Accepted => gateway.listeners[gateway.listeners_of(Some(self.index))]
                .iter()
                .collect(),
            _ => self.rejected.iter().collect(),
        };
        let (accepted, programmed) = self.accepted_and_programmed(gateway, &own, &s);
        let listeners = (self.verdict != Verdict::NotAllowed).then(|| {
            own.iter()
                .map(|l| {
                    let g = gateway.listener_status(l);
                    ListenerSetStatusListeners {
                        attached_routes: g.attached_routes,
                        conditions: g.conditions,
                        name: g.name,
                        supported_kinds: g.supported_kinds.map(|kinds| {
                            kinds
                                .into_iter()
                                .map(|k| ListenerSetStatusListenersSupportedKinds {
                                    group: k.group,
                                    kind: k.kind,
                                })
                                .collect()
                        }),
                    }
                })
                .collect()
        });
        ListenerSetStatus {
            conditions: Some(vec![accepted, programmed]),
            listeners,
        }
    }

    /// `Accepted` and `Programmed`, from the verdict on the set and its listeners (`own`).
    fn accepted_and_programmed(
        &self,
        gateway: &GatewayModel<'_>,
        own: &[&ListenerModel<'_>],
        s: &Stamp,
    ) -> (Condition, Condition) {
        let invalid: Vec<&str> = own
            .iter()
            .filter(|l| !l.valid())
            .map(|l| l.spec.name.as_str())
            .collect();
        match self.verdict {
            Verdict::NotAllowed => {
                let msg = format!(
                    "Gateway {}/{} does not allow ListenerSets from namespace {}",
                    gateway.namespace, gateway.name, self.namespace
                );
                (
                    s.fail(ConditionType::Accepted, Reason::NotAllowed, msg.clone()),
                    s.fail(ConditionType::Programmed, Reason::NotAllowed, msg),
                )
            }
            Verdict::ParentNotAccepted => {
                let msg = format!(
                    "Gateway {}/{} is not accepted",
                    gateway.namespace, gateway.name
                );
                (
                    s.fail(
                        ConditionType::Accepted,
                        Reason::ParentNotAccepted,
                        msg.clone(),
                    ),
                    s.fail(ConditionType::Programmed, Reason::ParentNotAccepted, msg),
                )
            }
            Verdict::ListenersNotValid => {
                let msg = format!("no valid listener; invalid: {}", invalid.join(", "));
                (
                    s.fail(
                        ConditionType::Accepted,
                        Reason::ListenersNotValid,
                        msg.clone(),
                    ),
                    s.fail(ConditionType::Programmed, Reason::ListenersNotValid, msg),
                )
            }
            Verdict::Accepted if invalid.is_empty() => (
                s.ok(ConditionType::Accepted, Reason::Accepted, "accepted"),
                s.ok(ConditionType::Programmed, Reason::Programmed, "programmed"),
            ),
            Verdict::Accepted => {
                let msg = format!("listeners not valid: {}", invalid.join(", "));
                let programmed = if own.iter().any(|l| l.valid()) {
                    s.ok(
                        ConditionType::Programmed,
                        Reason::Programmed,
                        "valid listeners are programmed",
                    )
                } else {
                    s.fail(
                        ConditionType::Programmed,
                        Reason::ListenersNotValid,
                        msg.clone(),
                    )
                };
                (
                    s.ok(ConditionType::Accepted, Reason::ListenersNotValid, msg),
                    programmed,
                )
            }
        }
    }
}
