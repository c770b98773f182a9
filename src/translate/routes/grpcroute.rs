//! GRPCRoute: how a GRPCRoute becomes the same compiled rules an HTTPRoute does. Its parentRefs,
//! hostnames, filters and backendRefs have the HTTPRoute's fields, so the route is lowered to an
//! HTTPRoute without matches (attachment, filters, backends and status are then shared), and its
//! matches are compiled here: a gRPC condition (`GrpcMatch`) plus a path that lets the host's
//! path index find it in the GRPCRoute spec's precedence. Pure.

use crate::kinds::httproute::{HttpRoute, HttpRouteSpec};
use gateway_api::apis::standard::grpcroutes::{
    GrpcRoute, GrpcRouteRulesMatches, GrpcRouteRulesMatchesHeadersType as HType,
    GrpcRouteRulesMatchesMethodType as MType,
};
use http::HeaderName;

use crate::table::{GrpcMatch, HeaderMatch, PathMatch, Regex, RequestMatch, ValueMatch};
use crate::translate::routes::http_like::HttpLike;
use crate::translate::routes::rules::MatchError;

impl HttpLike for GrpcRoute {
    fn lower(&self) -> HttpRoute {
        lower(self)
    }

    fn own_matches(&self, index: usize) -> Option<Result<Vec<RequestMatch>, MatchError>> {
        Some(rule_matches(self, index))
    }
}

/// The HTTPRoute with the GRPCRoute's metadata, parentRefs, hostnames and rules (names,
/// filters, backendRefs), and no matches: everything the shared compilation and attachment
/// read besides matches, which [`compile_grpc_match`] compiles from the GRPCRoute itself.
pub fn lower(route: &GrpcRoute) -> HttpRoute {
    let mut spec = serde_json::to_value(&route.spec).unwrap_or_default();
    if let Some(rules) = spec.get_mut("rules").and_then(|r| r.as_array_mut()) {
        for rule in rules {
            if let Some(rule) = rule.as_object_mut() {
                rule.remove("matches");
                rule.remove("sessionPersistence");
            }
        }
    }
    // Every field left has the same JSON shape in both kinds, so this does not fail for a
    // valid GRPCRoute; should it, the route keeps its metadata and attaches nowhere.
    let spec: HttpRouteSpec = serde_json::from_value(spec).unwrap_or_default();
    HttpRoute {
        metadata: route.metadata.clone(),
        spec,
        status: None,
    }
}

/// The matchers of rule `index` of `route` (one per `matches[]` entry; absent or empty
/// matches match every gRPC call).
pub fn rule_matches(route: &GrpcRoute, index: usize) -> Result<Vec<RequestMatch>, MatchError> {
    let rule = route.spec.rules.as_deref().and_then(|r| r.get(index));
    match rule.and_then(|r| r.matches.as_deref()) {
        Some(m) if !m.is_empty() => m.iter().map(compile_grpc_match).collect(),
        _ => compile_grpc_match(&GrpcRouteRulesMatches::default()).map(|m| vec![m]),
    }
}

fn regex(value: &str) -> Result<Regex, MatchError> {
    Regex::new(value).map_err(|e| MatchError::Regex {
        value: value.to_owned(),
        error: e.to_string(),
    })
}

