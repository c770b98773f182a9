//! The route abstraction: every route kind (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute,
//! UDPRoute, Ingress) declared once in `route_kinds!`, which generates the kind's identity
//! ([`RouteKindId`]: its name, the listener protocols that carry it, and a typed dispatch to
//! its Rust type), and [`RouteKind`], implemented once per kind, which gives what attachment,
//! rule compilation and the status writer read of a route: its parentRefs, hostnames, rules
//! and backendRefs, and its status in the one shape every route kind shares. Pure.
//!
//! Adding a route kind: its line in the declaration below, its [`RouteKind`] impl, its
//! snapshot field (`crate::snapshot`), and its rule compiler in the translator.

use std::borrow::Cow;

use crate::kinds::httproute::{
    HttpRoute, HttpRouteStatus, HttpRouteStatusParents, HttpRouteStatusParentsParentRef,
};
use gateway_api::apis::standard::grpcroutes::{GrpcRoute, GrpcRouteStatus};
use gateway_api::apis::standard::tlsroutes::{TlsRoute, TlsRouteStatus};

use super::l4::{TcpRoute, UdpRoute};
use super::Kind;

/// The status of a route of any kind: `parents[]`, in one shape for every kind (the spec's
/// `RouteStatus`). The HTTPRoute type is the one it is held in.
pub type RouteStatus = HttpRouteStatus;

