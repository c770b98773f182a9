//! The HTTPRoute as edgeplane keeps it: the Gateway API v1 HTTPRoute (experimental channel, so
//! every field the translator reads) with its lists as boxed slices, the strings of its
//! references, rule names and match paths as `Box<str>`, and a rule's rare parts (retry,
//! session persistence, timeouts) boxed, so that a route held in the snapshot costs what it
//! says rather than what the largest rule could say. It reads and writes the same JSON and
//! YAML as the gateway-api crate's type; every other part of the route (filters, a match's
//! headers and query parameters, the status) is that crate's type, re-exported here so that
//! the translator names one module. Types only.

pub use gateway_api::apis::experimental::httproutes::*;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an HTTPRoute; [`HttpRoute`] is the object.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "HTTPRoute",
    root = "HttpRoute",
    plural = "httproutes",
    namespaced,
    status = "HttpRouteStatus",
    derive = "Default",
    derive = "PartialEq",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostnames: Option<Box<[String]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_refs: Option<Box<[HttpRouteParentRefs]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Box<[HttpRouteRules]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_default_gateways: Option<HttpRouteUseDefaultGateways>,
}

/// A parentRef of an HTTPRoute (the fields every route kind's parentRefs have).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteParentRefs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Box<str>>,
    pub name: Box<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<Box<str>>,
}

/// One rule of an HTTPRoute: its matches, filters and backends; retry, session persistence and
/// timeouts, which few rules set, behind a pointer each.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_refs: Option<Box<[HttpRouteRulesBackendRefs]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Box<[HttpRouteRulesFilters]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Box<[HttpRouteRulesMatches]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Box<HttpRouteRulesRetry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_persistence: Option<Box<HttpRouteRulesSessionPersistence>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<Box<HttpRouteRulesTimeouts>>,
}

/// A backendRef of an HTTPRoute rule, with the filters applied to requests sent to it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteRulesBackendRefs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Box<[HttpRouteRulesBackendRefsFilters]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Box<str>>,
    pub name: Box<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// One match of an HTTPRoute rule: path, method, headers and query parameters, all of which
/// must hold.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteRulesMatches {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Box<[HttpRouteRulesMatchesHeaders]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<HttpRouteRulesMatchesMethod>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<HttpRouteRulesMatchesPath>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_params: Option<Box<[HttpRouteRulesMatchesQueryParams]>>,
}

/// The path a match requires: its kind and value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct HttpRouteRulesMatchesPath {
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "type")]
    pub r#type: Option<HttpRouteRulesMatchesPathType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Box<str>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    /// The sizes a route in the snapshot is made of; a field that grows one shows here.
    #[test]
    fn the_compact_types_keep_their_size() {
        use std::mem::size_of;
        assert_eq!(
            (
                size_of::<HttpRoute>(),
                size_of::<HttpRouteSpec>(),
                size_of::<HttpRouteParentRefs>(),
                size_of::<HttpRouteRules>(),
                size_of::<HttpRouteRulesBackendRefs>(),
                size_of::<HttpRouteRulesMatches>(),
            ),
            (440, 56, 88, 88, 96, 64)
        );
    }

    /// The same document reads into this type and into the gateway-api crate's, and both
    /// write it back alike: the compact form changes what is held, not what is read or written.
    #[test]
    fn reads_and_writes_what_the_gateway_api_type_does() {
        let yaml = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: ns, generation: 2}\nspec:\n  parentRefs: [{name: gw, sectionName: web, port: 80}]\n  hostnames: [a.example]\n  rules:\n  - name: first\n    matches: [{path: {type: PathPrefix, value: /a}, method: GET, headers: [{name: h, value: v}], queryParams: [{type: Exact, name: q, value: w}]}]\n    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x, value: y}]}}]\n    backendRefs: [{name: svc, port: 80, weight: 3, filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {remove: [z]}}]}]\n    timeouts: {request: 10s}\n    retry: {attempts: 2, codes: [503]}\n    sessionPersistence: {type: Cookie, sessionName: s}\nstatus:\n  parents: [{controllerName: x/y, parentRef: {name: gw}, conditions: []}]\n";
        let ours: HttpRoute = serde_yaml_ng::from_str(yaml).unwrap();
        let theirs: gateway_api::apis::experimental::httproutes::HttpRoute =
            serde_yaml_ng::from_str(yaml).unwrap();
        assert_eq!(
            serde_json::to_value(&ours).unwrap(),
            serde_json::to_value(&theirs).unwrap()
        );
        let rule = &ours.spec.rules.as_deref().unwrap()[0];
        assert_eq!(rule.retry.as_ref().and_then(|r| r.attempts), Some(2));
        assert_eq!(&*ours.spec.parent_refs.as_deref().unwrap()[0].name, "gw");
        assert_eq!(HttpRoute::api_version(&()), "gateway.networking.k8s.io/v1");
        assert_eq!(HttpRoute::plural(&()), "httproutes");
    }
}
