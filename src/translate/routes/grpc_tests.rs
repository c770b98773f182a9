//! Table-driven tests of GRPCRoute translation: which rule a gRPC call reaches (the spec's
//! precedence across rules and routes), invalid filters, listener kinds, and the
//! HTTPRoute/GRPCRoute hostname rule.

use crate::kinds::routes::RouteKindId;
use std::sync::Arc;

use http::{HeaderMap, Method};
use serde_json::Value;

use crate::snapshot::Snapshot;
use crate::status::ObjectKind;
use crate::table::RequestView;
use crate::translate::testing::{options, snapshot};
use crate::translate::{translate, PortMap, Translation};

const GATEWAY: &str = "metadata: {name: gw, namespace: ns}
spec:
  gatewayClassName: c
  listeners: [{name: http, port: 80, protocol: HTTP}]";

/// A GRPCRoute `name` in `ns` on `gw` (YAML of its `spec.rules` and extra spec fields).
fn grpc(name: &str, created: &str, spec: &str) -> String {
    format!(
        "metadata: {{name: {name}, namespace: ns, generation: 1, creationTimestamp: '{created}'}}\nspec:\n  parentRefs: [{{name: gw}}]\n{spec}"
    )
}

fn translated(gateway: &str, http: &[String], grpc: &[String]) -> Translation {
    let mut s: Snapshot = snapshot(&[gateway.to_owned()]);
    s.http_routes = http
        .iter()
        .map(|r| Arc::new(serde_yaml_ng::from_str(r).expect("HTTPRoute fixture")))
        .collect();
    s.grpc_routes = grpc
        .iter()
        .map(|r| Arc::new(serde_yaml_ng::from_str(r).expect("GRPCRoute fixture")))
        .collect();
    translate(&s, &options(PortMap::default()))
}

/// The route (`name`, or `name#rule`) that serves a call of `path` with `headers`.
fn routed(t: &Translation, host: &str, path: &str, headers: &[(&str, &str)]) -> Option<String> {
    let listener = t.table.listeners.values().next()?;
    let mut map = HeaderMap::new();
    for (n, v) in headers {
        map.insert(
            http::HeaderName::from_bytes(n.as_bytes()).expect("name"),
            v.parse().expect("value"),
        );
    }
    let view = RequestView {
        host,
        path,
        query: None,
        method: &Method::POST,
        headers: &map,
    };
    let rule = listener.route(&view)?;
    Some(match &rule.rule_name {
        Some(n) => format!("{}#{n}", rule.route.name()),
        None => rule.route.name().to_owned(),
    })
}

fn status(t: &Translation, kind: ObjectKind, name: &str) -> Value {
    t.status
        .get(kind, Some("ns"), name)
        .map(|e| e.status.to_json().into_owned())
        .unwrap_or(Value::Null)
}

/// `(type, status, reason)` of the first parent's conditions.
fn conditions(v: &Value) -> Vec<(String, String, String)> {
    v["parents"][0]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            (s("type"), s("status"), s("reason"))
        })
        .collect()
}

/// A call's path and headers, and the route that should serve it.
type Call<'a> = (&'a str, &'a [(&'a str, &'a str)], Option<&'a str>);

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";

#[test]
fn calls_reach_rules_in_the_grpc_precedence() {
    let routes = [
        grpc(
            "exact",
            T1,
            "  rules: [{matches: [{method: {service: a.S, method: M}}]}]",
        ),
        grpc(
            "service",
            T1,
            "  rules:
  - {name: plain, matches: [{method: {service: a.S}}]}
  - {name: header, matches: [{method: {service: a.S}, headers: [{name: x, value: '1'}]}]}",
        ),
        grpc(
            "method",
            T1,
            "  rules: [{matches: [{method: {method: M}}]}]",
        ),
        grpc(
            "regex",
            T1,
            "  rules: [{matches: [{method: {type: RegularExpression, service: 'a\\..*'}}]}]",
        ),
        // Two routes with the same match: the older one wins the tie.
        grpc(
            "older",
            T0,
            "  rules: [{matches: [{method: {service: a.S, method: Old}}]}]",
        ),
        grpc(
            "newer",
            T1,
            "  rules: [{matches: [{method: {service: a.S, method: Old}}]}]",
        ),
    ];
    let t = translated(GATEWAY, &[], &routes);
    let grpc_ct = ("content-type", "application/grpc");
    let cases: &[Call<'_>] = &[
        ("/a.S/M", &[grpc_ct], Some("exact")),
        ("/a.S/M", &[grpc_ct, ("x", "1")], Some("exact")),
        ("/a.S/N", &[grpc_ct], Some("service#plain")),
        ("/a.S/N", &[grpc_ct, ("x", "1")], Some("service#header")),
        ("/b.S/M", &[grpc_ct], Some("method")),
        ("/a.T/M", &[grpc_ct], Some("regex")),
        ("/a.S/Old", &[grpc_ct], Some("older")),
        ("/c.S/N", &[grpc_ct], None),
        ("/a.S", &[grpc_ct], None),
        ("/a.S/M", &[], None),
        ("/a.S/M", &[("content-type", "application/json")], None),
    ];
    for (path, headers, want) in cases {
        assert_eq!(
            routed(&t, "h.example", path, headers).as_deref(),
            *want,
            "{path} {headers:?}"
        );
    }
    let s = status(&t, ObjectKind::Route(RouteKindId::GrpcRoute), "exact");
    assert_eq!(s["parents"][0]["conditions"][0]["reason"], "Accepted");
    assert!(t
        .status
        .get(
            ObjectKind::Route(RouteKindId::HttpRoute),
            Some("ns"),
            "exact"
        )
        .is_none());
}

