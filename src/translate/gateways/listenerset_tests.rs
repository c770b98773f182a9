//! Table-driven tests of ListenerSet translation: `allowedListeners`, conflicts in the spec's
//! precedence, ListenerSet and Gateway statuses, routes attaching to ListenerSet listeners,
//! served sockets, and ReferenceGrants from ListenerSets.

use crate::kinds::routes::RouteKindId;
use std::sync::Arc;

use http::{HeaderMap, Method};
use serde_json::Value;

use crate::snapshot::Snapshot;
use crate::status::ObjectKind;
use crate::table::RequestView;
use crate::translate::testing::{options, snapshot};
use crate::translate::{translate, PortMap, Translation};

/// Gateway `gw` in `ns` with listener `http` on port 80 (hostname gw.example) and the given
/// `allowedListeners` YAML (empty for none).
fn gateway(allowed: &str) -> String {
    format!(
        "metadata: {{name: gw, namespace: ns}}\nspec:\n  gatewayClassName: c\n{allowed}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: gw.example, allowedRoutes: {{namespaces: {{from: All}}}}}}\n"
    )
}

/// ListenerSet `ns/name` created at `created` on `gw`, with listeners (YAML flow items).
fn set(ns: &str, name: &str, created: &str, listeners: &[&str]) -> String {
    let items: Vec<String> = listeners.iter().map(|l| format!("  - {l}\n")).collect();
    format!(
        "metadata: {{name: {name}, namespace: {ns}, generation: 2, creationTimestamp: '{created}'}}\nspec:\n  parentRef: {{name: gw, namespace: ns}}\n  listeners:\n{}",
        items.concat()
    )
}

fn with(
    gateway: &str,
    sets: &[String],
    routes: &[String],
    extra: impl FnOnce(&mut Snapshot),
) -> Translation {
    let mut s = snapshot(&[gateway.to_owned()]);
    s.listener_sets = sets
        .iter()
        .map(|l| Arc::new(serde_yaml_ng::from_str(l).expect("ListenerSet fixture")))
        .collect();
    s.http_routes = routes
        .iter()
        .map(|r| Arc::new(serde_yaml_ng::from_str(r).expect("HTTPRoute fixture")))
        .collect();
    s.namespaces = ["ns", "other", "prod"]
        .iter()
        .map(|n| {
            let env = if *n == "prod" { "prod" } else { "dev" };
            Arc::new(
                serde_yaml_ng::from_str(&format!(
                    "metadata: {{name: {n}, labels: {{env: {env}}}}}"
                ))
                .expect("Namespace fixture"),
            )
        })
        .collect();
    extra(&mut s);
    translate(&s, &options(PortMap::default()))
}

fn status(t: &Translation, kind: ObjectKind, ns: &str, name: &str) -> Value {
    t.status
        .get(kind, Some(ns), name)
        .map(|e| e.status.to_json().into_owned())
        .unwrap_or(Value::Null)
}

/// `type=status/reason` of `conditions`, joined.
fn summary(conditions: &Value) -> String {
    conditions
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={}/{}",
                c["type"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The listener `name` of a Gateway or ListenerSet status.
fn listener<'v>(status: &'v Value, name: &str) -> &'v Value {
    status["listeners"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["name"] == name))
        .unwrap_or(&Value::Null)
}

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";
const T2: &str = "2026-01-03T00:00:00Z";

