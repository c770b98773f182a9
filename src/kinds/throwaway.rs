//! A throwaway route kind, compiled into the library's own tests only: it proves that a route
//! kind is added the way the route abstraction says (a line in `route_kinds!`, its
//! `RouteKind` impl, its snapshot field, its rule compiler) and nothing else. It is a TCPRoute
//! by another name: its objects attach to TCP listeners and their connections go to its
//! backends. Types only; its tests are in `crate::provider::route_kind_tests`.

use crate::kinds::httproute::HttpRouteStatus;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

use super::l4::{L4ParentRef, L4Rule};

/// `spec` of a ThrowawayRoute: the fields of a TCPRoute's.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "ThrowawayRoute",
    root = "ThrowawayRoute",
    plural = "throwawayroutes",
    namespaced,
    status = "HttpRouteStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ThrowawayRouteSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_refs: Option<Vec<L4ParentRef>>,
    #[serde(default)]
    pub rules: Vec<L4Rule>,
}

super::routes::l4_route_kind!(ThrowawayRoute);
