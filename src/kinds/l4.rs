//! The Gateway API v1 TCPRoute and UDPRoute types. Both are standard `v1` kinds since Gateway
//! API v1.6; the gateway-api crate has them only as experimental `v1alpha2` types, so they are
//! declared here, with the fields the v1 CRDs define. The file provider reads any version of
//! the group's kinds into them. Their status has the shape every route kind shares, which is
//! the shape of [`HttpRouteStatus`]. Types only.

use crate::kinds::httproute::HttpRouteStatus;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// A parentRef of a TCPRoute or UDPRoute (the fields every route kind's parentRefs have).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct L4ParentRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
}

/// A backendRef of a TCPRoute or UDPRoute rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct L4BackendRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// One rule of a TCPRoute or UDPRoute: where its connections or datagrams go.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct L4Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub backend_refs: Vec<L4BackendRef>,
}

/// `spec` of a TCPRoute: connections on a TCP listener go to the weighted backends of its rule.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "TCPRoute",
    root = "TcpRoute",
    plural = "tcproutes",
    namespaced,
    status = "HttpRouteStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct TcpRouteSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_refs: Option<Vec<L4ParentRef>>,
    #[serde(default)]
    pub rules: Vec<L4Rule>,
}

/// `spec` of a UDPRoute: datagrams on a UDP listener go to the weighted backends of its rule.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "UDPRoute",
    root = "UdpRoute",
    plural = "udproutes",
    namespaced,
    status = "HttpRouteStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct UdpRouteSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_refs: Option<Vec<L4ParentRef>>,
    #[serde(default)]
    pub rules: Vec<L4Rule>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn kinds_are_the_v1_standard_ones() {
        assert_eq!(TcpRoute::api_version(&()), "gateway.networking.k8s.io/v1");
        assert_eq!(TcpRoute::plural(&()), "tcproutes");
        assert_eq!(UdpRoute::kind(&()), "UDPRoute");
        let r: TcpRoute = serde_yaml_ng::from_str(
            "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TCPRoute\nmetadata: {name: r}\nspec:\n  parentRefs: [{name: gw, sectionName: tcp, port: 9000}]\n  rules: [{backendRefs: [{name: svc, port: 80, weight: 2}]}]\n",
        )
        .unwrap();
        assert_eq!(r.spec.parent_refs.unwrap()[0].port, Some(9000));
        assert_eq!(r.spec.rules[0].backend_refs[0].weight, Some(2));
    }
}
