//! The one order between objects that compete for the same thing (routes for a hostname, rules
//! for a path, policies for a target, ListenerSets for a port): the Gateway API's "oldest
//! first, then alphabetical by `{namespace}/{name}`". Written once, so every kind is ordered
//! the same way in both modes. Pure.
//!
//! An object without `creationTimestamp` (manifests in standalone mode; the API server always
//! sets one) counts as created at the Unix epoch: files are then ordered by namespace and
//! name, and an object read from a file never loses to one that says it was created later.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::snapshot::namespace_of;

/// An object's place in the order: creation time (Unix seconds, 0 when unknown), namespace,
/// name. Compare two with `<`: the smaller one wins.
pub type Precedence<'a> = (i64, &'a str, &'a str);

/// Creation time in Unix seconds; 0 (the epoch) when the object has none.
pub fn created(meta: &ObjectMeta) -> i64 {
    meta.creation_timestamp
        .as_ref()
        .map_or(0, |t| t.0.as_second())
}

/// The object's [`Precedence`].
pub fn of(meta: &ObjectMeta) -> Precedence<'_> {
    (
        created(meta),
        namespace_of(meta),
        meta.name.as_deref().unwrap_or(""),
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn meta(ns: &str, name: &str, created: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            creation_timestamp: created.map(|t| Time(t.parse().expect("timestamp"))),
            ..Default::default()
        }
    }

    #[test]
    fn oldest_then_namespace_then_name_and_unknown_is_the_epoch() {
        let old = meta("z", "z", Some("2024-01-01T00:00:00Z"));
        let new = meta("a", "a", Some("2025-01-01T00:00:00Z"));
        let file_b = meta("b", "x", None);
        let file_a = meta("a", "y", None);
        let mut all = [&new, &file_b, &old, &file_a];
        all.sort_by(|x, y| of(x).cmp(&of(y)));
        let names: Vec<_> = all
            .iter()
            .map(|m| m.name.as_deref().unwrap_or(""))
            .collect();
        assert_eq!(names, ["y", "x", "z", "a"]);
    }
}
