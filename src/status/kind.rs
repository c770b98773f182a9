//! The kinds whose status the translator computes, as a type: the report, the status writer
//! and readers of `/debug/status` dispatch on it exhaustively instead of on kind names. Route
//! kinds are those `route_kinds!` declares ([`RouteKindId`]). Pure.

use std::fmt;
use std::str::FromStr;

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use crate::kinds::routes::RouteKindId;

/// The API group of every Gateway API kind.
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";
/// `apiVersion` of every Gateway API kind whose status is computed.
pub const API_VERSION: &str = "gateway.networking.k8s.io/v1";
/// `apiVersion` of a TrafficPolicy (its storage version).
pub const TRAFFIC_POLICY_API_VERSION: &str = "edgeplane.dev/v1beta1";

/// A kind whose status the translator computes. Ordered as reports list them: classes, then
/// Gateways, then routes (in the order `route_kinds!` declares them), then policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    GatewayClass,
    Gateway,
    /// Listeners a Gateway takes in from another object: status like a Gateway's.
    ListenerSet,
    /// A route of any kind: its status is a list of `parents`, in one shape for every kind.
    Route(RouteKindId),
    BackendTlsPolicy,
    /// Our own policy kind (`edgeplane.dev`), with a Gateway API `PolicyStatus`.
    TrafficPolicy,
}

impl From<RouteKindId> for ObjectKind {
    fn from(kind: RouteKindId) -> Self {
        Self::Route(kind)
    }
}

/// A kind name that is not one of [`ObjectKind`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no status is computed for kind {0:?}")]
pub struct UnknownKind(pub String);

impl ObjectKind {
    /// Every kind, in report order.
    pub fn all() -> impl Iterator<Item = ObjectKind> {
        let head = [Self::GatewayClass, Self::Gateway, Self::ListenerSet];
        let routes = RouteKindId::ALL.iter().map(|&k| Self::Route(k));
        head.into_iter()
            .chain(routes)
            .chain([Self::BackendTlsPolicy, Self::TrafficPolicy])
    }

    /// The kind's name, as in `kind:` of a manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GatewayClass => "GatewayClass",
            Self::Gateway => "Gateway",
            Self::ListenerSet => "ListenerSet",
            Self::Route(k) => k.as_str(),
            Self::BackendTlsPolicy => "BackendTLSPolicy",
            Self::TrafficPolicy => "TrafficPolicy",
        }
    }

    /// The route kind, for route kinds.
    pub fn route(self) -> Option<RouteKindId> {
        match self {
            Self::Route(k) => Some(k),
            _ => None,
        }
    }

    /// True for kinds whose status lists `parents` or `ancestors` (routes and policies).
    pub fn is_route(self) -> bool {
        !matches!(self, Self::GatewayClass | Self::Gateway | Self::ListenerSet)
    }

    /// The `apiVersion` written beside the kind.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::TrafficPolicy => TRAFFIC_POLICY_API_VERSION,
            Self::Route(RouteKindId::Ingress) => "networking.k8s.io/v1",
            _ => API_VERSION,
        }
    }

    /// Whether objects of the kind live in a namespace (GatewayClasses are cluster-scoped).
    pub fn namespaced(self) -> bool {
        !matches!(self, Self::GatewayClass)
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ObjectKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::all()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_owned()))
    }
}

impl Serialize for ObjectKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ObjectKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <Cow<'de, str>>::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order_is_report_order() {
        for k in ObjectKind::all() {
            assert_eq!(k.as_str().parse::<ObjectKind>(), Ok(k));
            let json = serde_json::to_value(k).unwrap();
            assert_eq!(json, k.as_str());
            assert_eq!(serde_json::from_value::<ObjectKind>(json).unwrap(), k);
        }
        assert_eq!(
            "XListenerSet".parse::<ObjectKind>(),
            Err(UnknownKind("XListenerSet".into()))
        );
        let all: Vec<ObjectKind> = ObjectKind::all().collect();
        let mut sorted = all.clone();
        sorted.reverse();
        sorted.sort();
        assert_eq!(sorted, all);
        assert!(!ObjectKind::GatewayClass.namespaced());
    }
}