#[test]
fn allowed_listeners_decides_which_listener_sets_join() {
    let l = "{name: extra, port: 80, protocol: HTTP, hostname: ls.example}";
    let cases: [(&str, &str, &str, Option<i64>); 8] = [
        ("", "ns", "NotAllowed", Some(0)),
        ("  allowedListeners: {namespaces: {from: None}}", "ns", "NotAllowed", Some(0)),
        ("  allowedListeners: {namespaces: {from: Same}}", "ns", "Accepted", Some(1)),
        ("  allowedListeners: {namespaces: {from: Same}}", "other", "NotAllowed", Some(0)),
        ("  allowedListeners: {namespaces: {from: All}}", "other", "Accepted", Some(1)),
        ("  allowedListeners: {namespaces: {from: Selector, selector: {matchLabels: {env: prod}}}}", "prod", "Accepted", Some(1)),
        ("  allowedListeners: {namespaces: {from: Selector, selector: {matchLabels: {env: prod}}}}", "other", "NotAllowed", Some(0)),
        ("  allowedListeners: {namespaces: {from: Selector}}", "prod", "NotAllowed", Some(0)),
    ];
    for (allowed, ns, reason, attached) in cases {
        let t = with(&gateway(allowed), &[set(ns, "ls", T0, &[l])], &[], |_| {});
        let s = status(&t, ObjectKind::ListenerSet, ns, "ls");
        let accepted = if reason == "Accepted" {
            "True"
        } else {
            "False"
        };
        let programmed = if reason == "Accepted" {
            "True/Programmed"
        } else {
            "False/NotAllowed"
        };
        assert_eq!(
            summary(&s["conditions"]),
            format!("Accepted={accepted}/{reason} Programmed={programmed}"),
            "{allowed} from {ns}"
        );
        assert_eq!(s["conditions"][0]["observedGeneration"], 2);
        let gw = status(&t, ObjectKind::Gateway, "ns", "gw");
        assert_eq!(
            gw["attachedListenerSets"].as_i64(),
            attached,
            "{allowed} from {ns}"
        );
        // The Gateway's own listeners are unaffected.
        assert_eq!(gw["listeners"].as_array().map(Vec::len), Some(1));
        assert_eq!(s["listeners"].is_null(), reason != "Accepted");
    }
    // A Gateway no ListenerSet names and without allowedListeners keeps the field out.
    let t = with(&gateway(""), &[], &[], |_| {});
    assert!(status(&t, ObjectKind::Gateway, "ns", "gw")
        .get("attachedListenerSets")
        .is_none());
}

#[test]
fn conflicts_follow_the_precedence_of_the_spec() {
    let allowed = "  allowedListeners: {namespaces: {from: All}}";
    let same_host = "{name: dup, port: 80, protocol: HTTP, hostname: gw.example}";
    let tcp = "{name: tcp, port: 80, protocol: TCP}";
    // Named so that name order and creation order disagree: `a-late` is the newest.
    let sets = [
        set(
            "ns",
            "a-late",
            T2,
            &["{name: mine, port: 80, protocol: HTTP, hostname: shared.example}"],
        ),
        set(
            "ns",
            "z-early",
            T0,
            &[
                same_host,
                "{name: mine, port: 80, protocol: HTTP, hostname: shared.example}",
            ],
        ),
        set("other", "only-conflict", T1, &[same_host]),
        set(
            "ns",
            "inner",
            T1,
            &[
                "{name: x, port: 81, protocol: HTTP}",
                "{name: y, port: 81, protocol: HTTP}",
                tcp,
                "{name: after-tcp, port: 80, protocol: HTTP, hostname: other.example}",
            ],
        ),
    ];
    let t = with(&gateway(allowed), &sets, &[], |_| {});
    let ls = |ns: &str, name: &str| status(&t, ObjectKind::ListenerSet, ns, name);
    let conflicted = |s: &Value, l: &str| summary(&listener(s, l)["conditions"]);
    let z = ls("ns", "z-early");
    assert_eq!(
        summary(&z["conditions"]),
        "Accepted=True/ListenersNotValid Programmed=True/Programmed"
    );
    assert!(conflicted(&z, "dup").contains("Accepted=False/HostnameConflict"));
    assert!(conflicted(&z, "dup").contains("Programmed=False/HostnameConflict"));
    assert!(conflicted(&z, "dup").ends_with("Conflicted=True/HostnameConflict"));
    assert!(conflicted(&z, "mine").ends_with("Conflicted=False/NoConflicts"));
    // The older ListenerSet keeps shared.example; the newer one, first by name, loses it.
    let a = ls("ns", "a-late");
    assert_eq!(
        summary(&a["conditions"]),
        "Accepted=False/ListenersNotValid Programmed=False/ListenersNotValid"
    );
    assert!(conflicted(&a, "mine").ends_with("Conflicted=True/HostnameConflict"));
    let only = ls("other", "only-conflict");
    assert_eq!(only["conditions"][0]["reason"], "ListenersNotValid");
    // Within one ListenerSet the earlier listener wins too; the TCP listener on port 80
    // conflicts with the Gateway's HTTP listener, and being conflicted takes nothing from the
    // HTTP listener after it on that port.
    let inner = ls("ns", "inner");
    assert!(conflicted(&inner, "x").ends_with("Conflicted=False/NoConflicts"));
    assert!(conflicted(&inner, "y").ends_with("Conflicted=True/HostnameConflict"));
    assert!(conflicted(&inner, "tcp").ends_with("Conflicted=True/ProtocolConflict"));
    assert!(conflicted(&inner, "after-tcp").ends_with("Conflicted=False/NoConflicts"));
    assert_eq!(inner["conditions"][0]["reason"], "ListenersNotValid");
    assert_eq!(inner["conditions"][0]["status"], "True");
    let gw = status(&t, ObjectKind::Gateway, "ns", "gw");
    assert_eq!(gw["attachedListenerSets"], 2);
    assert_eq!(summary(&listener(&gw, "http")["conditions"]), "Accepted=True/Accepted Programmed=True/Programmed ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts");
    assert_eq!(
        summary(&gw["conditions"]),
        "Accepted=True/Accepted Programmed=True/Programmed"
    );
}