/// Declares the route kinds once: `Variant = "Kind": RustType [PROTOCOL, ...]`, the protocols
/// being those of the listeners that carry the kind (listed in `supportedKinds` in declaration
/// order). A `#[cfg(...)]` before an entry compiles it conditionally.
///
/// Generates [`RouteKindId`] (with `ALL`, `as_str`, `protocols`, `FromStr`, `Display`) and
/// [`RouteKindId::visit`], which hands a [`RouteVisitor`] the kind's Rust type.
macro_rules! route_kinds {
    ($( $(#[cfg($cfg:meta)])? $variant:ident = $name:literal : $ty:ty [ $( $proto:literal ),* ] ),* $(,)?) => {
        /// A route kind, as `route_kinds!` declares it: what reports,
        /// status writes and references name a route's kind by.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum RouteKindId {
            $( $(#[cfg($cfg)])? $variant, )*
        }

        impl RouteKindId {
            /// Every route kind, in declaration order.
            pub const ALL: &'static [RouteKindId] = &[ $( $(#[cfg($cfg)])? Self::$variant, )* ];

            /// The kind's name, as in `kind:` of a manifest.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $(#[cfg($cfg)])? Self::$variant => $name, )*
                }
            }

            /// The protocols of the listeners that carry the kind.
            pub const fn protocols(self) -> &'static [&'static str] {
                match self {
                    $( $(#[cfg($cfg)])? Self::$variant => &[ $( $proto ),* ], )*
                }
            }

            /// Calls `visitor` with the kind's Rust type.
            pub fn visit<V: RouteVisitor>(self, visitor: V) -> V::Out {
                match self {
                    $( $(#[cfg($cfg)])? Self::$variant => visitor.route::<$ty>(), )*
                }
            }
        }

        $( $(#[cfg($cfg)])? impl RouteKindOf for $ty {
            const ID: RouteKindId = RouteKindId::$variant;
        } )*
    };
}

route_kinds! {
    HttpRoute = "HTTPRoute": HttpRoute ["HTTP", "HTTPS"],
    GrpcRoute = "GRPCRoute": GrpcRoute ["HTTP", "HTTPS"],
    TlsRoute = "TLSRoute": TlsRoute ["TLS"],
    TcpRoute = "TCPRoute": TcpRoute ["TCP"],
    UdpRoute = "UDPRoute": UdpRoute ["UDP"],
    // Carried by HTTP and HTTPS listeners too (`ListenerModel::accepts`), but not listed in
    // their `supportedKinds`, which name Gateway API kinds.
    Ingress = "Ingress": k8s_openapi::api::networking::v1::Ingress [],
    #[cfg(test)]
    ThrowawayRoute = "ThrowawayRoute": super::throwaway::ThrowawayRoute ["TCP"],
}

impl RouteKindId {
    /// Whether a backendRef of this kind to another namespace needs a ReferenceGrant there.
    /// An Ingress's does not: its spec names no namespace, and the only such reference its
    /// lowering writes is a canary folded in from an Ingress of another namespace, which
    /// ingress-nginx (which has no ReferenceGrant) serves.
    pub const fn needs_reference_grant(self) -> bool {
        !matches!(self, Self::Ingress)
    }
}

impl Default for RouteKindId {
    /// HTTPRoute: the kind a compiled HTTP route has unless it is a GRPCRoute.
    fn default() -> Self {
        Self::HttpRoute
    }
}

/// The identity `route_kinds!` gives a Rust type; implemented by the declaration only.
pub trait RouteKindOf {
    /// The kind's identity.
    const ID: RouteKindId;
}

/// Receives a route kind's Rust type from [`RouteKindId::visit`]: how code generic over
/// [`RouteKind`] is reached from a kind named at run time.
pub trait RouteVisitor {
    type Out;
    fn route<K: RouteKind>(self) -> Self::Out;
}

/// A route kind name that is not declared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no route kind {0:?}")]
pub struct UnknownRouteKind(pub String);

impl std::str::FromStr for RouteKindId {
    type Err = UnknownRouteKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownRouteKind(s.to_owned()))
    }
}

impl std::fmt::Display for RouteKindId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parentRef of a route of any kind, borrowed (every kind's parentRefs have these fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParentRef<'a> {
    pub group: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub port: Option<i32>,
    pub section_name: Option<&'a str>,
}

impl ParentRef<'_> {
    /// The parentRef as a `parents[]` status entry names it.
    pub fn to_status(&self) -> HttpRouteStatusParentsParentRef {
        HttpRouteStatusParentsParentRef {
            group: self.group.map(str::to_owned),
            kind: self.kind.map(str::to_owned),
            name: self.name.to_owned(),
            namespace: self.namespace.map(str::to_owned),
            port: self.port,
            section_name: self.section_name.map(str::to_owned),
        }
    }
}

/// A backendRef of a route rule of any kind, borrowed, with its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendRef<'a> {
    pub group: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub port: Option<i32>,
    pub weight: Option<i32>,
}

/// A route kind: what every rule that is the same for all route kinds (attachment, the
/// `parents[]` status, the status writer) reads of a route. Implemented once per kind.
pub trait RouteKind: Kind + RouteKindOf {
    /// One rule of the route.
    type Rule;

    /// Whether the route's status is the spec's `parents[]` (every Gateway API kind); an
    /// Ingress's is not, and the status writer writes it apart.
    const PARENTS_STATUS: bool = true;

    /// The route's parentRefs, in order.
    fn parent_refs(&self) -> impl Iterator<Item = ParentRef<'_>>;

    /// The route's hostnames; `None` for kinds without hostnames (TCPRoute, UDPRoute), which
    /// take every hostname of a listener.
    fn hostnames(&self) -> Option<&[String]>;

    /// The route's rules, in order.
    fn rules(&self) -> &[Self::Rule];

    /// The backendRefs of one rule, in order.
    fn backend_refs(rule: &Self::Rule) -> impl Iterator<Item = BackendRef<'_>>;

    /// The status the route carries, in the shape every route kind shares.
    fn route_status(&self) -> Option<Cow<'_, RouteStatus>>;
}

/// A parentRef or backendRef struct of a generated route type, borrowed: every kind's have
/// the same fields.
macro_rules! parent_ref {
    ($p:expr) => {{
        let p = $p;
        crate::kinds::routes::ParentRef {
            group: p.group.as_deref(),
            kind: p.kind.as_deref(),
            name: &p.name,
            namespace: p.namespace.as_deref(),
            port: p.port,
            section_name: p.section_name.as_deref(),
        }
    }};
}

macro_rules! backend_ref {
    ($b:expr) => {{
        let b = $b;
        crate::kinds::routes::BackendRef {
            group: b.group.as_deref(),
            kind: b.kind.as_deref(),
            name: &b.name,
            namespace: b.namespace.as_deref(),
            port: b.port,
            weight: b.weight,
        }
    }};
}
pub(crate) use {backend_ref, parent_ref};

/// Converts a route status type whose fields are the spec's `RouteStatus` into
/// [`RouteStatus`], field by field: the one conversion between the kinds' identical status
/// types.
pub trait IntoRouteStatus {
    fn to_route_status(&self) -> RouteStatus;
}

macro_rules! route_status_of {
    ($($status:ty),*) => {$(
        impl IntoRouteStatus for $status {
            fn to_route_status(&self) -> RouteStatus {
                RouteStatus {
                    parents: self
                        .parents
                        .iter()
                        .map(|p| HttpRouteStatusParents {
                            conditions: p.conditions.clone(),
                            controller_name: p.controller_name.clone(),
                            parent_ref: parent_ref!(&p.parent_ref).to_status(),
                        })
                        .collect(),
                }
            }
        }
    )*};
}

route_status_of!(GrpcRouteStatus, TlsRouteStatus);

impl RouteKind for HttpRoute {
    type Rule = crate::kinds::httproute::HttpRouteRules;

    fn parent_refs(&self) -> impl Iterator<Item = ParentRef<'_>> {
        self.spec
            .parent_refs
            .iter()
            .flatten()
            .map(|p| parent_ref!(p))
    }

    fn hostnames(&self) -> Option<&[String]> {
        Some(self.spec.hostnames.as_deref().unwrap_or_default())
    }

    fn rules(&self) -> &[Self::Rule] {
        self.spec.rules.as_deref().unwrap_or_default()
    }

    fn backend_refs(rule: &Self::Rule) -> impl Iterator<Item = BackendRef<'_>> {
        rule.backend_refs.iter().flatten().map(|b| backend_ref!(b))
    }

    fn route_status(&self) -> Option<Cow<'_, RouteStatus>> {
        self.status.as_ref().map(Cow::Borrowed)
    }
}

