//! The kinds whose status the translator computes, as a type: the report, the status writer
//! and readers of `/debug/status` dispatch on it exhaustively instead of on kind names. Pure.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The API group of every Gateway API kind.
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";
/// `apiVersion` of every Gateway API kind whose status is computed.
pub const API_VERSION: &str = "gateway.networking.k8s.io/v1";
/// `apiVersion` of a TrafficPolicy (its storage version).
pub const TRAFFIC_POLICY_API_VERSION: &str = "edgeplane.dev/v1beta1";

/// A kind whose status the translator computes. Ordered as reports list them: classes, then
/// Gateways, then routes, then policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ObjectKind {
    GatewayClass,
    Gateway,
    /// Listeners a Gateway takes in from another object: status like a Gateway's.
    ListenerSet,
    #[serde(rename = "HTTPRoute")]
    HttpRoute,
    #[serde(rename = "GRPCRoute")]
    GrpcRoute,
    #[serde(rename = "TLSRoute")]
    TlsRoute,
    #[serde(rename = "TCPRoute")]
    TcpRoute,
    #[serde(rename = "UDPRoute")]
    UdpRoute,
    #[serde(rename = "BackendTLSPolicy")]
    BackendTlsPolicy,
    /// Our own policy kind (`edgeplane.dev`), with a Gateway API `PolicyStatus`.
    TrafficPolicy,
}

/// A kind name that is not one of [`ObjectKind`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no status is computed for kind {0:?}")]
pub struct UnknownKind(pub String);

impl ObjectKind {
    /// Every kind, in report order.
    pub const ALL: [ObjectKind; 10] = [
        Self::GatewayClass,
        Self::Gateway,
        Self::ListenerSet,
        Self::HttpRoute,
        Self::GrpcRoute,
        Self::TlsRoute,
        Self::TcpRoute,
        Self::UdpRoute,
        Self::BackendTlsPolicy,
        Self::TrafficPolicy,
    ];

    /// The kind's name, as in `kind:` of a manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GatewayClass => "GatewayClass",
            Self::Gateway => "Gateway",
            Self::ListenerSet => "ListenerSet",
            Self::HttpRoute => "HTTPRoute",
            Self::GrpcRoute => "GRPCRoute",
            Self::TlsRoute => "TLSRoute",
            Self::TcpRoute => "TCPRoute",
            Self::UdpRoute => "UDPRoute",
            Self::BackendTlsPolicy => "BackendTLSPolicy",
            Self::TrafficPolicy => "TrafficPolicy",
        }
    }

    /// True for route kinds: their status is a list of `parents`, in one shape for every kind.
    pub fn is_route(self) -> bool {
        !matches!(self, Self::GatewayClass | Self::Gateway | Self::ListenerSet)
    }

    /// The `apiVersion` written beside the kind.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::TrafficPolicy => TRAFFIC_POLICY_API_VERSION,
            _ => API_VERSION,
        }
    }

    /// Whether objects of the kind live in a namespace (GatewayClasses are cluster-scoped).
    pub fn namespaced(self) -> bool {
        match self {
            Self::GatewayClass => false,
            Self::Gateway
            | Self::ListenerSet
            | Self::HttpRoute
            | Self::GrpcRoute
            | Self::TlsRoute
            | Self::TcpRoute
            | Self::UdpRoute
            | Self::BackendTlsPolicy
            | Self::TrafficPolicy => true,
        }
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
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order_is_report_order() {
        for k in ObjectKind::ALL {
            assert_eq!(k.as_str().parse::<ObjectKind>(), Ok(k));
            let json = serde_json::to_value(k).unwrap();
            assert_eq!(json, k.as_str());
            assert_eq!(serde_json::from_value::<ObjectKind>(json).unwrap(), k);
        }
        assert_eq!(
            "XListenerSet".parse::<ObjectKind>(),
            Err(UnknownKind("XListenerSet".into()))
        );
        let mut sorted = ObjectKind::ALL;
        sorted.reverse();
        sorted.sort();
        assert_eq!(sorted, ObjectKind::ALL);
        assert!(!ObjectKind::GatewayClass.namespaced());
    }
}