#[test]
fn unsupported_filters_make_the_rule_invalid() {
    let ext = "{type: ExtensionRef, extensionRef: {group: g.io, kind: K, name: n}}";
    let partly = grpc(
        "partly",
        T0,
        &format!(
            "  rules:
  - matches: [{{method: {{service: a.S, method: Ok}}}}]
  - matches: [{{method: {{service: a.S, method: Bad}}}}]
    filters: [{ext}]"
        ),
    );
    let wholly = grpc(
        "wholly",
        T0,
        &format!("  hostnames: [w.example]\n  rules: [{{filters: [{ext}]}}]"),
    );
    let t = translated(GATEWAY, &[], &[partly, wholly]);
    let partly = status(&t, ObjectKind::Route(RouteKindId::GrpcRoute), "partly");
    let c = conditions(&partly);
    assert_eq!(c[0], ("Accepted".into(), "True".into(), "Accepted".into()));
    assert!(
        c.contains(&(
            "PartiallyInvalid".into(),
            "True".into(),
            "UnsupportedValue".into()
        )),
        "{c:?}"
    );
    let wholly = status(&t, ObjectKind::Route(RouteKindId::GrpcRoute), "wholly");
    assert_eq!(
        conditions(&wholly)[0],
        ("Accepted".into(), "False".into(), "UnsupportedValue".into())
    );
    let message = wholly["parents"][0]["conditions"][0]["message"]
        .as_str()
        .unwrap_or("");
    assert!(message.contains("ExtensionRef"), "{message}");
}

#[test]
fn listeners_list_grpcroute_and_may_leave_it_out() {
    let t = translated(GATEWAY, &[], &[grpc("r", T0, "  rules: [{}]")]);
    let gw = t
        .status
        .get(ObjectKind::Gateway, Some("ns"), "gw")
        .map(|e| e.status.to_json().into_owned())
        .unwrap_or(Value::Null);
    let kinds: Vec<&str> = gw["listeners"][0]["supportedKinds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["HTTPRoute", "GRPCRoute"]);
    assert_eq!(gw["listeners"][0]["attachedRoutes"], 1);

    let http_only = "metadata: {name: gw, namespace: ns}
spec:
  gatewayClassName: c
  listeners:
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {kinds: [{kind: HTTPRoute}]}}";
    let t = translated(http_only, &[], &[grpc("r", T0, "  rules: [{}]")]);
    let s = status(&t, ObjectKind::Route(RouteKindId::GrpcRoute), "r");
    assert_eq!(
        conditions(&s)[0],
        (
            "Accepted".into(),
            "False".into(),
            "NotAllowedByListeners".into()
        )
    );
}

fn http_route(name: &str, created: &str, hostnames: &str) -> String {
    format!(
        "metadata: {{name: {name}, namespace: ns, generation: 1, creationTimestamp: '{created}'}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: {hostnames}\n  rules: [{{}}]"
    )
}

