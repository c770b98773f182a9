//! Field ownership for server-side apply, simplified: each field manager owns the leaf fields
//! (scalars and whole lists) of its last applied configuration, per object and subresource.
//! A field a manager stops applying is removed unless another manager applied it too. Writes
//! that are not apply own nothing, and `managedFields` is not reported.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// (resource, namespace, name).
pub type ObjectId = (String, String, String);

/// Applied field paths (JSON pointers) per object and manager.
#[derive(Debug, Default)]
pub struct Owners {
    by_object: BTreeMap<ObjectId, BTreeMap<String, BTreeSet<String>>>,
}

impl Owners {
    /// Removes from `doc` the fields `manager` applied last time but not in `applied`, then
    /// records `applied` as what `manager` owns. `manager` includes the subresource.
    pub fn prune_and_record(
        &mut self,
        id: &ObjectId,
        manager: &str,
        doc: &mut Value,
        applied: &Value,
    ) {
        let mut paths = BTreeSet::new();
        leaf_paths(applied, String::new(), &mut paths);
        let owners = self.by_object.entry(id.clone()).or_default();
        if let Some(before) = owners.get(manager) {
            let others: BTreeSet<&String> = owners
                .iter()
                .filter(|(m, _)| m.as_str() != manager)
                .flat_map(|(_, p)| p.iter())
                .collect();
            for stale in before.difference(&paths) {
                if !others.contains(stale) {
                    remove_pointer(doc, stale);
                }
            }
        }
        owners.insert(manager.to_string(), paths);
    }

    /// Forgets an object that was removed.
    pub fn forget(&mut self, id: &ObjectId) {
        self.by_object.remove(id);
    }
}

/// The identity fields every applied configuration carries; never pruned.
const IDENTITY: [&str; 5] = [
    "/apiVersion",
    "/kind",
    "/metadata/name",
    "/metadata/namespace",
    "/metadata/resourceVersion",
];

fn leaf_paths(v: &Value, prefix: String, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, child) in map {
                let escaped = k.replace('~', "~0").replace('/', "~1");
                leaf_paths(child, format!("{prefix}/{escaped}"), out);
            }
        }
        _ if prefix.is_empty() || IDENTITY.contains(&prefix.as_str()) => {}
        _ => {
            out.insert(prefix);
        }
    }
}

fn remove_pointer(doc: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let key = last.replace("~1", "/").replace("~0", "~");
    let parent = if parent.is_empty() {
        Some(doc)
    } else {
        doc.pointer_mut(parent)
    };
    if let Some(Value::Object(map)) = parent {
        map.remove(&key);
    }
}
