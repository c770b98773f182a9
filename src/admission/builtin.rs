//! The defaults the Gateway API v1.6 CRDs declare, built in, so that objects read from files are
//! defaulted as a cluster would default them even when no CRD file is loaded (`--crds`). Each
//! kind becomes a schema that carries only defaults and keeps every other field as written;
//! a CRD loaded from a file for the same kind replaces it (and validates as well).
//! The edgeplane.dev kinds are registered with their complete CRDs (every version, OpenAPI
//! and CEL), generated from their Rust types.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use serde_json::{json, Map, Value};

use super::{CrdError, Crds};

/// The Gateway API group.
const GROUP: &str = "gateway.networking.k8s.io";

/// Versions the built-in schemas answer for: every version the Gateway API kinds were served at.
const VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha3", "v1alpha2"];

/// Defaults of a route's `parentRefs` (every route kind).
const PARENT_REFS: &[(&str, &str)] = &[
    ("spec.parentRefs[].group", r#""gateway.networking.k8s.io""#),
    ("spec.parentRefs[].kind", r#""Gateway""#),
];

/// Defaults of `rules[].backendRefs` (every route kind).
const BACKEND_REFS: &[(&str, &str)] = &[
    ("spec.rules[].backendRefs[].group", r#""""#),
    ("spec.rules[].backendRefs[].kind", r#""Service""#),
    ("spec.rules[].backendRefs[].weight", "1"),
];

/// Defaults of a `RequestMirror` filter in a filter list (HTTP and gRPC), relative to it.
const MIRROR_FILTER: &[(&str, &str)] = &[
    ("[].requestMirror.backendRef.group", r#""""#),
    ("[].requestMirror.backendRef.kind", r#""Service""#),
    ("[].requestMirror.fraction.denominator", "100"),
];

/// Defaults of the filters only HTTP filter lists have (rule and backendRef filters alike),
/// relative to the list.
const HTTP_ONLY_FILTERS: &[(&str, &str)] = &[
    ("[].cors.maxAge", "5"),
    ("[].requestRedirect.statusCode", "302"),
    ("[].externalAuth.backendRef.group", r#""""#),
    ("[].externalAuth.backendRef.kind", r#""Service""#),
];

/// Defaults of a listener list (Gateway and ListenerSet), relative to it.
const LISTENERS: &[(&str, &str)] = &[
    ("[].allowedRoutes", r#"{"namespaces": {"from": "Same"}}"#),
    ("[].allowedRoutes.namespaces", r#"{"from": "Same"}"#),
    ("[].allowedRoutes.namespaces.from", r#""Same""#),
    (
        "[].allowedRoutes.kinds[].group",
        r#""gateway.networking.k8s.io""#,
    ),
    ("[].tls.mode", r#""Terminate""#),
    ("[].tls.certificateRefs[].group", r#""""#),
    ("[].tls.certificateRefs[].kind", r#""Secret""#),
];

/// Session persistence defaults of a rule list, relative to it.
const SESSION_PERSISTENCE: &[(&str, &str)] = &[
    ("[].sessionPersistence.type", r#""Cookie""#),
    (
        "[].sessionPersistence.cookieConfig.lifetimeType",
        r#""Session""#,
    ),
];

const HTTPROUTE: &[(&str, &str)] = &[
    (
        "spec.rules",
        r#"[{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}]}]"#,
    ),
    (
        "spec.rules[].matches",
        r#"[{"path": {"type": "PathPrefix", "value": "/"}}]"#,
    ),
    (
        "spec.rules[].matches[].path",
        r#"{"type": "PathPrefix", "value": "/"}"#,
    ),
    ("spec.rules[].matches[].path.type", r#""PathPrefix""#),
    ("spec.rules[].matches[].path.value", r#""/""#),
    ("spec.rules[].matches[].headers[].type", r#""Exact""#),
    ("spec.rules[].matches[].queryParams[].type", r#""Exact""#),
];

const GRPCROUTE: &[(&str, &str)] = &[
    ("spec.rules[].matches[].headers[].type", r#""Exact""#),
    ("spec.rules[].matches[].method.type", r#""Exact""#),
];

const GATEWAY: &[(&str, &str)] = &[
    ("spec.addresses[].type", r#""IPAddress""#),
    ("spec.allowedListeners.namespaces", r#"{"from": "None"}"#),
    ("spec.allowedListeners.namespaces.from", r#""None""#),
    ("spec.tls.backend.clientCertificateRef.group", r#""""#),
    ("spec.tls.backend.clientCertificateRef.kind", r#""Secret""#),
    (
        "spec.tls.frontend.default.validation.mode",
        r#""AllowValidOnly""#,
    ),
    (
        "spec.tls.frontend.perPort[].tls.validation.mode",
        r#""AllowValidOnly""#,
    ),
];

const LISTENERSET: &[(&str, &str)] = &[
    ("spec.parentRef.group", r#""gateway.networking.k8s.io""#),
    ("spec.parentRef.kind", r#""Gateway""#),
];

/// `(kind, defaults)` of every built-in kind, each default a dotted path (`[]` for list items)
/// and a JSON value.
pub fn defaults() -> Vec<(&'static str, Vec<(String, &'static str)>)> {
    let own = |list: &[(&'static str, &'static str)]| -> Vec<(String, &'static str)> {
        list.iter().map(|(p, v)| ((*p).to_owned(), *v)).collect()
    };
    let under = |prefix: &str, list: &[(&'static str, &'static str)]| {
        list.iter()
            .map(|(p, v)| (format!("{prefix}{p}"), *v))
            .collect::<Vec<_>>()
    };
    let mut http = own(PARENT_REFS);
    http.extend(own(BACKEND_REFS));
    http.extend(own(HTTPROUTE));
    for filters in ["spec.rules[].filters", "spec.rules[].backendRefs[].filters"] {
        http.extend(under(filters, MIRROR_FILTER));
        http.extend(under(filters, HTTP_ONLY_FILTERS));
    }
    http.extend(under("spec.rules", SESSION_PERSISTENCE));
    let mut grpc = own(PARENT_REFS);
    grpc.extend(own(BACKEND_REFS));
    grpc.extend(own(GRPCROUTE));
    for filters in ["spec.rules[].filters", "spec.rules[].backendRefs[].filters"] {
        grpc.extend(under(filters, MIRROR_FILTER));
    }
    grpc.extend(under("spec.rules", SESSION_PERSISTENCE));
    let mut l4 = own(PARENT_REFS);
    l4.extend(own(BACKEND_REFS));
    let mut gateway = own(GATEWAY);
    gateway.extend(under("spec.listeners", LISTENERS));
    let mut listener_set = own(LISTENERSET);
    listener_set.extend(under("spec.listeners", LISTENERS));
    vec![
        ("GatewayClass", Vec::new()),
        ("Gateway", gateway),
        ("HTTPRoute", http),
        ("GRPCRoute", grpc),
        ("TLSRoute", l4.clone()),
        ("TCPRoute", l4.clone()),
        ("UDPRoute", l4),
        ("ListenerSet", listener_set),
        ("ReferenceGrant", Vec::new()),
    ]
}

/// The built-in schemas alone, registered once per process: what parsing a manifest without a
/// CRD file applies.
pub fn crds() -> Arc<Crds> {
    static BUILTIN: LazyLock<Arc<Crds>> = LazyLock::new(|| {
        let mut crds = Crds::new();
        if let Err(e) = register(&mut crds) {
            tracing::error!(error = %e, "built-in Gateway API defaults not registered");
        }
        Arc::new(crds)
    });
    BUILTIN.clone()
}

/// Registers the built-in schemas of every Gateway API kind, and the full CRDs (every served
/// version, OpenAPI and CEL) of the edgeplane kinds, generated from their Rust types.
pub fn register(crds: &mut Crds) -> Result<(), CrdError> {
    for (kind, defaults) in defaults() {
        crds.register(&crd(kind, &defaults)?)?;
    }
    let own = crate::crd::generate::crd_values().map_err(|e| CrdError::BadSchema {
        path: "edgeplane.dev CRDs".to_owned(),
        reason: e.to_string(),
    })?;
    for crd in &own {
        crds.register(crd)?;
    }
    Ok(())
}

/// A CustomResourceDefinition whose schema holds `defaults` and keeps every other field.
fn crd(kind: &str, defaults: &[(String, &str)]) -> Result<Value, CrdError> {
    let mut root = Node::default();
    for (path, value) in defaults {
        let value: Value = serde_json::from_str(value).map_err(|e| CrdError::BadSchema {
            path: format!("built-in {kind} {path}"),
            reason: e.to_string(),
        })?;
        root.at(path).default = Some(value);
    }
    let schema = root.schema();
    let versions: Vec<Value> = VERSIONS
        .iter()
        .map(|v| json!({"name": v, "served": true, "storage": *v == "v1", "schema": {"openAPIV3Schema": schema}}))
        .collect();
    Ok(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}s.{GROUP}", kind.to_lowercase())},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "plural": format!("{}s", kind.to_lowercase())},
            "scope": if kind == "GatewayClass" { "Cluster" } else { "Namespaced" },
            "versions": versions,
        },
    }))
}

/// One node of a defaults-only schema.
#[derive(Default)]
struct Node {
    default: Option<Value>,
    properties: BTreeMap<String, Node>,
    items: Option<Box<Node>>,
}

impl Node {
    /// The node at `path` (`a.b[].c`, `[]` stepping into list items), created when missing.
    fn at(&mut self, path: &str) -> &mut Node {
        let mut node = self;
        for segment in path.split('.') {
            let (name, items) = match segment.strip_suffix("[]") {
                Some(n) => (n, true),
                None => (segment, false),
            };
            if !name.is_empty() {
                node = node.properties.entry(name.to_owned()).or_default();
            }
            if items {
                node = node.items.get_or_insert_with(Box::default);
            }
        }
        node
    }

    /// The node as an OpenAPI schema that validates nothing and keeps unknown fields.
    fn schema(&self) -> Value {
        let mut map = Map::new();
        map.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
        if let Some(d) = &self.default {
            map.insert("default".into(), d.clone());
        }
        if !self.properties.is_empty() {
            let props = self
                .properties
                .iter()
                .map(|(k, n)| (k.clone(), n.schema()))
                .collect();
            map.insert("properties".into(), Value::Object(props));
        }
        if let Some(items) = &self.items {
            map.insert("items".into(), items.schema());
        }
        Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admit(kind: &str, spec: Value) -> Value {
        let mut crds = Crds::new();
        register(&mut crds).unwrap();
        let mut object = json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": "x", "namespace": "default"},
            "spec": spec,
        });
        crds.admit(&mut object, None).unwrap();
        object["spec"].take()
    }

    #[test]
    fn an_httproute_gets_parent_backend_and_match_defaults() {
        let spec = admit(
            "HTTPRoute",
            json!({
                "parentRefs": [{"name": "gw"}],
                "rules": [
                    {"backendRefs": [{"name": "svc", "port": 80}], "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]},
                    {"matches": [{"headers": [{"name": "a", "value": "b"}]}]}
                ],
                "extra": {"kept": true},
            }),
        );
        assert_eq!(
            spec["parentRefs"][0],
            json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"})
        );
        let rule = &spec["rules"][0];
        assert_eq!(
            rule["backendRefs"][0],
            json!({"group": "", "kind": "Service", "name": "svc", "port": 80, "weight": 1})
        );
        assert_eq!(
            rule["matches"],
            json!([{"path": {"type": "PathPrefix", "value": "/"}}])
        );
        assert_eq!(rule["filters"][0]["requestRedirect"]["statusCode"], 302);
        // A match without a path gets the default path; its header gets the default type.
        assert_eq!(
            spec["rules"][1]["matches"][0],
            json!({"path": {"type": "PathPrefix", "value": "/"}, "headers": [{"name": "a", "value": "b", "type": "Exact"}]})
        );
        assert_eq!(spec["extra"], json!({"kept": true}));
    }

    #[test]
    fn a_route_without_rules_gets_the_default_rule() {
        let spec = admit("HTTPRoute", json!({"parentRefs": [{"name": "gw"}]}));
        assert_eq!(
            spec["rules"],
            json!([{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}]}])
        );
    }

    #[test]
    fn gateway_listeners_get_allowed_routes_and_tls_defaults() {
        let spec = admit(
            "Gateway",
            json!({
                "gatewayClassName": "c",
                "addresses": [{"value": "127.0.0.1"}],
                "listeners": [
                    {"name": "http", "port": 80, "protocol": "HTTP"},
                    {"name": "https", "port": 443, "protocol": "HTTPS",
                     "allowedRoutes": {"kinds": [{"kind": "HTTPRoute"}]},
                     "tls": {"certificateRefs": [{"name": "cert"}]}}
                ],
            }),
        );
        assert_eq!(spec["addresses"][0]["type"], "IPAddress");
        assert_eq!(
            spec["listeners"][0]["allowedRoutes"],
            json!({"namespaces": {"from": "Same"}})
        );
        let https = &spec["listeners"][1];
        assert_eq!(
            https["allowedRoutes"],
            json!({"namespaces": {"from": "Same"}, "kinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}]})
        );
        assert_eq!(
            https["tls"],
            json!({"mode": "Terminate", "certificateRefs": [{"group": "", "kind": "Secret", "name": "cert"}]})
        );
        assert_eq!(spec["allowedListeners"], Value::Null);
    }

    #[test]
    fn values_that_are_set_are_kept() {
        let spec = admit(
            "HTTPRoute",
            json!({"parentRefs": [{"name": "gw", "group": "other.io", "kind": "Thing"}],
                   "rules": [{"backendRefs": [{"name": "s", "weight": 0}]}]}),
        );
        assert_eq!(spec["parentRefs"][0]["group"], "other.io");
        assert_eq!(spec["parentRefs"][0]["kind"], "Thing");
        assert_eq!(spec["rules"][0]["backendRefs"][0]["weight"], 0);
    }
}
