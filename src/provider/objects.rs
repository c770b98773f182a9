//! The declared kinds of a [`KindSet`] as the file provider reads them: a document's API group
//! and kind looked up among the set's kinds, decoded into the kind's Rust type and carried as
//! an [`Object`] until it lands in its snapshot field. Pure: no I/O.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::manifest::Document;
use crate::kinds::{Declared, Kind, KindSet, Visitor};
use crate::snapshot::{Snapshot, DEFAULT_NAMESPACE};

/// A decoded object behind `Arc`, of any kind, for [`Object::get`] and `Debug`.
trait AnyObject: Any + fmt::Debug + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

impl<K: Kind> AnyObject for K {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// One object read from a manifest, shared: a provider keeps it across reloads and a snapshot
/// holds the same allocation.
pub enum Object<S = Snapshot> {
    /// An object of a kind `S` declares, ready to go into its field.
    Read(Read<S>),
    /// A kind the set does not declare (Deployments, ConfigMaps, ...), kept for one log line.
    /// Boxed: the admission state holds an `Object` per admitted object, and these are rare.
    Skipped(Box<Unread>),
}

/// What is kept of an object of a kind that is not read.
#[derive(Debug, Clone)]
pub struct Unread {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

/// An object of a declared kind and the way into its snapshot field: its kind's entry, shared
/// by every object of the kind (thousands of objects make no allocation of their own for it).
pub struct Read<S> {
    value: Arc<dyn AnyObject>,
    kind: Arc<dyn FileKind<S>>,
}

impl<S> Clone for Read<S> {
    fn clone(&self) -> Self {
        Self {
            value: self.value.clone(),
            kind: self.kind.clone(),
        }
    }
}

impl<S> Clone for Object<S> {
    fn clone(&self) -> Self {
        match self {
            Self::Read(r) => Self::Read(r.clone()),
            Self::Skipped(unread) => Self::Skipped(unread.clone()),
        }
    }
}

impl<S> fmt::Debug for Object<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read(r) => f.debug_tuple(r.kind.field()).field(&r.value).finish(),
            Self::Skipped(unread) => f
                .debug_struct("Skipped")
                .field("api_version", &unread.api_version)
                .field("kind", &unread.kind)
                .field("name", &unread.name)
                .finish(),
        }
    }
}

impl<S> Object<S> {
    /// The object as kind `K`, when it is one.
    pub fn get<K: Kind>(&self) -> Option<&K> {
        match self {
            Self::Read(r) => r.value.as_any().downcast_ref(),
            Self::Skipped(_) => None,
        }
    }

    /// The snapshot field it goes into; `None` for skipped kinds.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Self::Read(r) => Some(r.kind.field()),
            Self::Skipped(_) => None,
        }
    }

    /// Adds it to its field of `snapshot`; skipped kinds are ignored (the caller logs them).
    pub fn insert_into(&self, snapshot: &mut S) {
        if let Self::Read(r) = self {
            r.kind.insert(snapshot, &r.value);
        }
    }
}

/// A snapshot of `S` holding `objects`, in their order within each field.
pub fn collect<S: KindSet>(objects: impl IntoIterator<Item = Object<S>>) -> S {
    let mut s = S::default();
    for o in objects {
        o.insert_into(&mut s);
    }
    s
}

impl Snapshot {
    /// Adds one parsed object; skipped kinds are ignored (the caller logs them).
    pub fn insert(&mut self, object: Object) {
        object.insert_into(self);
    }

    /// A snapshot of the given objects.
    pub fn from_objects(objects: impl IntoIterator<Item = Object>) -> Self {
        collect(objects)
    }
}

/// One declared kind, type-erased so a set can be searched by group and kind.
trait FileKind<S>: Send + Sync {
    fn matches(&self, group: &str, kind: &str) -> bool;
    fn group_and_kind(&self) -> (&str, &str);
    fn namespaced(&self) -> bool;
    fn field(&self) -> &'static str;
    /// The object of this kind that `value` is; [`FileKinds::decode`] makes the [`Read`] with
    /// the kind's shared entry.
    fn decode(&self, value: &Value) -> Result<Arc<dyn AnyObject>, String>;
    /// Adds `value`, an object this kind decoded, to its field of `snapshot`.
    fn insert(&self, snapshot: &mut S, value: &Arc<dyn AnyObject>);
    /// Puts `value` (`None`: nothing) in the place of the object `namespace`/`name` in its
    /// field of `snapshot`, a field sorted by namespace and name as [`collect`] fills it from
    /// keys in order. False when that cannot be done (no such object to remove, a value of
    /// another name, a field out of order): the caller collects the snapshot anew.
    fn place(
        &self,
        snapshot: &mut S,
        namespace: Option<&str>,
        name: &str,
        value: Option<&Arc<dyn AnyObject>>,
    ) -> bool;
}