/// The spec: of an HTTPRoute and a GRPCRoute with intersecting hostnames on one listener, the
/// older (then the first by namespace/name) is accepted and the other is not.
#[test]
fn http_and_grpc_routes_do_not_share_a_hostname_on_a_listener() {
    let cases = [
        // (HTTPRoute created, its hostnames, GRPCRoute created, its hostnames, accepted kinds)
        (T0, "[a.example]", T1, "[a.example]", (true, false)),
        (T1, "[a.example]", T0, "[a.example]", (false, true)),
        (T0, "['*.example']", T1, "[b.example]", (true, false)),
        (T1, "[a.example]", T0, "[]", (false, true)),
        (T0, "[a.example]", T0, "[b.example]", (true, true)),
        // Same age: `ns/grpc` comes before `ns/web`.
        (T0, "[a.example]", T0, "[a.example]", (false, true)),
    ];
    for (http_created, http_hosts, grpc_created, grpc_hosts, want) in cases {
        let web = http_route("web", http_created, http_hosts);
        let g = grpc(
            "grpc",
            grpc_created,
            &format!("  hostnames: {grpc_hosts}\n  rules: [{{}}]"),
        );
        let t = translated(GATEWAY, &[web], &[g]);
        let accepted = |kind, name| {
            let s = status(&t, kind, name);
            conditions(&s)[0].1 == "True"
        };
        let got = (
            accepted(ObjectKind::Route(RouteKindId::HttpRoute), "web"),
            accepted(ObjectKind::Route(RouteKindId::GrpcRoute), "grpc"),
        );
        assert_eq!(
            got, want,
            "{http_hosts} {http_created} / {grpc_hosts} {grpc_created}"
        );
        let loser = match want {
            (true, false) => Some(status(
                &t,
                ObjectKind::Route(RouteKindId::GrpcRoute),
                "grpc",
            )),
            (false, true) => Some(status(&t, ObjectKind::Route(RouteKindId::HttpRoute), "web")),
            _ => None,
        };
        if let Some(s) = loser {
            assert_eq!(conditions(&s)[0].2, "Conflicted");
        }
        let gw = status_of_gateway(&t);
        let attached = usize::from(want.0) + usize::from(want.1);
        assert_eq!(gw["listeners"][0]["attachedRoutes"], attached);
        // The loser serves nothing: a gRPC call to the shared host reaches the winner only.
        if want != (true, true) {
            let host = if http_hosts.contains("a.") {
                "a.example"
            } else {
                "b.example"
            };
            let route = routed(&t, host, "/s.S/M", &[("content-type", "application/grpc")]);
            let winner = if want.0 { "web" } else { "grpc" };
            assert_eq!(route.as_deref(), Some(winner));
        }
    }
}

fn status_of_gateway(t: &Translation) -> Value {
    t.status
        .get(ObjectKind::Gateway, Some("ns"), "gw")
        .map(|e| e.status.to_json().into_owned())
        .unwrap_or(Value::Null)
}

/// A GRPCRoute's reference to a Service in another namespace needs a ReferenceGrant from
/// GRPCRoutes; one from HTTPRoutes does not do.
#[test]
fn cross_namespace_backends_need_a_grant_from_grpcroutes() {
    let route = grpc(
        "r",
        T0,
        "  rules: [{backendRefs: [{name: svc, namespace: other, port: 80}]}]",
    );
    for (from_kind, want) in [
        ("HTTPRoute", ("False", "RefNotPermitted")),
        ("GRPCRoute", ("True", "ResolvedRefs")),
    ] {
        let mut s: Snapshot = snapshot(&[GATEWAY.to_owned()]);
        s.grpc_routes = vec![Arc::new(serde_yaml_ng::from_str(&route).expect("route"))];
        let grant = format!(
            "metadata: {{name: g, namespace: other}}\nspec:\n  from: [{{group: gateway.networking.k8s.io, kind: {from_kind}, namespace: ns}}]\n  to: [{{group: '', kind: Service}}]"
        );
        s.reference_grants = vec![Arc::new(serde_yaml_ng::from_str(&grant).expect("grant"))];
        s.services = vec![Arc::new(
            serde_yaml_ng::from_str(
                "metadata: {name: svc, namespace: other}\nspec: {ports: [{port: 80}]}",
            )
            .expect("service"),
        )];
        let t = translate(&s, &options(PortMap::default()));
        let c = conditions(&status(&t, ObjectKind::Route(RouteKindId::GrpcRoute), "r"));
        let resolved = c
            .iter()
            .find(|c| c.0 == "ResolvedRefs")
            .expect("ResolvedRefs");
        assert_eq!(
            (resolved.1.as_str(), resolved.2.as_str()),
            want,
            "{from_kind}"
        );
    }
}
