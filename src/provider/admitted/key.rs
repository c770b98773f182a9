//! The identity of an admitted object: group, kind, namespace and name in one shared
//! allocation, the parts that every object of a directory repeats interned.

use std::fmt;
use std::sync::Arc;

use internment::ArcIntern;

use crate::name::Name;
use crate::provider::manifest::Document;

/// Identity of an object: two documents with the same key are the same object. One shared
/// allocation, so that the file's definition and the admitted object (and the maps holding
/// them) keep a pointer each, not a copy of its parts: group, kind and namespace are interned
/// together, as every object of a directory repeats them. Ordered by group, kind, namespace
/// and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectKey(Arc<Parts>);

/// The parts of an [`ObjectKey`], in the order keys sort by.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Parts {
    /// `group`, a NUL and `kind` (no group or kind holds a NUL, so these sort as the pairs
    /// do), and the namespace: one pointer to the copy shared by every key that has them.
    scope: ArcIntern<(Name, Option<Name>)>,
    name: Box<str>,
}

impl ObjectKey {
    /// The key of the object `group`/`kind` `namespace`/`name`.
    pub fn new(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> Self {
        let group_kind = Name::new(&format!("{group}\0{kind}"));
        Self(Arc::new(Parts {
            scope: ArcIntern::new((group_kind, namespace.map(Name::new))),
            name: name.into(),
        }))
    }

    pub(in crate::provider) fn of(doc: &Document) -> Self {
        let namespace = doc.value["metadata"]["namespace"].as_str();
        Self::new(doc.group(), &doc.kind, namespace, doc.name())
    }

    /// The API group (`""`: the core group).
    pub fn group(&self) -> &str {
        self.0.scope.0.split_once('\0').map_or("", |(g, _)| g)
    }

    /// The kind.
    pub fn kind(&self) -> &str {
        self.0.scope.0.split_once('\0').map_or("", |(_, k)| k)
    }

    /// The namespace of a namespaced object.
    pub fn namespace(&self) -> Option<&str> {
        self.0.scope.1.as_deref()
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.0.name
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.namespace() {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind(), self.name()),
            None => write!(f, "{} {}", self.kind(), self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys sort by group, then kind, then namespace and name, whatever the lengths of the
    /// group names.
    #[test]
    fn keys_sort_as_their_parts_do() {
        let mut keys = [
            ObjectKey::new("a.b", "A", None, "x"),
            ObjectKey::new("a", "Z", Some("ns"), "x"),
            ObjectKey::new("", "Service", Some("b"), "s"),
            ObjectKey::new("a", "Z", Some("ns"), "w"),
            ObjectKey::new("", "Service", Some("a"), "s"),
        ];
        keys.sort();
        let shown: Vec<String> = keys
            .iter()
            .map(|k| format!("{}|{}", k.group(), k))
            .collect();
        assert_eq!(
            shown,
            [
                "|Service a/s",
                "|Service b/s",
                "a|Z ns/w",
                "a|Z ns/x",
                "a.b|A x"
            ]
        );
    }
}