struct Entry<S, K> {
    declared: Declared<S, K>,
    group: String,
    kind: String,
}

impl<S: 'static, K: Kind> FileKind<S> for Entry<S, K> {
    fn matches(&self, group: &str, kind: &str) -> bool {
        self.group == group && self.kind == kind
    }

    fn group_and_kind(&self) -> (&str, &str) {
        (&self.group, &self.kind)
    }

    fn namespaced(&self) -> bool {
        self.declared.namespaced()
    }

    fn field(&self) -> &'static str {
        self.declared.field
    }

    fn decode(&self, value: &Value) -> Result<Arc<dyn AnyObject>, String> {
        // From the borrowed tree: only what the object keeps is copied.
        let object = K::deserialize(value).map_err(|e| e.to_string())?;
        Ok(Arc::new((self.declared.on_read)(object)))
    }

    fn insert(&self, snapshot: &mut S, value: &Arc<dyn AnyObject>) {
        // Only this kind's decode makes the values it is given: the downcast holds.
        if let Ok(object) = value.clone().into_any().downcast::<K>() {
            (self.declared.slot)(snapshot).push(object);
        }
    }

    fn place(
        &self,
        snapshot: &mut S,
        namespace: Option<&str>,
        name: &str,
        value: Option<&Arc<dyn AnyObject>>,
    ) -> bool {
        let value = match value.map(|v| v.clone().into_any().downcast::<K>()) {
            None => None,
            Some(Ok(object)) => Some(object),
            Some(Err(_)) => return false,
        };
        if value
            .as_ref()
            .is_some_and(|v| place_of(&**v) != (namespace, name))
        {
            return false;
        }
        let list = (self.declared.slot)(snapshot);
        let at = list.binary_search_by(|o| place_of(&**o).cmp(&(namespace, name)));
        match (at, value) {
            (Ok(i), Some(v)) => list[i] = v,
            (Ok(i), None) => {
                list.remove(i);
            }
            (Err(i), Some(v)) => list.insert(i, v),
            (Err(_), None) => return false,
        }
        true
    }
}

/// Where an object sorts in its snapshot field: by namespace, then name, as its key does.
fn place_of<K: Kind>(object: &K) -> (Option<&str>, &str) {
    let meta = object.meta();
    (
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or(""),
    )
}

/// The kinds of a set `S` by API group and kind: which documents the file provider reads, and
/// into which field. Any version of a kind's group is read into its one Rust type.
pub struct FileKinds<S> {
    kinds: Vec<Arc<dyn FileKind<S>>>,
}

impl<S: KindSet> Default for FileKinds<S> {
    fn default() -> Self {
        struct Collect<S>(Vec<Arc<dyn FileKind<S>>>);
        impl<S: 'static> Visitor<S> for Collect<S> {
            fn kind<K: Kind>(&mut self, declared: Declared<S, K>) {
                self.0.push(Arc::new(Entry {
                    group: declared.group(),
                    kind: declared.kind(),
                    declared,
                }));
            }
        }
        let mut c = Collect(Vec::new());
        S::visit(&mut c);
        Self { kinds: c.0 }
    }
}

impl FileKinds<Snapshot> {
    /// The kinds of [`Snapshot`], built once.
    pub fn snapshot() -> &'static Self {
        static KINDS: OnceLock<FileKinds<Snapshot>> = OnceLock::new();
        KINDS.get_or_init(FileKinds::default)
    }
}

impl<S: KindSet> FileKinds<S> {
    fn find(&self, doc: &Document) -> Option<&Arc<dyn FileKind<S>>> {
        let group = doc.group();
        self.kinds.iter().find(|k| k.matches(group, &doc.kind))
    }

