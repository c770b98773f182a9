//! Which of our Gateways (or ListenerSets on them) a route's parentRef names: the index every
//! route kind looks its parentRefs up in, built once per translation.

use foldhash::HashMap;

use crate::kinds::routes::ParentRef;
use crate::snapshot::namespace_of;
use crate::translate::gateways::{gateway, listenerset};

/// True when some parentRef of the route names one of our Gateways or a ListenerSet on one
/// (cheap pre-check, so routes of other controllers cost nothing).
pub(in crate::translate) fn names_our_gateway<'p>(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    mut parents: impl Iterator<Item = ParentRef<'p>>,
    by_name: &GatewayIndex<'_>,
) -> bool {
    let ns = namespace_of(meta);
    parents.any(|p| {
        by_name
            .parent(p.group, p.kind, p.namespace.unwrap_or(ns), p.name)
            .is_some()
    })
}

/// The Gateway a parentRef reaches, and the ListenerSet (its index) when it names one: routes
/// attach only to the listeners of the object they name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParentTarget {
    pub gateway: usize,
    pub set: Option<usize>,
}

/// Gateways scanned in a list up to this many; hashed beyond.
const GATEWAYS_SCANNED: usize = 8;

/// Our Gateways' indexes by namespace and name, looked up for every parentRef of every route:
/// with a few Gateways, comparing names in a list is cheaper than hashing two strings.
pub(crate) struct GatewayIndex<'a> {
    list: Vec<(&'a str, &'a str)>,
    map: HashMap<(&'a str, &'a str), usize>,
    /// ListenerSets naming one of our Gateways: `(namespace, name)` -> (Gateway, set index).
    sets: HashMap<(&'a str, &'a str), (usize, usize)>,
}

impl<'a> GatewayIndex<'a> {
    pub(in crate::translate) fn new(
        gateways: &[gateway::GatewayModel<'a>],
        sets: &[listenerset::SetModel<'a>],
    ) -> Self {
        let sets = sets
            .iter()
            .map(|s| ((s.namespace, s.name), (s.gateway, s.index)))
            .collect();
        let list: Vec<(&str, &str)> = gateways.iter().map(|g| (g.namespace, g.name)).collect();
        let map = if list.len() > GATEWAYS_SCANNED {
            list.iter().enumerate().map(|(i, &k)| (k, i)).collect()
        } else {
            HashMap::default()
        };
        Self { list, map, sets }
    }

    /// What a parentRef `group`/`kind` `namespace/name` reaches: one of our Gateways, or a
    /// ListenerSet naming one; `None` for anything else.
    pub(crate) fn parent(
        &self,
        group: Option<&str>,
        kind: Option<&str>,
        namespace: &str,
        name: &str,
    ) -> Option<ParentTarget> {
        if group.unwrap_or(crate::status::GATEWAY_GROUP) != crate::status::GATEWAY_GROUP {
            return None;
        }
        match kind.unwrap_or("Gateway") {
            "Gateway" => self
                .get(namespace, name)
                .map(|gateway| ParentTarget { gateway, set: None }),
            listenerset::LISTENER_SET => {
                let &(gateway, set) = self.sets.get(&(namespace, name))?;
                Some(ParentTarget {
                    gateway,
                    set: Some(set),
                })
            }
            _ => None,
        }
    }

    /// The index of Gateway `namespace/name` (the last one, should the name repeat).
    pub(crate) fn get(&self, namespace: &str, name: &str) -> Option<usize> {
        if self.list.len() > GATEWAYS_SCANNED {
            return self.map.get(&(namespace, name)).copied();
        }
        self.list
            .iter()
            .rposition(|&(ns, n)| n == name && ns == namespace)
    }
}
