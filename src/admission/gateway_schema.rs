//! The structural schemas of the Gateway API kinds edgeplane reads, produced from the
//! gateway-api crate's types (`CustomResourceExt::crd()`, derived by schemars) rather than
//! written out: every field the crate knows, its type, `required`, `enum` and map values. The
//! derived schema is brought to the shape of a CRD's structural schema by one pass (no
//! descriptions, titles or `nullable`, no `null` in enums), so an object is held to it as the
//! API server holds an object to its CRD: a field it does not declare is refused. Pure.

use gateway_api::apis::experimental as x;
use gateway_api::apis::standard;
use kube::CustomResourceExt;
use serde_json::Value;

use super::CrdError;

/// The derived openAPIV3Schema of `kind` (a Gateway API kind, as manifests spell it), made
/// structural. The experimental channel's types are used wherever the crate has them: they
/// carry every standard field too, so nothing valid in either channel is refused. TCPRoute and
/// UDPRoute come from the crate's `v1alpha2` types, whose fields are those of `v1`.
pub(crate) fn schema(kind: &str) -> Result<Value, CrdError> {
    let crd = match kind {
        "GatewayClass" => x::gatewayclasses::GatewayClass::crd(),
        "Gateway" => x::gateways::Gateway::crd(),
        "ListenerSet" => x::listenersets::ListenerSet::crd(),
        "HTTPRoute" => x::httproutes::HttpRoute::crd(),
        "GRPCRoute" => x::grpcroutes::GrpcRoute::crd(),
        "TLSRoute" => x::tlsroutes::TlsRoute::crd(),
        "TCPRoute" => x::tcproutes::TcpRoute::crd(),
        "UDPRoute" => x::udproutes::UdpRoute::crd(),
        "ReferenceGrant" => x::referencegrants::ReferenceGrant::crd(),
        "BackendTLSPolicy" => standard::backendtlspolicies::BackendTlsPolicy::crd(),
        other => {
            return Err(CrdError::BadSchema {
                path: format!("built-in {other}"),
                reason: "no Gateway API type for this kind".to_owned(),
            })
        }
    };
    let mut schema = crd
        .spec
        .versions
        .into_iter()
        .next()
        .and_then(|v| v.schema)
        .and_then(|s| s.open_api_v3_schema)
        .and_then(|s| serde_json::to_value(s).ok())
        .ok_or_else(|| CrdError::BadSchema {
            path: format!("built-in {kind}"),
            reason: "the derived CRD has no openAPIV3Schema".to_owned(),
        })?;
    structural(&mut schema);
    Ok(schema)
}

/// Brings a derived schema node (and every node below it) to the form of a CRD's structural
/// schema: documentation dropped; `nullable` dropped, as the upstream CRDs declare no nullable
/// field (so a `null` is pruned by defaulting, as the API server prunes it); the `null` that
/// `Option<enum>` adds to an `enum` removed.
fn structural(node: &mut Value) {
    let Some(map) = node.as_object_mut() else {
        return;
    };
    for key in ["description", "title", "nullable"] {
        map.remove(key);
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        props.values_mut().for_each(structural);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = map.get_mut(key) {
            structural(sub);
        }
    }
}

/// The schema node at `path` (`spec.rules[].matches`, `[]` stepping into list items; empty for
/// the root), or why it does not exist: a path that no longer names a field of the crate's
/// types fails registration instead of being silently skipped.
pub(crate) fn node_at<'a>(schema: &'a mut Value, path: &str) -> Result<&'a mut Value, String> {
    let mut node = schema;
    if path.is_empty() {
        return Ok(node);
    }
    for segment in path.split('.') {
        let (name, items) = match segment.strip_suffix("[]") {
            Some(n) => (n, true),
            None => (segment, false),
        };
        if !name.is_empty() {
            node = node
                .get_mut("properties")
                .and_then(|p| p.get_mut(name))
                .ok_or_else(|| format!("{path}: no field {name:?}"))?;
        }
        if items {
            node = node
                .get_mut("items")
                .ok_or_else(|| format!("{path}: {name:?} is not a list"))?;
        }
    }
    Ok(node)
}

