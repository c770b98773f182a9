//! What changed in the stores since the snapshot loop last looked: the objects each watch event
//! named, kind by kind, or a whole kind after a relist; and how one kind's objects in the
//! previous snapshot are patched with them, so a change costs in proportion to itself rather
//! than to every cached object.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::Event;
use kube::Resource;

/// An object's namespace (`None`: cluster-scoped) and name, as the store keys it.
pub type Key = (Option<String>, String);

/// A kind, as `(group, kind)`: the same for a kind watched whole and as metadata.
pub type KindKey = (String, String);

/// Beyond this many objects of one kind changed, the kind is read again whole: finding each in
/// the previous snapshot would cost more than copying the store.
const MOST_KEYS: usize = 64;

/// What changed in one kind since the last look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// Anything may have changed: a relist swapped the store (deletes missed while
    /// disconnected show up only there), or more than 64 objects of the kind changed.
    All,
    /// Only these objects were applied or deleted.
    Keys(HashSet<Key>),
}

/// The kind key of `K`.
pub fn kind_of<K: Resource<DynamicType = ()>>() -> KindKey {
    (K::group(&()).into_owned(), K::kind(&()).into_owned())
}

/// The changes noted since the snapshot loop last took them. Noted by the reflectors' drivers
/// after the store applied the event, so a change taken here is already in the store.
#[derive(Debug, Default)]
pub struct Changes(Mutex<HashMap<KindKey, Changed>>);

impl Changes {
    /// Notes what `event` changed in its store: the object of an `Apply` or `Delete`, the
    /// whole kind at `InitDone` (the store swaps its contents then); nothing before.
    pub fn note<K: Resource<DynamicType = ()>>(&self, event: &Event<K>) {
        let object = match event {
            Event::Apply(o) | Event::Delete(o) => Some(o.meta()),
            Event::InitDone => None,
            Event::Init | Event::InitApply(_) => return,
        };
        let mut changes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let changed = changes
            .entry(kind_of::<K>())
            .or_insert_with(|| Changed::Keys(HashSet::new()));
        match (object, &mut *changed) {
            (None, _) => *changed = Changed::All,
            (Some(_), Changed::All) => {}
            (Some(meta), Changed::Keys(keys)) => {
                keys.insert(key_of(meta));
                if keys.len() > MOST_KEYS {
                    *changed = Changed::All;
                }
            }
        }
    }

