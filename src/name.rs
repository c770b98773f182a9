//! Interned names: the kinds, groups, API versions and namespaces that thousands of objects
//! repeat, held once each and shared by every holder. Pure.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use internment::ArcIntern;
use serde::{Serialize, Serializer};

/// A string many objects repeat (`HTTPRoute`, `gateway.networking.k8s.io`, `default`).
///
/// Every `Name` of the same text points at one shared allocation, freed with the last `Name`
/// holding it: at 5,000 routes in one namespace, the namespace is one allocation instead of
/// 5,000 per place that keeps it. Sixteen bytes, like a `Box<str>`; `Option<Name>` is too.
/// Ordered and hashed by its text, so it sorts and looks up like the `String` it replaces.
#[derive(Clone, PartialEq, Eq)]
pub struct Name(ArcIntern<str>);

impl Name {
    /// The shared copy of `text`, made if no `Name` holds it yet.
    pub fn new(text: &str) -> Self {
        Self(ArcIntern::from(text))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Name {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Self) -> Ordering {
        if self == other {
            return Ordering::Equal;
        }
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Hashed as its text, as [`Borrow<str>`] requires: a map keyed by `Name` is searched with a
/// `&str`.
impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<&String> for Name {
    fn from(text: &String) -> Self {
        Self::new(text)
    }
}

impl From<String> for Name {
    fn from(text: String) -> Self {
        Self::new(&text)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;

    #[test]
    fn the_same_text_is_one_allocation() {
        let made = Name::new("name-test-shared");
        let again = Name::from(String::from("name-test-shared"));
        assert!(std::ptr::eq(made.as_str(), again.as_str()));
        assert_eq!(made, again);
        let other = Name::new("name-test-other");
        assert_ne!(made, other);
        assert!(!std::ptr::eq(made.as_str(), other.as_str()));
    }

    #[test]
    fn sorts_hashes_and_prints_as_its_text() {
        let sorted: Vec<String> = ["zeta", "alpha", "mu", "alpha"]
            .into_iter()
            .map(Name::new)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(sorted, ["alpha", "mu", "zeta"]);

        let map: HashMap<Name, u32> = [(Name::new("default"), 1), (Name::new("infra"), 2)].into();
        assert_eq!(map.get("infra"), Some(&2));
        assert_eq!(map.get("missing"), None);

        let name = Name::new("gateway.networking.k8s.io");
        assert_eq!(format!("{name:?}"), "\"gateway.networking.k8s.io\"");
        assert_eq!(
            serde_json::to_string(&name).unwrap(),
            "\"gateway.networking.k8s.io\""
        );
        assert!(name == "gateway.networking.k8s.io");
    }

    #[test]
    fn is_as_small_as_a_boxed_str() {
        assert_eq!(std::mem::size_of::<Name>(), 16);
        assert_eq!(std::mem::size_of::<Option<Name>>(), 16);
    }
}
