//! GRPCRoutes for the Ingresses of `backend-protocol: GRPC` or `GRPCS`: when every rule of
//! such an Ingress can be said as a GRPCRoute rule (paths `/pkg.Service/Method`, `/pkg.Service`
//! and `/` as gRPC method matches; only header edits and mirrors as filters; no TrafficPolicy,
//! which targets HTTPRoutes only), its routes are written as GRPCRoutes, which the table
//! speaks HTTP/2 to the backends of without the Service's `appProtocol`. Otherwise the
//! HTTPRoute is kept and the report says why. A GRPCRoute and an HTTPRoute sharing a listener
//! and a hostname conflict (the GRPCRoute spec keeps only one), so an Ingress whose hosts meet
//! those of an Ingress written as HTTPRoutes keeps its HTTPRoutes too ([`settle`]). Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Map, Value};

use super::names::covers;
use crate::kinds::ingress::serving_gateway;
use crate::snapshot::namespace_of;
use crate::translate::ingress::annotations::Annotations;
use crate::translate::ingress::upstream::Protocol;
use crate::translate::lowered::lowered;

/// `(namespace, name)` of an Ingress.
pub type Key = (String, String);

/// What becomes of one gRPC Ingress: `Ok` written as GRPCRoutes, `Err` kept as HTTPRoutes,
/// with why.
pub type Choice = Result<(), String>;

/// HTTPRoute filter types a GRPCRoute rule (or backendRef) has too.
const GRPC_FILTERS: &[&str] = &[
    "RequestHeaderModifier",
    "ResponseHeaderModifier",
    "RequestMirror",
];

/// Whether `ingress` asks for gRPC to its backends (`backend-protocol` GRPC or GRPCS).
pub fn asks_grpc(ingress: &Ingress) -> bool {
    matches!(
        Annotations::parse(ingress).upstream.protocol,
        Some(Protocol::Grpc | Protocol::Grpcs)
    )
}

fn key(ingress: &Ingress) -> Key {
    (
        namespace_of(&ingress.metadata).to_owned(),
        ingress.metadata.name.clone().unwrap_or_default(),
    )
}

/// Whether the prepared Ingress `ingress` can be written as GRPCRoutes, on its own.
fn convertible(ingress: &Ingress) -> Choice {
    if Annotations::parse(ingress).traffic_policy().is_some() {
        return Err(
            "its TrafficPolicy (access lists, body size, authentication, rate limit) targets HTTPRoutes only"
                .to_owned(),
        );
    }
    let low = lowered(ingress);
    for rule in low.route.spec.rules.iter().flatten() {
        rule_of(&serde_json::to_value(rule).unwrap_or_default())?;
    }
    Ok(())
}