/// An HTTPRoute `name` in `ns` with `parentRefs` (YAML flow list) and hostname `host`.
fn route(ns: &str, name: &str, parents: &str, host: &str) -> String {
    format!(
        "metadata: {{name: {name}, namespace: {ns}, generation: 1, creationTimestamp: '{T0}'}}\nspec:\n  parentRefs: {parents}\n  hostnames: [{host}]\n  rules: [{{backendRefs: []}}]\n"
    )
}

/// The route serving `host` on the socket bound for listener port `port`.
fn served(t: &Translation, port: u16, host: &str) -> Option<String> {
    let listener = t.table.listeners.iter().find(|(a, _)| a.port() == port)?.1;
    let headers = HeaderMap::new();
    let view = RequestView {
        host,
        path: "/",
        query: None,
        method: &Method::GET,
        headers: &headers,
    };
    Some(listener.route(&view)?.route.name().to_owned())
}

#[test]
fn routes_attach_to_the_listeners_of_the_object_they_name() {
    let allowed = "  allowedListeners: {namespaces: {from: All}}";
    let sets = [set(
        "other",
        "ls",
        T0,
        &[
            "{name: http, port: 80, protocol: HTTP, hostname: ls.example}",
            "{name: alt, port: 8081, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}}",
        ],
    )];
    let to_set = "[{kind: ListenerSet, group: gateway.networking.k8s.io, name: ls, namespace: other, sectionName: http}]";
    let routes = [
        route("other", "on-set", to_set, "ls.example"),
        route(
            "other",
            "on-alt",
            "[{kind: ListenerSet, name: ls, port: 8081}]",
            "alt.example",
        ),
        // Same is the ListenerSet's namespace, not the Gateway's.
        route(
            "ns",
            "gw-ns-on-alt",
            "[{kind: ListenerSet, name: ls, namespace: other, port: 8081}]",
            "alt.example",
        ),
        // A parentRef to the Gateway reaches only its own listeners.
        route("ns", "on-gateway", "[{name: gw}]", "ls.example"),
        route(
            "other",
            "missing-section",
            "[{kind: ListenerSet, name: ls, sectionName: nope}]",
            "ls.example",
        ),
    ];
    let t = with(&gateway(allowed), &sets, &routes, |_| {});
    let parent = |ns: &str, name: &str| {
        status(&t, ObjectKind::Route(RouteKindId::HttpRoute), ns, name)["parents"][0].clone()
    };
    let on_set = parent("other", "on-set");
    assert_eq!(on_set["parentRef"]["kind"], "ListenerSet");
    assert_eq!(on_set["parentRef"]["sectionName"], "http");
    assert_eq!(on_set["parentRef"]["namespace"], "other");
    assert_eq!(on_set["conditions"][0]["reason"], "Accepted");
    assert_eq!(
        parent("other", "on-alt")["conditions"][0]["reason"],
        "Accepted"
    );
    assert_eq!(
        parent("ns", "gw-ns-on-alt")["conditions"][0]["reason"],
        "NotAllowedByListeners"
    );
    assert_eq!(
        parent("ns", "on-gateway")["conditions"][0]["reason"],
        "NoMatchingListenerHostname"
    );
    assert_eq!(
        parent("other", "missing-section")["conditions"][0]["reason"],
        "NoMatchingParent"
    );
    let ls = status(&t, ObjectKind::ListenerSet, "other", "ls");
    assert_eq!(listener(&ls, "http")["attachedRoutes"], 1);
    assert_eq!(listener(&ls, "alt")["attachedRoutes"], 1);
    assert_eq!(
        listener(&ls, "alt")["supportedKinds"][0]["kind"],
        "HTTPRoute"
    );
    let gw = status(&t, ObjectKind::Gateway, "ns", "gw");
    assert_eq!(listener(&gw, "http")["attachedRoutes"], 0);
    // The ListenerSet's listeners are served: on the Gateway's port 80 socket by hostname,
    // and on a socket of their own for port 8081.
    assert_eq!(served(&t, 80, "ls.example").as_deref(), Some("on-set"));
    assert_eq!(served(&t, 8081, "alt.example").as_deref(), Some("on-alt"));
    let ports: Vec<u16> = t.table.listeners.keys().map(|a| a.port()).collect();
    assert_eq!(ports, [80, 8081]);
}

