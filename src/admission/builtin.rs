//! The built-in schemas, so that objects read from files are defaulted and validated as a
//! cluster would do it even when no CRD file is loaded (`--crds`). Each Gateway API kind gets
//! the structural schema derived from the gateway-api crate's type (`gateway_schema`: every
//! field declared, so an unknown field is refused), the defaults the v1.6 CRDs declare (the
//! table here) and this project's statement of the rules users run into (`gateway_rules`);
//! a CRD loaded from a file for the same kind replaces it. The edgeplane.dev kinds are
//! registered with their complete CRDs (every version, OpenAPI and CEL), generated from their
//! Rust types.

use std::sync::{Arc, LazyLock};

use serde_json::{json, Value};

use super::{gateway_rules, gateway_schema, CrdError, Crds};

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
        ("BackendTLSPolicy", Vec::new()),
    ]
}

/// The built-in schemas alone, registered once per process: what parsing a manifest without a
/// CRD file applies.
pub fn crds() -> Arc<Crds> {
    static BUILTIN: LazyLock<Arc<Crds>> = LazyLock::new(|| match built() {
        Ok(crds) => Arc::new(crds.clone()),
        Err(e) => {
            tracing::error!(error = %e, "built-in schemas not registered");
            Arc::new(Crds::new())
        }
    });
    BUILTIN.clone()
}

/// Registers the built-in schemas of every Gateway API kind edgeplane reads, and the full CRDs
/// (every served version, OpenAPI and CEL) of the edgeplane kinds, generated from their Rust
/// types. A kind's schemas are parsed when an object of it is first admitted, once per process,
/// and shared.
pub fn register(crds: &mut Crds) -> Result<(), CrdError> {
    crds.include(built()?);
    Ok(())
}

/// The built-in registry, built on first use.
fn built() -> Result<&'static Crds, CrdError> {
    static BUILT: LazyLock<Result<Crds, String>> =
        LazyLock::new(|| build().map_err(|e| e.to_string()));
    BUILT.as_ref().map_err(|e| CrdError::BadSchema {
        path: "built-in schemas".to_owned(),
        reason: e.clone(),
    })
}

/// The built-in CustomResourceDefinitions of the Gateway API kinds as JSON (derived schema,
/// defaults and rules, every version), for tests and tools that compare them with a release's
/// CRDs.
pub fn gateway_crds() -> Result<Vec<Value>, CrdError> {
    defaults()
        .into_iter()
        .map(|(kind, defaults)| crd(kind, &defaults))
        .collect()
}

/// Every built-in kind registered without being parsed ([`Crds::register_lazy`]): a kind's
/// definition is made, and its schemas and CEL rules compiled, when an object of it is first
/// admitted. The edgeplane.dev definitions are generated once here to learn their kinds and
/// versions, and again for the kind that is used.
fn build() -> Result<Crds, CrdError> {
    let mut crds = Crds::new();
    for (kind, _) in defaults() {
        crds.register_lazy(GROUP, kind, VERSIONS, move || {
            let defaults = defaults()
                .into_iter()
                .find_map(|(k, d)| (k == kind).then_some(d))
                .unwrap_or_default();
            crd(kind, &defaults)
        });
    }
    for own in own_crds()? {
        let text = |p: &str| own.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let (group, kind) = (text("/spec/group"), text("/spec/names/kind"));
        let versions: Vec<&str> = own
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
            .filter_map(|v| v.get("name").and_then(Value::as_str))
            .collect();
        let wanted = kind.to_owned();
        crds.register_lazy(group, kind, &versions, move || {
            own_crds()?
                .into_iter()
                .find(|c| {
                    c.pointer("/spec/names/kind").and_then(Value::as_str) == Some(wanted.as_str())
                })
                .ok_or_else(|| CrdError::BadSchema {
                    path: format!("edgeplane.dev CRD {wanted}"),
                    reason: "no longer generated".to_owned(),
                })
        });
    }
    Ok(crds)
}

/// The edgeplane.dev CRDs generated from their Rust types, as JSON.
fn own_crds() -> Result<Vec<Value>, CrdError> {
    crate::kinds::crd::generate::crd_values().map_err(|e| CrdError::BadSchema {
        path: "edgeplane.dev CRDs".to_owned(),
        reason: e.to_string(),
    })
}

