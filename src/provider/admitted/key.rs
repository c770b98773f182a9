//! The identity of an admitted object: group, kind, namespace and name, interned where every
//! object of a directory repeats them.

use std::fmt;
use std::sync::Arc;

use crate::name::Name;
use crate::provider::manifest::Document;

/// Identity of an object: two documents with the same key are the same object. Group, kind
/// and namespace are interned: every object of a directory repeats them; the name is shared
/// by the clones of a key (a file's definition and the admitted object hold one each).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectKey {
    pub group: Name,
    pub kind: Name,
    pub namespace: Option<Name>,
    pub name: Arc<str>,
}

impl ObjectKey {
    pub(in crate::provider) fn of(doc: &Document) -> Self {
        Self {
            group: Name::new(doc.group()),
            kind: Name::new(&doc.kind),
            namespace: doc.value["metadata"]["namespace"].as_str().map(Name::new),
            name: doc.name().into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}