/// Merges `addition` (an object of schema keywords) into the node at `path`: keywords are set,
/// except `x-kubernetes-validations`, whose rules are appended to any already there.
pub(crate) fn add(schema: &mut Value, path: &str, addition: &Value) -> Result<(), String> {
    let node = node_at(schema, path)?;
    let Some(map) = node.as_object_mut() else {
        return Err(format!("{path}: schema node is not an object"));
    };
    let Some(addition) = addition.as_object() else {
        return Err(format!("{path}: addition is not an object"));
    };
    for (key, value) in addition {
        match (key.as_str(), value) {
            ("x-kubernetes-validations", Value::Array(rules)) => {
                let list = map
                    .entry(key.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(existing) = list {
                    existing.extend(rules.iter().cloned());
                }
            }
            _ => {
                map.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    /// Every property path of a schema (`spec.rules[].name`), for tests that compare field sets.
    fn field_paths(schema: &Value, path: &str, out: &mut Vec<String>) {
        let empty = Map::new();
        let props = schema
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for (name, sub) in props {
            let p = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            out.push(p.clone());
            field_paths(sub, &p, out);
        }
        if let Some(items) = schema.get("items") {
            field_paths(items, &format!("{path}[]"), out);
        }
    }

    #[test]
    fn derived_schemas_are_structural() {
        fn check(node: &Value, path: &str) {
            let map = node.as_object().expect("schema node is an object");
            for key in [
                "description",
                "title",
                "nullable",
                "anyOf",
                "oneOf",
                "allOf",
            ] {
                assert!(!map.contains_key(key), "{path}: {key} left in");
            }
            assert!(map.contains_key("type"), "{path}: no type");
            if let Some(values) = map.get("enum").and_then(Value::as_array) {
                assert!(values.iter().all(|v| !v.is_null()), "{path}: null in enum");
            }
            for (k, v) in map
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                check(v, &format!("{path}.{k}"));
            }
            for key in ["items", "additionalProperties"] {
                if let Some(sub) = map.get(key).filter(|s| s.is_object()) {
                    check(sub, &format!("{path}.{key}"));
                }
            }
        }
        for kind in [
            "GatewayClass",
            "Gateway",
            "ListenerSet",
            "HTTPRoute",
            "GRPCRoute",
            "TLSRoute",
            "TCPRoute",
            "UDPRoute",
            "ReferenceGrant",
            "BackendTLSPolicy",
        ] {
            let s = schema(kind).unwrap();
            check(&s, kind);
        }
        assert!(schema("Service").is_err());
    }

    #[test]
    fn paths_name_fields_and_additions_merge() {
        let mut s = schema("HTTPRoute").unwrap();
        assert_eq!(
            node_at(&mut s, "spec.rules[].backendRefs[].weight").unwrap()["type"],
            "integer"
        );
        let err = node_at(&mut s, "spec.rules[].backendRef").unwrap_err();
        assert!(err.contains("no field \"backendRef\""), "{err}");
        assert!(node_at(&mut s, "spec.hostnames[].x").is_err());
        let rule = serde_json::json!({"x-kubernetes-validations": [{"rule": "true"}]});
        add(&mut s, "spec", &rule).unwrap();
        add(&mut s, "spec", &rule).unwrap();
        let spec = node_at(&mut s, "spec").unwrap();
        assert_eq!(
            spec["x-kubernetes-validations"].as_array().unwrap().len(),
            2
        );
        let mut paths = Vec::new();
        field_paths(&s, "", &mut paths);
        assert!(paths.contains(&"spec.rules[].backendRefs[].weight".to_owned()));
    }
}