/// Compiles one GRPCRoute `matches[]` entry. The path narrows the index lookup: an exact
/// service and method is the exact path `/service/method`, an exact service the prefix
/// `/service`, anything else the prefix `/`; the gRPC condition decides.
pub fn compile_grpc_match(m: &GrpcRouteRulesMatches) -> Result<RequestMatch, MatchError> {
    let method = m.method.as_ref();
    let exact = method.is_none_or(|m| m.r#type.as_ref().is_none_or(|t| *t == MType::Exact));
    let part = |v: Option<&String>| -> Result<Option<ValueMatch>, MatchError> {
        match v.filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) if exact => Ok(Some(ValueMatch::Exact(v.clone()))),
            Some(v) => Ok(Some(ValueMatch::RegularExpression(regex(v)?))),
        }
    };
    let grpc = GrpcMatch {
        service: part(method.and_then(|m| m.service.as_ref()))?,
        method: part(method.and_then(|m| m.method.as_ref()))?,
    };
    let path = match (&grpc.service, &grpc.method) {
        (Some(ValueMatch::Exact(s)), Some(ValueMatch::Exact(m))) => {
            PathMatch::Exact(format!("/{s}/{m}"))
        }
        (Some(ValueMatch::Exact(s)), _) => PathMatch::prefix(&format!("/{s}")),
        _ => PathMatch::prefix("/"),
    };
    let mut headers: Vec<HeaderMatch> = Vec::new();
    for h in m.headers.iter().flatten() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| MatchError::HeaderName(h.name.clone()))?;
        if headers.iter().any(|x| x.name == name) {
            continue;
        }
        let value = match h.r#type.as_ref().unwrap_or(&HType::Exact) {
            HType::Exact => ValueMatch::Exact(h.value.clone()),
            HType::RegularExpression => ValueMatch::RegularExpression(regex(&h.value)?),
        };
        headers.push(HeaderMatch { name, value });
    }
    Ok(RequestMatch {
        path,
        method: None,
        headers: headers.into_boxed_slice(),
        query: Box::default(),
        grpc: Some(Box::new(grpc)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(yaml: &str) -> Result<RequestMatch, MatchError> {
        compile_grpc_match(&serde_yaml_ng::from_str(yaml).unwrap())
    }

    fn path(m: &RequestMatch) -> String {
        serde_json::to_string(&m.path).unwrap()
    }

    /// Each method match, its index path and its gRPC condition.
    #[test]
    fn method_matches_become_paths_and_grpc_conditions() {
        let cases = [
            (
                "{method: {service: a.B, method: Get}}",
                r#"{"type":"Exact","value":"/a.B/Get"}"#,
                r#"{"service":{"type":"Exact","value":"a.B"},"method":{"type":"Exact","value":"Get"}}"#,
            ),
            (
                "{method: {type: Exact, service: a.B}}",
                r#"{"type":"Prefix","value":"/a.B"}"#,
                r#"{"service":{"type":"Exact","value":"a.B"}}"#,
            ),
            (
                "{method: {method: Get}}",
                r#"{"type":"Prefix","value":"/"}"#,
                r#"{"method":{"type":"Exact","value":"Get"}}"#,
            ),
            (
                "{method: {type: RegularExpression, service: 'a\\..*', method: 'G.t'}}",
                r#"{"type":"Prefix","value":"/"}"#,
                r#"{"service":{"type":"RegularExpression","value":"a\\..*"},"method":{"type":"RegularExpression","value":"G.t"}}"#,
            ),
            ("{}", r#"{"type":"Prefix","value":"/"}"#, "{}"),
        ];
        for (yaml, want_path, want_grpc) in cases {
            let m = compile(yaml).unwrap();
            assert_eq!(path(&m), want_path, "{yaml}");
            assert_eq!(
                serde_json::to_string(m.grpc.as_ref().unwrap()).unwrap(),
                want_grpc,
                "{yaml}"
            );
        }
    }

    #[test]
    fn headers_keep_the_first_of_a_name_and_bad_input_is_an_error() {
        let m = compile("{headers: [{name: X-A, value: '1'}, {name: x-a, value: '2'}, {name: x-b, type: RegularExpression, value: 'v.*'}]}").unwrap();
        assert_eq!(m.headers.len(), 2);
        assert!(matches!(&m.headers[0].value, ValueMatch::Exact(v) if v == "1"));
        assert!(matches!(
            compile("{method: {type: RegularExpression, service: '(['}}"),
            Err(MatchError::Regex { .. })
        ));
        assert!(matches!(
            compile("{headers: [{name: 'bad name', value: x}]}"),
            Err(MatchError::HeaderName(_))
        ));
    }

    #[test]
    fn lowering_keeps_everything_but_matches() {
        let route: GrpcRoute = serde_yaml_ng::from_str(
            "
metadata: {name: r, namespace: ns}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  hostnames: [grpc.example.com]
  rules:
  - name: first
    matches: [{method: {service: a.B}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-a, value: '1'}]}
    backendRefs: [{name: svc, port: 50051, weight: 3}]
",
        )
        .unwrap();
        let lowered = lower(&route);
        assert_eq!(lowered.metadata.name.as_deref(), Some("r"));
        let spec = serde_json::to_value(&lowered.spec).unwrap();
        assert_eq!(
            spec,
            serde_json::json!({
                "parentRefs": [{"name": "gw", "sectionName": "http"}],
                "hostnames": ["grpc.example.com"],
                "rules": [{
                    "name": "first",
                    "filters": [{"type": "RequestHeaderModifier",
                        "requestHeaderModifier": {"set": [{"name": "x-a", "value": "1"}]}}],
                    "backendRefs": [{"name": "svc", "port": 50051, "weight": 3}]
                }]
            })
        );
        assert_eq!(rule_matches(&route, 0).unwrap().len(), 1);
        assert_eq!(
            rule_matches(&route, 5).unwrap().len(),
            1,
            "absent rule: match all"
        );
    }
}