impl RouteKind for GrpcRoute {
    type Rule = gateway_api::apis::standard::grpcroutes::GrpcRouteRules;

    fn parent_refs(&self) -> impl Iterator<Item = ParentRef<'_>> {
        self.spec
            .parent_refs
            .iter()
            .flatten()
            .map(|p| parent_ref!(p))
    }

    fn hostnames(&self) -> Option<&[String]> {
        Some(self.spec.hostnames.as_deref().unwrap_or_default())
    }

    fn rules(&self) -> &[Self::Rule] {
        self.spec.rules.as_deref().unwrap_or_default()
    }

    fn backend_refs(rule: &Self::Rule) -> impl Iterator<Item = BackendRef<'_>> {
        rule.backend_refs.iter().flatten().map(|b| backend_ref!(b))
    }

    fn route_status(&self) -> Option<Cow<'_, RouteStatus>> {
        let status = self.status.as_ref()?;
        Some(Cow::Owned(status.to_route_status()))
    }
}

impl RouteKind for TlsRoute {
    type Rule = gateway_api::apis::standard::tlsroutes::TlsRouteRules;

    fn parent_refs(&self) -> impl Iterator<Item = ParentRef<'_>> {
        self.spec
            .parent_refs
            .iter()
            .flatten()
            .map(|p| parent_ref!(p))
    }

    fn hostnames(&self) -> Option<&[String]> {
        Some(&self.spec.hostnames)
    }

    fn rules(&self) -> &[Self::Rule] {
        &self.spec.rules
    }

    fn backend_refs(rule: &Self::Rule) -> impl Iterator<Item = BackendRef<'_>> {
        rule.backend_refs.iter().map(|b| backend_ref!(b))
    }

    fn route_status(&self) -> Option<Cow<'_, RouteStatus>> {
        let status = self.status.as_ref()?;
        Some(Cow::Owned(status.to_route_status()))
    }
}

/// [`RouteKind`] for a route type with the v1 L4 spec ([`super::l4`]): parentRefs, rules of
/// weighted backendRefs, no hostnames, and [`RouteStatus`] as its status.
macro_rules! l4_route_kind {
    ($($ty:ty),*) => {$(
        impl crate::kinds::routes::RouteKind for $ty {
            type Rule = crate::kinds::l4::L4Rule;

            fn parent_refs(
                &self,
            ) -> impl Iterator<Item = crate::kinds::routes::ParentRef<'_>> {
                self.spec.parent_refs.iter().flatten().map(|p| crate::kinds::routes::parent_ref!(p))
            }

            fn hostnames(&self) -> Option<&[String]> {
                None
            }

            fn rules(&self) -> &[Self::Rule] {
                &self.spec.rules
            }

            fn backend_refs(
                rule: &Self::Rule,
            ) -> impl Iterator<Item = crate::kinds::routes::BackendRef<'_>> {
                rule.backend_refs.iter().map(|b| crate::kinds::routes::backend_ref!(b))
            }

            fn route_status(
                &self,
            ) -> Option<std::borrow::Cow<'_, crate::kinds::routes::RouteStatus>> {
                self.status.as_ref().map(std::borrow::Cow::Borrowed)
            }
        }
    )*};
}
#[cfg_attr(not(test), allow(unused_imports))]
pub(crate) use l4_route_kind;

l4_route_kind!(TcpRoute, UdpRoute);

#[cfg(test)]
mod tests {
    use super::*;

    struct Name;
    impl RouteVisitor for Name {
        type Out = (String, RouteKindId);
        fn route<K: RouteKind>(self) -> Self::Out {
            (K::kind(&()).into_owned(), K::ID)
        }
    }

    #[test]
    fn each_declared_name_is_its_types_kind() {
        for &id in RouteKindId::ALL {
            assert_eq!(id.visit(Name), (id.as_str().to_owned(), id));
            assert_eq!(id.as_str().parse::<RouteKindId>(), Ok(id));
        }
        assert!("Gateway".parse::<RouteKindId>().is_err());
    }

    #[test]
    fn a_tlsroute_status_converts_field_by_field() {
        let tls: TlsRouteStatus = serde_json::from_value(serde_json::json!({"parents": [
            {"controllerName": "x/y", "parentRef": {"name": "gw", "port": 443, "sectionName": "s"},
             "conditions": [{"type": "Accepted", "status": "True", "reason": "A", "message": "",
                             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}))
        .unwrap();
        let converted = serde_json::to_value(tls.to_route_status()).unwrap();
        assert_eq!(converted, serde_json::to_value(&tls).unwrap());
    }
}