/// A CustomResourceDefinition for `kind`: the structural schema derived from the
/// gateway-api crate's type, with the built-in `defaults` and this project's rules
/// ([`gateway_rules`]) added, served at every version in [`VERSIONS`].
fn crd(kind: &str, defaults: &[(String, &str)]) -> Result<Value, CrdError> {
    let bad = |path: &str, reason: String| CrdError::BadSchema {
        path: format!("built-in {kind} {path}"),
        reason,
    };
    let mut schema = gateway_schema::schema(kind)?;
    for (path, value) in defaults {
        let value: Value = serde_json::from_str(value).map_err(|e| bad(path, e.to_string()))?;
        gateway_schema::add(&mut schema, path, &json!({ "default": value }))
            .map_err(|e| bad(path, e))?;
    }
    for (path, addition) in gateway_rules::additions(kind) {
        gateway_schema::add(&mut schema, &path, &addition).map_err(|e| bad(&path, e))?;
    }
    let versions = VERSIONS
        .iter()
        .map(|v| {
            let mut schema = schema.clone();
            for_version(kind, v, &mut schema);
            json!({"name": v, "served": true, "storage": *v == "v1", "schema": {"openAPIV3Schema": schema}})
        })
        .collect::<Vec<Value>>();
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

/// What an older version allows that the crate's types (the newest version) require: a
/// `v1alpha2` TLSRoute may leave out `hostnames`.
fn for_version(kind: &str, version: &str, schema: &mut Value) {
    if kind == "TLSRoute" && version == "v1alpha2" {
        if let Some(Value::Array(required)) = schema.pointer_mut("/properties/spec/required") {
            required.retain(|r| r != "hostnames");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_kind_parses_at_every_served_version() {
        let crds = build().unwrap();
        assert_eq!(
            crds.kinds.len(),
            defaults().len() + own_crds().unwrap().len()
        );
        for ((group, kind), crd) in &crds.kinds {
            assert!(!crd.served.is_empty(), "{kind}");
            for version in &crd.served {
                assert!(
                    crds.schema(&format!("{group}/{version}"), kind).is_some(),
                    "{kind} {version}"
                );
            }
        }
    }

    #[test]
    fn only_the_kinds_admitted_are_parsed() {
        let crds = build().unwrap();
        let parsed = |crds: &Crds| {
            let mut kinds: Vec<String> = crds
                .kinds
                .iter()
                .filter(|(_, crd)| crd.versions.get().is_some())
                .map(|((_, kind), _)| kind.clone())
                .collect();
            kinds.sort_unstable();
            kinds
        };
        assert!(parsed(&crds).is_empty());
        let mut route = json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw"}]},
        });
        crds.admit(&mut route, None).unwrap();
        assert_eq!(route["spec"]["parentRefs"][0]["kind"], "Gateway");
        let mut unserved = json!({
            "apiVersion": "gateway.networking.k8s.io/v9",
            "kind": "TLSRoute",
            "metadata": {"name": "t", "namespace": "default"},
        });
        let refused = crds.admit(&mut unserved, None).unwrap_err();
        assert!(
            refused.errors[0].to_string().contains(
                r#""gateway.networking.k8s.io/v1", "gateway.networking.k8s.io/v1alpha2""#
            ),
            "{}",
            refused.errors[0]
        );
        assert_eq!(parsed(&crds), ["HTTPRoute", "TLSRoute"]);
    }

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
                    {"backendRefs": [{"name": "svc", "port": 80}]},
                    {"matches": [{"headers": [{"name": "a", "value": "b"}]}],
                     "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]}
                ],
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
        let redirect = &spec["rules"][1]["filters"][0]["requestRedirect"];
        assert_eq!(redirect["statusCode"], 302);
        // A match without a path gets the default path; its header gets the default type.
        assert_eq!(
            spec["rules"][1]["matches"][0],
            json!({"path": {"type": "PathPrefix", "value": "/"}, "headers": [{"name": "a", "value": "b", "type": "Exact"}]})
        );
    }

    #[test]
    fn unknown_fields_are_refused_at_their_path() {
        let mut crds = Crds::new();
        register(&mut crds).unwrap();
        let mut object = json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "x"},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRef": [{"name": "s", "port": 80}]}]},
        });
        let r = crds.admit(&mut object, None).unwrap_err();
        assert_eq!(
            r.to_string(),
            r#"HTTPRoute.gateway.networking.k8s.io "x" is invalid: spec.rules[0].backendRef: field not declared in schema"#
        );
        for kind in [
            "GatewayClass",
            "Gateway",
            "ListenerSet",
            "GRPCRoute",
            "TLSRoute",
            "TCPRoute",
            "UDPRoute",
            "ReferenceGrant",
            "BackendTLSPolicy",
        ] {
            let mut object = json!({
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": "x"},
                "spec": {"typo": 1},
            });
            let r = crds.admit(&mut object, None).unwrap_err();
            assert!(
                r.errors.iter().any(|e| e.field == "spec.typo"
                    && e.error == crate::admission::FieldErrorType::UnknownField),
                "{kind}: {r}"
            );
        }
    }

    #[test]
    fn a_route_takes_at_most_32_parent_refs() {
        let mut crds = Crds::new();
        register(&mut crds).unwrap();
        for kind in ["HTTPRoute", "GRPCRoute"] {
            let parents = |n: usize| -> Vec<Value> {
                (0..n)
                    .map(|i| json!({"name": "gw", "sectionName": format!("l{i}")}))
                    .collect()
            };
            let mut ok = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
                "metadata": {"name": "x"}, "spec": {"parentRefs": parents(32)}});
            assert!(crds.admit(&mut ok, None).is_ok(), "{kind}");
            let mut over = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
                "metadata": {"name": "x"}, "spec": {"parentRefs": parents(33)}});
            let r = crds.admit(&mut over, None).unwrap_err();
            assert!(
                r.errors.iter().any(|e| e.field == "spec.parentRefs"),
                "{kind}: {r}"
            );
        }
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
                   "rules": [{"backendRefs": [{"name": "s", "port": 80, "weight": 0}]}]}),
        );
        assert_eq!(spec["parentRefs"][0]["group"], "other.io");
        assert_eq!(spec["parentRefs"][0]["kind"], "Thing");
        assert_eq!(spec["rules"][0]["backendRefs"][0]["weight"], 0);
    }
}
