//! ReferenceGrant checks: whether an object in one namespace may refer to an object in another.
//! Pure; grants are read from the snapshot.

use std::sync::Arc;

use gateway_api::apis::standard::referencegrants::ReferenceGrant;

use crate::status::GATEWAY_GROUP;

/// One side of a reference: API group (empty for core), kind and namespace.
#[derive(Debug, Clone, Copy)]
pub struct RefSide<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub namespace: &'a str,
}

impl<'a> RefSide<'a> {
    /// A route of `kind` (`HTTPRoute`, `GRPCRoute`) in `namespace`, the usual `from` side.
    pub fn route(kind: &'a str, namespace: &'a str) -> Self {
        Self {
            group: GATEWAY_GROUP,
            kind,
            namespace,
        }
    }
}

/// The ReferenceGrants of a snapshot.
#[derive(Debug, Clone, Copy)]
pub struct Grants<'a> {
    grants: &'a [Arc<ReferenceGrant>],
}

impl<'a> Grants<'a> {
    /// Wraps the snapshot's grants.
    pub fn new(grants: &'a [Arc<ReferenceGrant>]) -> Self {
        Self { grants }
    }

    /// True when a reference from `from` to object `to_name` of `to` is allowed: always within a
    /// namespace, else only through a grant in the target namespace that lists the `from`
    /// side and the target kind (all names, or this one).
    pub fn allows(&self, from: RefSide<'_>, to: RefSide<'_>, to_name: &str) -> bool {
        if from.namespace == to.namespace {
            return true;
        }
        self.grants.iter().any(|g| {
            g.metadata.namespace.as_deref() == Some(to.namespace)
                && g.spec.from.iter().any(|f| {
                    f.group == from.group && f.kind == from.kind && f.namespace == from.namespace
                })
                && g.spec.to.iter().any(|t| {
                    t.group == to.group
                        && t.kind == to.kind
                        && t.name.as_deref().is_none_or(|n| n == to_name)
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_api::apis::standard::referencegrants::{
        ReferenceGrantFrom, ReferenceGrantSpec, ReferenceGrantTo,
    };

    fn grant(ns: &str, from_ns: &str, name: Option<&str>) -> Arc<ReferenceGrant> {
        let mut g = ReferenceGrant::new(
            "g",
            ReferenceGrantSpec {
                from: vec![ReferenceGrantFrom {
                    group: GATEWAY_GROUP.into(),
                    kind: "HTTPRoute".into(),
                    namespace: from_ns.into(),
                }],
                to: vec![ReferenceGrantTo {
                    group: String::new(),
                    kind: "Service".into(),
                    name: name.map(Into::into),
                }],
            },
        );
        g.metadata.namespace = Some(ns.into());
        Arc::new(g)
    }

    fn svc(ns: &str) -> RefSide<'_> {
        RefSide {
            group: "",
            kind: "Service",
            namespace: ns,
        }
    }

    #[test]
    fn grants_match_namespace_kind_and_name() {
        let list = vec![grant("backend", "web", Some("api"))];
        let grants = Grants::new(&list);
        let from = RefSide::route("HTTPRoute", "web");
        assert!(grants.allows(from, svc("backend"), "api"));
        assert!(!grants.allows(from, svc("backend"), "other"));
        assert!(!grants.allows(RefSide::route("HTTPRoute", "x"), svc("backend"), "api"));
        assert!(!grants.allows(from, svc("elsewhere"), "api"));
        assert!(grants.allows(from, svc("web"), "anything"));
        let all = vec![grant("backend", "web", None)];
        assert!(Grants::new(&all).allows(from, svc("backend"), "other"));
    }
}
