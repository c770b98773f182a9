//! The identity of an admitted object: group, kind, namespace and name, interned where every
//! object of a directory repeats them.

use std::fmt;
use std::sync::Arc;

use crate::name::Name;
use crate::provider::manifest::Document;

/// Identity of an object: two documents with the same key are the same object. Group and kind
/// are one interned name, and the namespace another: every object of a directory repeats them;
/// the name is shared by the clones of a key (a file's definition and the admitted object hold
/// one each). Ordered by group, kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectKey {
    /// `group`, a NUL and `kind`: no group or kind holds a NUL, so these sort as the pairs do.
    group_kind: Name,
    pub namespace: Option<Name>,
    pub name: Arc<str>,
}

impl ObjectKey {
    /// The key of the object `group`/`kind` `namespace`/`name`.
    pub fn new(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> Self {
        Self {
            group_kind: Name::new(&format!("{group}\0{kind}")),
            namespace: namespace.map(Name::new),
            name: name.into(),
        }
    }

    pub(in crate::provider) fn of(doc: &Document) -> Self {
        let namespace = doc.value["metadata"]["namespace"].as_str();
        Self::new(doc.group(), &doc.kind, namespace, doc.name())
    }

    /// The API group (`""`: the core group).
    pub fn group(&self) -> &str {
        self.group_kind.split_once('\0').map_or("", |(g, _)| g)
    }

    /// The kind.
    pub fn kind(&self) -> &str {
        self.group_kind.split_once('\0').map_or("", |(_, k)| k)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind(), self.name),
            None => write!(f, "{} {}", self.kind(), self.name),
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