    /// Every change noted so far, leaving none.
    pub fn take(&self) -> HashMap<KindKey, Changed> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

fn key_of(meta: &ObjectMeta) -> Key {
    (
        meta.namespace.clone(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// Whether two objects are the same version of the same object: the API server gives an
/// object a new resourceVersion whenever it changes it, and a recreated one a new uid.
fn same_version(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    (&a.uid, &a.resource_version) == (&b.uid, &b.resource_version)
}

/// Brings `objects` (one kind's objects in the previous snapshot) in line with the store for
/// `keys`: `current` gives what the snapshot holds for a key now (`None`: absent or left out).
/// A changed object is replaced where it was, a new one appended, a gone one removed; an
/// object at the same version keeps its `Arc`. True when any object changed.
pub fn patch<K: Resource>(
    objects: &mut Vec<Arc<K>>,
    keys: &HashSet<Key>,
    current: impl Fn(&Key) -> Option<Arc<K>>,
) -> bool {
    let mut changed = false;
    for key in keys {
        let at = objects.iter().position(|o| {
            let m = o.meta();
            m.name.as_deref() == Some(key.1.as_str()) && m.namespace == key.0
        });
        match (at, current(key)) {
            (Some(i), Some(now)) => {
                if let Some(slot) = objects.get_mut(i) {
                    if !same_version(slot.meta(), now.meta()) {
                        *slot = now;
                        changed = true;
                    }
                }
            }
            (None, Some(now)) => {
                objects.push(now);
                changed = true;
            }
            (Some(i), None) => {
                objects.remove(i);
                changed = true;
            }
            (None, None) => {}
        }
    }
    changed
}

/// A digest of `objects` (kind, namespace, name, uid, resourceVersion of each), in no
/// particular order of objects: equal digests mean the same inputs.
pub fn digest<K: Resource<DynamicType = ()>>(objects: &[Arc<K>]) -> Vec<u64> {
    let kind = K::kind(&());
    let mut out: Vec<u64> = objects
        .iter()
        .map(|o| {
            let m = o.meta();
            let mut h = DefaultHasher::new();
            let id = (&m.namespace, &m.name, &m.uid, &m.resource_version);
            (kind.as_ref(), id).hash(&mut h);
            h.finish()
        })
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use gateway_api::apis::standard::gateways::Gateway;
    use k8s_openapi::api::core::v1::Namespace;
    use kube::core::PartialObjectMeta;
    use kube::runtime::reflector::store::Writer;
    use kube::ResourceExt;

    use super::*;
    use crate::provider::kube::stores::Stores;
    use crate::provider::kube::watch::tests::Bare;
    use crate::snapshot::Snapshot;

    fn gateway(name: &str, version: &str, deleting: bool) -> Gateway {
        let mut g: Gateway = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "a", "name": name, "uid": format!("uid-{name}"),
                "resourceVersion": version},
            "spec": {"gatewayClassName": "c", "listeners": []}
        }))
        .unwrap();
        if deleting {
            g.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
            );
        }
        g
    }

    /// Applies `event` to the store and notes it, as a reflector's driver does.
    fn event<K: Resource<DynamicType = ()> + Clone>(
        w: &mut Writer<K>,
        changes: &Changes,
        event: Event<K>,
    ) {
        w.apply_watcher_event(&event);
        changes.note(&event);
    }

    /// Gateways as `name@resourceVersion`, sorted.
    fn gateways(s: &Snapshot) -> Vec<String> {
        let mut out: Vec<_> = s
            .gateways
            .iter()
            .map(|g| {
                format!(
                    "{}@{}",
                    g.name_any(),
                    g.resource_version().unwrap_or_default()
                )
            })
            .collect();
        out.sort();
        out
    }

    /// Patches `last` with the changes noted, checks that it equals a snapshot read whole, and
    /// returns whether the patch saw a change.
    async fn patched(stores: &Stores, changes: &Changes, last: &mut Snapshot) -> bool {
        let changed = stores.patch(last, &changes.take()).await;
        assert_eq!(gateways(last), gateways(&stores.snapshot()));
        changed
    }

    #[tokio::test]
    async fn the_previous_snapshot_is_patched_with_the_objects_events_name() {
        let mut bare = Bare::default();
        let stores: Stores = Stores::open(&mut bare);
        let changes = Changes::default();
        let w = bare.writer::<Gateway>();
        w.apply_watcher_event(&Event::Init);
        for name in ["one", "two", "three"] {
            w.apply_watcher_event(&Event::InitApply(gateway(name, "1", false)));
        }
        w.apply_watcher_event(&Event::InitDone);
        let mut last = stores.snapshot();
        let two = last
            .gateways
            .iter()
            .find(|g| g.name_any() == "two")
            .cloned();

        // A change: only that object is replaced; the others keep their `Arc`.
        event(w, &changes, Event::Apply(gateway("one", "2", false)));
        assert!(patched(&stores, &changes, &mut last).await);
        assert_eq!(gateways(&last), ["one@2", "three@1", "two@1"]);
        let kept = last.gateways.iter().find(|g| g.name_any() == "two");
        assert!(Arc::ptr_eq(kept.unwrap(), two.as_ref().unwrap()));

        // An event that changes nothing (same resourceVersion) publishes nothing.
        event(w, &changes, Event::Apply(gateway("one", "2", false)));
        assert!(!patched(&stores, &changes, &mut last).await);

        // A new object, a delete, a Gateway being deleted (left out, as when read whole).
        event(w, &changes, Event::Apply(gateway("four", "1", false)));
        event(w, &changes, Event::Delete(gateway("three", "1", false)));
        event(w, &changes, Event::Apply(gateway("two", "2", true)));
        assert!(patched(&stores, &changes, &mut last).await);
        assert_eq!(gateways(&last), ["four@1", "one@2"]);

        // Nothing noted: nothing looked up, nothing changed.
        assert!(!patched(&stores, &changes, &mut last).await);
    }

    #[tokio::test]
    async fn a_relist_reads_the_kind_again_whole() {
        let mut bare = Bare::default();
        let stores: Stores = Stores::open(&mut bare);
        let changes = Changes::default();
        let w = bare.writer::<Gateway>();
        w.apply_watcher_event(&Event::Init);
        w.apply_watcher_event(&Event::InitApply(gateway("one", "1", false)));
        w.apply_watcher_event(&Event::InitApply(gateway("two", "1", false)));
        w.apply_watcher_event(&Event::InitDone);
        let mut last = stores.snapshot();

        // A relist that finds what was cached changes nothing.
        event(w, &changes, Event::Init);
        event(w, &changes, Event::InitApply(gateway("one", "1", false)));
        event(w, &changes, Event::InitApply(gateway("two", "1", false)));
        event(w, &changes, Event::InitDone);
        assert!(!patched(&stores, &changes, &mut last).await);

        // One that no longer has "two" (deleted while disconnected: no Delete event) drops it.
        event(w, &changes, Event::Init);
        event(w, &changes, Event::InitApply(gateway("one", "3", false)));
        event(w, &changes, Event::InitDone);
        assert!(patched(&stores, &changes, &mut last).await);
        assert_eq!(gateways(&last), ["one@3"]);
    }

    #[tokio::test]
    async fn metadata_kinds_are_patched_and_many_changes_read_the_kind_whole() {
        let mut bare = Bare::default();
        let stores: Stores = Stores::open(&mut bare);
        let changes = Changes::default();
        let ns = |name: &str, team: &str| -> PartialObjectMeta<Namespace> {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "labels": {"team": team}, "resourceVersion": team}
            }))
            .unwrap()
        };
        let w = bare.writer::<PartialObjectMeta<Namespace>>();
        w.apply_watcher_event(&Event::Init);
        w.apply_watcher_event(&Event::InitApply(ns("web", "a")));
        w.apply_watcher_event(&Event::InitDone);
        let mut last = stores.snapshot();
        event(w, &changes, Event::Apply(ns("web", "b")));
        assert!(stores.patch(&mut last, &changes.take()).await);
        assert_eq!(last.namespaces.len(), 1);
        assert_eq!(last.namespaces[0].labels()["team"], "b");

        for i in 0..=MOST_KEYS {
            event(w, &changes, Event::Apply(ns(&format!("n-{i}"), "a")));
        }
        let taken = changes.take();
        assert_eq!(taken.get(&kind_of::<Namespace>()), Some(&Changed::All));
        assert!(stores.patch(&mut last, &taken).await);
        assert_eq!(last.namespaces.len(), MOST_KEYS + 2);
    }
}