/// The choice for every gRPC Ingress of `ingresses` (prepared): GRPCRoutes when each of its
/// rules has a GRPCRoute form and none of its hosts meets a host of another Ingress of its
/// IngressClass written as HTTPRoutes. An Ingress falling back can make another meet one, so
/// this repeats until nothing changes (at most once per Ingress).
pub fn settle(ingresses: &[Arc<Ingress>]) -> BTreeMap<Key, Choice> {
    let hosts: Vec<(Key, Option<String>, Vec<String>)> = ingresses
        .iter()
        .map(|i| {
            let class = serving_gateway(i).map(|(_, c)| c.to_owned());
            (key(i), class, lowered(i).rule_hosts)
        })
        .collect();
    let mut out: BTreeMap<Key, Choice> = ingresses
        .iter()
        .filter(|i| asks_grpc(i))
        .map(|i| (key(i), convertible(i)))
        .collect();
    for _ in 0..=out.len() {
        let mut changed = false;
        for (k, class, mine) in &hosts {
            if !matches!(out.get(k), Some(Ok(()))) {
                continue;
            }
            let met = hosts.iter().find_map(|(other, c, theirs)| {
                let http = !matches!(out.get(other), Some(Ok(())));
                let host = mine
                    .iter()
                    .find(|h| theirs.iter().any(|t| covers(Some(h), t)))?;
                (http && other != k && c == class).then_some((other, host))
            });
            if let Some(((ns, name), host)) = met {
                out.insert(
                    k.clone(),
                    Err(format!(
                        "host {host} is also served by Ingress {ns}/{name}, written as HTTPRoutes \
                         (a GRPCRoute and an HTTPRoute on one listener and host conflict)"
                    )),
                );
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    out
}

/// The GRPCRoute form of the HTTPRoute rules `rules` (as written), or why there is none.
pub fn rules(rules: &[Value]) -> Result<Vec<Value>, String> {
    rules.iter().map(rule_of).collect()
}

/// One HTTPRoute rule as a GRPCRoute rule.
fn rule_of(rule: &Value) -> Result<Value, String> {
    let mut out = Map::new();
    for (field, value) in rule.as_object().into_iter().flatten() {
        match field.as_str() {
            "matches" => {
                let matches = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(match_of)
                    .collect::<Result<Vec<Value>, String>>()?;
                // A rule matching every gRPC call has no matches.
                if !matches.iter().all(|m| m == &json!({})) {
                    out.insert(field.clone(), json!(matches));
                }
            }
            "filters" => {
                filters(value)?;
                out.insert(field.clone(), value.clone());
            }
            "backendRefs" => {
                for b in value.as_array().into_iter().flatten() {
                    if let Some(f) = b.get("filters") {
                        filters(f)?;
                    }
                }
                out.insert(field.clone(), value.clone());
            }
            "name" => {
                out.insert(field.clone(), value.clone());
            }
            other => return Err(format!("rule field {other} has no GRPCRoute form")),
        }
    }
    Ok(Value::Object(out))
}

fn filters(list: &Value) -> Result<(), String> {
    for f in list.as_array().into_iter().flatten() {
        let kind = f["type"].as_str().unwrap_or_default();
        if !GRPC_FILTERS.contains(&kind) {
            return Err(format!("filter {kind} has no GRPCRoute form"));
        }
    }
    Ok(())
}

/// A gRPC service name (`pkg.Service`), as the GRPCRoute CRD takes it.
fn is_service(s: &str) -> bool {
    let s = s.strip_prefix('.').unwrap_or(s);
    !s.is_empty()
        && s.split('.').all(|part| {
            part.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// A gRPC method name.
fn is_method(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One HTTPRoute match as a GRPCRoute match: `Exact /S/M` and `PathPrefix /S/M` (a gRPC
/// call's path has two segments) as service and method, `PathPrefix /S` as the service,
/// `PathPrefix /` as any call; header matches as they are.
fn match_of(m: &Value) -> Result<Value, String> {
    let mut out = Map::new();
    for (field, value) in m.as_object().into_iter().flatten() {
        match field.as_str() {
            "path" => {
                let kind = value["type"].as_str().unwrap_or("PathPrefix");
                let path = value["value"].as_str().unwrap_or("/");
                let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
                let exact = kind == "Exact";
                let why = || format!("path {path} ({kind}) is not a gRPC service or method");
                let method = match (kind, parts.as_slice()) {
                    ("PathPrefix", []) => None,
                    ("PathPrefix", [s]) if is_service(s) => Some(json!({"service": s})),
                    (_, [s, m])
                        if !(exact && path.ends_with('/')) && is_service(s) && is_method(m) =>
                    {
                        Some(json!({"service": s, "method": m}))
                    }
                    _ => return Err(why()),
                };
                if let Some(mut method) = method {
                    method["type"] = json!("Exact");
                    out.insert("method".to_owned(), method);
                }
            }
            "headers" => {
                out.insert(field.clone(), value.clone());
            }
            other => return Err(format!("match on {other} has no GRPCRoute form")),
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(kind: &str, value: &str) -> Value {
        json!({"path": {"type": kind, "value": value}})
    }

    #[test]
    fn paths_become_methods_or_say_why_not() {
        assert_eq!(
            match_of(&path("Exact", "/helloworld.Greeter/SayHello")),
            Ok(
                json!({"method": {"type": "Exact", "service": "helloworld.Greeter", "method": "SayHello"}})
            )
        );
        assert_eq!(
            match_of(&path("PathPrefix", "/helloworld.Greeter/SayHello")),
            Ok(
                json!({"method": {"type": "Exact", "service": "helloworld.Greeter", "method": "SayHello"}})
            )
        );
        for service in ["/helloworld.Greeter", "/helloworld.Greeter/"] {
            assert_eq!(
                match_of(&path("PathPrefix", service)),
                Ok(json!({"method": {"type": "Exact", "service": "helloworld.Greeter"}}))
            );
        }
        assert_eq!(match_of(&path("PathPrefix", "/")), Ok(json!({})));
        for (kind, p) in [
            ("Exact", "/helloworld.Greeter"),
            ("Exact", "/"),
            ("PathPrefix", "/a/b/c"),
            ("PathPrefix", "/api-v1"),
            ("PathPrefix", "/pkg.Service/Say-Hello"),
            ("RegularExpression", "/pkg.Service/.*"),
        ] {
            let why = match_of(&path(kind, p)).expect_err(p);
            assert!(why.contains("not a gRPC service or method"), "{why}");
        }
        let query = json!({"path": {"type": "PathPrefix", "value": "/"},
                           "queryParams": [{"name": "a", "value": "b"}]});
        assert!(match_of(&query).is_err());
    }

    #[test]
    fn rules_keep_grpc_filters_and_refuse_the_others() {
        let rule = json!({"matches": [path("PathPrefix", "/")],
            "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "a", "value": "b"}]}}],
            "backendRefs": [{"name": "s", "port": 50051}]});
        let out = rules(std::slice::from_ref(&rule)).expect("convertible");
        assert_eq!(out[0].get("matches"), None);
        assert_eq!(out[0]["filters"], rule["filters"]);
        let timeouts = json!({"backendRefs": [], "timeouts": {"backendRequest": "5s"}});
        assert_eq!(
            rule_of(&timeouts),
            Err("rule field timeouts has no GRPCRoute form".to_owned())
        );
        let cors = json!({"filters": [{"type": "CORS", "cors": {}}]});
        assert_eq!(
            rule_of(&cors),
            Err("filter CORS has no GRPCRoute form".to_owned())
        );
    }
}
