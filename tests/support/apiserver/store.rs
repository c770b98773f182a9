//! The generic object store: every object as `serde_json::Value`, keyed by resource
//! (`plural.group`), namespace and name; one global `resourceVersion` counter; the bounded
//! event history that watches replay; the verbs with their Kubernetes semantics. No I/O, no
//! locking: the server wraps it in a mutex.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Value};

use super::apply::Owners;
use super::kinds::{self, Kind, Table};
use super::object::{
    as_version, check_namespace, check_type, content, metadata_mut, now, rv_of, split_status,
    suffix,
};
use super::patch::{self, Patch, PatchType};

pub use super::error::ApiError;

/// The resource whose objects decide which custom kinds are served.
const CRDS: &str = "customresourcedefinitions.apiextensions.k8s.io";

/// What happened to an object, as a watch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One entry of the history: the object after the change and, for modifications, before it
/// (so a watch with a selector can turn "left the selection" into DELETED).
#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    pub resource: String,
    pub namespace: String,
    pub ty: EventType,
    pub object: Value,
    pub old: Option<Value>,
}

/// Whether a write addresses the main resource or its `/status` subresource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Main,
    Status,
}

/// All objects, the kind table, the resourceVersion counter and the event history.
pub struct Store {
    /// The served kinds.
    pub kinds: Table,
    objects: BTreeMap<String, BTreeMap<(String, String), Value>>,
    rv: u64,
    history: VecDeque<Event>,
    history_limit: usize,
    /// Watches that start from a resourceVersion below this one get 410 Gone.
    compacted: u64,
    uids: u64,
    owners: Owners,
}

impl Store {
    pub fn new() -> Store {
        Store {
            kinds: Table(kinds::builtin()),
            objects: BTreeMap::new(),
            rv: 1,
            history: VecDeque::new(),
            history_limit: 4096,
            compacted: 1,
            uids: 0,
            owners: Owners::default(),
        }
    }

    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    pub fn set_history_limit(&mut self, limit: usize) {
        self.history_limit = limit.max(1);
        self.trim_history();
    }