#[test]
fn a_not_allowed_listener_set_serves_nothing_and_routes_to_it_do_not_attach() {
    let sets = [set(
        "ns",
        "ls",
        T0,
        &["{name: alt, port: 8081, protocol: HTTP}"],
    )];
    let routes = [route(
        "ns",
        "r",
        "[{kind: ListenerSet, name: ls}]",
        "a.example",
    )];
    let t = with(&gateway(""), &sets, &routes, |_| {});
    let ports: Vec<u16> = t.table.listeners.keys().map(|a| a.port()).collect();
    assert_eq!(ports, [80]);
    let r = status(&t, ObjectKind::Route(RouteKindId::HttpRoute), "ns", "r");
    assert_eq!(
        r["parents"][0]["conditions"][0]["reason"],
        "NoMatchingParent"
    );
}

#[test]
fn certificate_references_need_a_grant_from_listener_sets() {
    let allowed = "  allowedListeners: {namespaces: {from: All}}";
    let https = "{name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: cert, namespace: certs}]}}";
    let grant = |from: &str| {
        format!("metadata: {{name: g, namespace: certs}}\nspec:\n  from: [{{group: gateway.networking.k8s.io, kind: {from}, namespace: other}}]\n  to: [{{group: '', kind: Secret}}]\n")
    };
    for (from, reason) in [
        ("Gateway", "RefNotPermitted"),
        ("ListenerSet", "InvalidCertificateRef"),
    ] {
        let g = grant(from);
        let t = with(
            &gateway(allowed),
            &[set("other", "ls", T0, &[https])],
            &[],
            |s| {
                s.reference_grants = vec![Arc::new(serde_yaml_ng::from_str(&g).expect("grant"))];
            },
        );
        let ls = status(&t, ObjectKind::ListenerSet, "other", "ls");
        let resolved = &listener(&ls, "https")["conditions"][2];
        assert_eq!(resolved["type"], "ResolvedRefs");
        assert_eq!(resolved["reason"], reason, "grant from {from}");
    }
}

#[test]
fn a_failed_socket_unprograms_the_listener_set_listener_not_a_namesake() {
    let allowed = "  allowedListeners: {namespaces: {from: All}}";
    let sets = [set(
        "other",
        "ls",
        T0,
        &["{name: http, port: 8081, protocol: HTTP}"],
    )];
    let mut t = with(&gateway(allowed), &sets, &[], |_| {});
    let failed = *t
        .table
        .listeners
        .keys()
        .find(|a| a.port() == 8081)
        .expect("the ListenerSet's socket");
    let failures = [(failed, "address in use".to_owned())].into();
    crate::translate::apply_bind_failures(&mut t.status, &t.table, &failures);
    let ls = status(&t, ObjectKind::ListenerSet, "other", "ls");
    let programmed = &listener(&ls, "http")["conditions"][1];
    assert_eq!(
        (&programmed["type"], &programmed["reason"]),
        (&Value::from("Programmed"), &Value::from("Pending"))
    );
    // The Gateway's own listener of the same name, on port 80, still listens.
    let gw = status(&t, ObjectKind::Gateway, "ns", "gw");
    assert_eq!(listener(&gw, "http")["conditions"][1]["status"], "True");
}

#[test]
fn a_listener_set_on_a_gateway_not_accepted_is_refused_with_its_reason() {
    let refused = "metadata: {name: gw, namespace: ns}\nspec:\n  gatewayClassName: c\n  allowedListeners: {namespaces: {from: All}}\n  listeners:\n  - {name: odd, port: 80, protocol: SCTP}\n";
    let sets = [set(
        "ns",
        "ls",
        T0,
        &["{name: alt, port: 8081, protocol: HTTP}"],
    )];
    let t = with(refused, &sets, &[], |_| {});
    let ls = status(&t, ObjectKind::ListenerSet, "ns", "ls");
    assert_eq!(
        summary(&ls["conditions"]),
        "Accepted=False/ParentNotAccepted Programmed=False/ParentNotAccepted"
    );
    assert!(t.table.listeners.is_empty());
    let gw = status(&t, ObjectKind::Gateway, "ns", "gw");
    assert_eq!(gw["attachedListenerSets"], 0);
}