    /// Puts `object` (`None`: nothing) in the place of the object of `group`/`kind`
    /// `namespace`/`name` in `snapshot`, whose fields are in key order (as [`collect`] fills
    /// them from keys in order), so that the snapshot stays what collecting it anew would
    /// give. True for a kind the set does not declare (nothing to do); false when the place
    /// cannot be found (see `FileKind::place`).
    pub fn place(
        &self,
        snapshot: &mut S,
        (group, kind): (&str, &str),
        (namespace, name): (Option<&str>, &str),
        object: Option<&Object<S>>,
    ) -> bool {
        let Some(entry) = self.kinds.iter().find(|k| k.matches(group, kind)) else {
            return true;
        };
        match object {
            Some(Object::Read(r)) => entry.place(snapshot, namespace, name, Some(&r.value)),
            Some(Object::Skipped(_)) => false,
            None => entry.place(snapshot, namespace, name, None),
        }
    }

    /// The kinds read in API group `group` (`""`: the core group), in declaration order.
    pub fn kinds_of_group(&self, group: &str) -> Vec<&str> {
        self.kinds
            .iter()
            .map(|k| k.group_and_kind())
            .filter(|(g, _)| *g == group)
            .map(|(_, k)| k)
            .collect()
    }

    /// True for documents of a declared kind; others are skipped.
    pub fn reads(&self, doc: &Document) -> bool {
        self.find(doc).is_some()
    }

    /// Fills what `kubectl` and the API server set before defaulting: the namespace of a
    /// namespaced object (`default`) and, in the absence of an API server counting them,
    /// `metadata.generation` 1.
    pub fn normalize(&self, doc: &mut Document) {
        let namespaced = self.find(doc).is_some_and(|k| k.namespaced());
        let Some(meta) = doc.value.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        if namespaced && meta.get("namespace").is_none_or(Value::is_null) {
            meta.insert("namespace".into(), DEFAULT_NAMESPACE.into());
        }
        if meta.get("generation").is_none_or(Value::is_null) {
            meta.insert("generation".into(), 1.into());
        }
        meta.remove("managedFields");
    }

    /// The typed object; undeclared kinds become [`Object::Skipped`].
    pub fn decode(&self, doc: &Document) -> Result<Object<S>, String> {
        match self.find(doc) {
            Some(kind) => Ok(Object::Read(Read {
                value: kind.decode(&doc.value)?,
                kind: kind.clone(),
            })),
            None => Ok(Object::Skipped(Box::new(Unread {
                api_version: doc.api_version.clone(),
                kind: doc.kind.clone(),
                name: doc.name().to_owned(),
            }))),
        }
    }
}

impl Document {
    /// True for the kinds a [`Snapshot`] holds; other kinds are skipped.
    pub fn is_read(&self) -> bool {
        FileKinds::snapshot().reads(self)
    }

    /// [`FileKinds::normalize`] for the kinds of a [`Snapshot`].
    pub fn normalize(&mut self) {
        FileKinds::snapshot().normalize(self);
    }

    /// The typed object; kinds a [`Snapshot`] does not hold become [`Object::Skipped`].
    pub fn to_object(&self) -> Result<Object, String> {
        FileKinds::snapshot().decode(self)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use gateway_api::apis::standard::gatewayclasses::GatewayClass;
    use k8s_openapi::api::core::v1::Service;

    use super::*;
    use crate::provider::manifest::parse_documents;

    fn docs(text: &str) -> Vec<Document> {
        parse_documents(Path::new("t.yaml"), text).unwrap()
    }

    #[test]
    fn documents_land_in_their_declared_field_by_group_and_kind_any_version() {
        let text = "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: GatewayClass\nmetadata: {name: c}\nspec: {controllerName: x}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\napiVersion: example.com/v1\nkind: Service\nmetadata: {name: other}\n";
        let mut objects = Vec::new();
        for mut doc in docs(text) {
            doc.normalize();
            objects.push(doc.to_object().unwrap());
        }
        assert_eq!(objects[0].field(), Some("gateway_classes"));
        assert!(objects[0].get::<GatewayClass>().is_some());
        assert!(objects[0].get::<Service>().is_none());
        // Cluster-scoped: no namespace is added.
        let class = objects[0].get::<GatewayClass>().unwrap();
        assert_eq!(class.metadata.namespace, None);
        let svc = objects[1].get::<Service>().unwrap();
        assert_eq!(svc.metadata.namespace.as_deref(), Some("default"));
        assert!(matches!(&objects[2], Object::Skipped(u) if u.kind == "Service"));
        let snapshot = Snapshot::from_objects(objects.clone());
        assert_eq!(
            (snapshot.gateway_classes.len(), snapshot.services.len()),
            (1, 1)
        );
        // The snapshot holds the object's allocation, not a copy.
        let held: &Service = &snapshot.services[0];
        assert!(std::ptr::eq(held, svc));
    }
}