    /// Forgets the whole history: every watch resuming from an older resourceVersion gets 410.
    pub fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }

    /// Events of `resource` after `from`, or `Err` when the history no longer reaches back.
    pub fn events_since(&self, resource: &str, from: u64) -> Result<Vec<Event>, u64> {
        if from < self.compacted {
            return Err(self.compacted);
        }
        let start = self.history.partition_point(|e| e.rv <= from);
        Ok(self
            .history
            .range(start..)
            .filter(|e| e.resource == resource)
            .cloned()
            .collect())
    }

    pub fn get(&self, kind: &Kind, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&kind.resource())
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .map(|o| as_version(o, kind))
            .ok_or_else(|| ApiError::not_found(kind, name))
    }

    /// Objects of `kind` in `ns` (all namespaces when `None`), sorted by namespace and name.
    pub fn list(&self, kind: &Kind, ns: Option<&str>) -> Vec<Value> {
        let Some(map) = self.objects.get(&kind.resource()) else {
            return Vec::new();
        };
        map.iter()
            .filter(|((o_ns, _), _)| ns.is_none_or(|n| n == o_ns))
            .map(|(_, o)| as_version(o, kind))
            .collect()
    }

    /// POST: 409 AlreadyExists when the name is taken; `generateName` gets a random suffix.
    pub fn create(&mut self, kind: &Kind, ns: &str, mut body: Value) -> Result<Value, ApiError> {
        check_type(kind, &body)?;
        let meta = metadata_mut(&mut body)?;
        let mut name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty() {
            match meta.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => name = format!("{prefix}{}", suffix()),
                _ => {
                    return Err(ApiError::invalid(
                        "metadata.name: Required value: name or generateName is required",
                    ))
                }
            }
        }
        check_namespace(kind, ns, meta)?;
        let key = (ns.to_string(), name.clone());
        let resource = kind.resource();
        if self
            .objects
            .get(&resource)
            .is_some_and(|m| m.contains_key(&key))
        {
            let msg = format!("{resource} \"{name}\" already exists");
            return Err(ApiError::new(409, "AlreadyExists", msg));
        }
        self.rv += 1;
        self.uids += 1;
        meta.insert("name".into(), json!(name));
        for field in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
        ] {
            meta.remove(field);
        }
        let uid = format!(
            "{:08x}-0000-4000-8000-{:012x}",
            fastrand::u32(..),
            self.uids
        );
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(now()));
        meta.insert("generation".into(), json!(1));
        meta.insert("resourceVersion".into(), json!(self.rv.to_string()));
        if kind.status {
            if let Some(o) = body.as_object_mut() {
                o.remove("status");
            }
        }
        let body = as_version(&body, kind);
        self.objects
            .entry(resource.clone())
            .or_default()
            .insert(key, body.clone());
        self.record(EventType::Added, &resource, ns, body.clone(), None);
        self.follow_crd(kind, &body, false);
        Ok(body)
    }

    /// A CustomResourceDefinition written or removed changes what is served, as in a real API
    /// server once the CRD is established (or gone).
    fn follow_crd(&mut self, kind: &Kind, obj: &Value, removed: bool) {
        if kind.resource() != CRDS {
            return;
        }
        if removed {
            self.kinds.unregister_crd(obj);
        } else {
            self.kinds.register_crd(obj);
        }
    }

    /// PUT: 409 Conflict when `metadata.resourceVersion` is stale.
    pub fn update(
        &mut self,
        kind: &Kind,
        ns: &str,
        name: &str,
        mut body: Value,
        target: Target,
    ) -> Result<Value, ApiError> {
        check_type(kind, &body)?;
        let meta = metadata_mut(&mut body)?;
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if n != name => {
                let msg = format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                );
                return Err(ApiError::bad_request(msg));
            }
            _ => {}
        }
        check_namespace(kind, ns, meta)?;
        let sent_rv = meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .map(String::from);
        let old = self.get(kind, ns, name)?;
        if sent_rv.is_some_and(|rv| !rv.is_empty() && Some(rv.as_str()) != rv_of(&old)) {
            return Err(ApiError::conflict(kind, name));
        }
        let new = split_status(kind, &old, body, target);
        self.commit(kind, ns, name, old, new)
    }

    /// PATCH of any type; server-side apply creates a missing object.
    pub fn patch(
        &mut self,
        kind: &Kind,
        ns: &str,
        name: &str,
        patch: Patch,
        target: Target,
    ) -> Result<Value, ApiError> {
        let Patch {
            ptype,
            body,
            manager,
        } = patch;
        if ptype == PatchType::Apply {
            check_type(kind, &body)?;
            let applied_name = body.pointer("/metadata/name").and_then(Value::as_str);
            if applied_name != Some(name) {
                return Err(ApiError::bad_request(format!(
                    "metadata.name of the applied object must be {name:?}"
                )));
            }
        }
        let id = (kind.resource(), ns.to_string(), name.to_string());
        let manager = format!("{manager}|{target:?}");
        let old = match self.get(kind, ns, name) {
            Ok(old) => old,
            Err(e) if ptype == PatchType::Apply && target == Target::Main && e.code == 404 => {
                let created = self.create(kind, ns, body.clone())?;
                let mut scratch = created.clone();
                self.owners
                    .prune_and_record(&id, &manager, &mut scratch, &body);
                return Ok(created);
            }
            Err(e) => return Err(e),
        };
        let mut patched = old.clone();
        if ptype == PatchType::Apply {
            self.owners
                .prune_and_record(&id, &manager, &mut patched, &body);
        }
        patch::apply(&mut patched, ptype, &body)?;
        if rv_of(&patched) != rv_of(&old) && ptype != PatchType::Apply {
            return Err(ApiError::conflict(kind, name));
        }
        let new = split_status(kind, &old, patched, target);
        self.commit(kind, ns, name, old, new)
    }

    /// DELETE: with finalizers the object only gets a `deletionTimestamp`; without, it goes at
    /// once and its dependents (by owner reference uid) follow.
    pub fn delete(
        &mut self,
        kind: &Kind,
        ns: &str,
        name: &str,
        options: &Value,
    ) -> Result<Value, ApiError> {
        let mut obj = self.get(kind, ns, name)?;
        let pre = |field: &str| {
            options
                .pointer(&format!("/preconditions/{field}"))
                .and_then(Value::as_str)
        };
        let uid = obj.pointer("/metadata/uid").and_then(Value::as_str);
        if pre("uid").is_some_and(|u| Some(u) != uid)
            || pre("resourceVersion").is_some_and(|r| Some(r) != rv_of(&obj))
        {
            return Err(ApiError::conflict(kind, name));
        }
        let has_finalizers = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if !has_finalizers {
            return Ok(self.remove(kind, ns, name, obj, None));
        }
        if obj.pointer("/metadata/deletionTimestamp").is_some() {
            return Ok(obj);
        }
        let old = obj.clone();
        self.rv += 1;
        let meta = metadata_mut(&mut obj)?;
        meta.insert("deletionTimestamp".into(), json!(now()));
        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        meta.insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.store(kind, ns, name, obj.clone());
        self.record(
            EventType::Modified,
            &kind.resource(),
            ns,
            obj.clone(),
            Some(old),
        );
        Ok(obj)
    }

    /// Stores a changed object: carries the system metadata over, bumps `generation` when
    /// anything but metadata and status changed, and finishes a pending deletion once the
    /// finalizers are gone. An unchanged object is not written (no new resourceVersion).
    fn commit(
        &mut self,
        kind: &Kind,
        ns: &str,
        name: &str,
        old: Value,
        mut new: Value,
    ) -> Result<Value, ApiError> {
        let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
        let meta = metadata_mut(&mut new)?;
        for field in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
        ] {
            match old_meta.get(field) {
                Some(v) => meta.insert(field.into(), v.clone()),
                None => meta.remove(field),
            };
        }
        meta.remove("managedFields");
        let mut new = as_version(&new, kind);
        if content(&old) != content(&new) {
            let generation = old_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            new["metadata"]["generation"] = json!(generation + 1);
        }
        let deleting = old_meta.get("deletionTimestamp").is_some();
        let finalizers_left = new
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if deleting && !finalizers_left {
            return Ok(self.remove(kind, ns, name, new, Some(old)));
        }
        if new == old {
            return Ok(new);
        }
        self.rv += 1;
        new["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.store(kind, ns, name, new.clone());
        self.record(
            EventType::Modified,
            &kind.resource(),
            ns,
            new.clone(),
            Some(old),
        );
        Ok(new)
    }

    /// Removes an object for good, records DELETED, then removes its dependents.
    fn remove(
        &mut self,
        kind: &Kind,
        ns: &str,
        name: &str,
        mut obj: Value,
        old: Option<Value>,
    ) -> Value {
        let resource = kind.resource();
        if let Some(m) = self.objects.get_mut(&resource) {
            m.remove(&(ns.to_string(), name.to_string()));
        }
        self.owners
            .forget(&(resource.clone(), ns.to_string(), name.to_string()));
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.record(EventType::Deleted, &resource, ns, obj.clone(), old);
        self.follow_crd(kind, &obj, true);
        if let Some(uid) = obj.pointer("/metadata/uid").and_then(Value::as_str) {
            self.collect_garbage(uid);
        }
        obj
    }

    /// Deletes (as a client DELETE would) every object owned by `uid`.
    fn collect_garbage(&mut self, uid: &str) {
        let mut dependents = Vec::new();
        for map in self.objects.values() {
            for obj in map.values() {
                let owners = obj
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array);
                if owners.is_some_and(|o| {
                    o.iter()
                        .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
                }) {
                    if let Some(kind) = self.kinds.kind_of(obj) {
                        let ns = obj
                            .pointer("/metadata/namespace")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        let name = obj
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        dependents.push((kind, ns.to_string(), name.to_string()));
                    }
                }
            }
        }
        for (kind, ns, name) in dependents {
            let _ = self.delete(&kind, &ns, &name, &Value::Null);
        }
    }

    fn store(&mut self, kind: &Kind, ns: &str, name: &str, obj: Value) {
        self.follow_crd(kind, &obj, false);
        self.objects
            .entry(kind.resource())
            .or_default()
            .insert((ns.to_string(), name.to_string()), obj);
    }

    fn record(
        &mut self,
        ty: EventType,
        resource: &str,
        ns: &str,
        object: Value,
        old: Option<Value>,
    ) {
        self.history.push_back(Event {
            rv: self.rv,
            resource: resource.to_string(),
            namespace: ns.to_string(),
            ty,
            object,
            old,
        });
        self.trim_history();
    }

    fn trim_history(&mut self) {
        while self.history.len() > self.history_limit {
            if let Some(e) = self.history.pop_front() {
                self.compacted = e.rv;
            }
        }
    }
}
