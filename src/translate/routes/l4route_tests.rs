//! Table-driven tests of TLSRoute, TCPRoute and UDPRoute statuses, listener validation and the
//! L4 sockets of the table.

use crate::translate::testing::{options, snapshot};
use crate::translate::*;
use crate::translate::{translate, PortMap};
use serde_json::Value;

const GATEWAY: &str = "metadata: {name: gw, namespace: ns, generation: 1}\nspec:\n  gatewayClassName: c\n  listeners:\n  - {name: pass, port: 8443, protocol: TLS, hostname: '*.example.com', tls: {mode: Passthrough}}\n  - {name: tcp, port: 9000, protocol: TCP}\n  - {name: udp, port: 9000, protocol: UDP}\n  - {name: http, port: 80, protocol: HTTP}\n  - {name: bad-kinds, port: 9001, protocol: TCP, allowedRoutes: {kinds: [{kind: HTTPRoute}]}}\n";

fn service(name: &str) -> String {
    format!("metadata: {{name: {name}, namespace: ns}}\nspec: {{ports: [{{port: 80}}]}}")
}

/// Translates the Gateway with `routes` (YAML, any L4 kind) and returns `/debug/status`.
fn statuses(routes: &[&str]) -> Vec<Value> {
    let mut s = snapshot(&[GATEWAY.to_owned()]);
    s.services = ["svc", "other"]
        .iter()
        .map(|n| Arc::new(serde_yaml_ng::from_str(&service(n)).unwrap()))
        .collect();
    for r in routes {
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(r).unwrap();
        match v["kind"].as_str() {
            Some("TLSRoute") => s
                .tls_routes
                .push(Arc::new(serde_yaml_ng::from_value(v).unwrap())),
            Some("TCPRoute") => s
                .tcp_routes
                .push(Arc::new(serde_yaml_ng::from_value(v).unwrap())),
            _ => s
                .udp_routes
                .push(Arc::new(serde_yaml_ng::from_value(v).unwrap())),
        }
    }
    let t = translate(&s, &options(PortMap::default()));
    t.status
        .entries
        .iter()
        .map(|e| serde_json::json!({"kind": e.kind.as_str(), "name": e.name, "status": e.status.to_json().into_owned()}))
        .collect()
}

fn route_conditions(all: &[Value], name: &str) -> Vec<(String, String, String)> {
    let r = all
        .iter()
        .find(|e| e["name"] == name)
        .expect("route status");
    r["status"]["parents"][0]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
                c["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn c(t: &str, s: &str, r: &str) -> (String, String, String) {
    (t.into(), s.into(), r.into())
}

/// `(type, status, reason)` of one expected condition.
type Want = (&'static str, &'static str, &'static str);

#[test]
fn route_statuses_follow_the_spec_reasons() {
    let cases: &[(&str, &str, [Want; 2])] = &[
        ("kind: TLSRoute\nmetadata: {name: ok, namespace: ns}\nspec: {parentRefs: [{name: gw}], hostnames: [a.example.com], rules: [{backendRefs: [{name: svc, port: 80}]}]}",
         "ok", [("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs")]),
        ("kind: TLSRoute\nmetadata: {name: host, namespace: ns}\nspec: {parentRefs: [{name: gw, sectionName: pass}], hostnames: [a.other.org], rules: [{backendRefs: [{name: svc, port: 80}]}]}",
         "host", [("Accepted", "False", "NoMatchingListenerHostname"), ("ResolvedRefs", "True", "ResolvedRefs")]),
        ("kind: TLSRoute\nmetadata: {name: missing, namespace: ns}\nspec: {parentRefs: [{name: gw}], hostnames: [a.example.com], rules: [{backendRefs: [{name: nope, port: 80}]}]}",
         "missing", [("Accepted", "True", "Accepted"), ("ResolvedRefs", "False", "BackendNotFound")]),
        ("kind: TLSRoute\nmetadata: {name: kind, namespace: ns}\nspec: {parentRefs: [{name: gw}], hostnames: [a.example.com], rules: [{backendRefs: [{group: example.com, kind: Thing, name: svc, port: 80}]}]}",
         "kind", [("Accepted", "True", "Accepted"), ("ResolvedRefs", "False", "InvalidKind")]),
        ("kind: TCPRoute\nmetadata: {name: cross, namespace: ns}\nspec: {parentRefs: [{name: gw, sectionName: tcp}], rules: [{backendRefs: [{name: svc, namespace: elsewhere, port: 80}]}]}",
         "cross", [("Accepted", "True", "Accepted"), ("ResolvedRefs", "False", "RefNotPermitted")]),
        ("kind: TCPRoute\nmetadata: {name: http-only, namespace: ns}\nspec: {parentRefs: [{name: gw, sectionName: http}], rules: [{backendRefs: [{name: svc, port: 80}]}]}",
         "http-only", [("Accepted", "False", "NotAllowedByListeners"), ("ResolvedRefs", "True", "ResolvedRefs")]),
        ("kind: UDPRoute\nmetadata: {name: port, namespace: ns}\nspec: {parentRefs: [{name: gw, port: 9999}], rules: [{backendRefs: [{name: svc, port: 80}]}]}",
         "port", [("Accepted", "False", "NoMatchingParent"), ("ResolvedRefs", "True", "ResolvedRefs")]),
        ("kind: UDPRoute\nmetadata: {name: udp, namespace: ns}\nspec: {parentRefs: [{name: gw, port: 9000}], rules: [{backendRefs: [{name: svc, port: 80}]}]}",
         "udp", [("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs")]),
    ];
    for (yaml, name, want) in cases {
        let got = route_conditions(&statuses(&[yaml]), name);
        let want: Vec<_> = want.iter().map(|(t, s, r)| c(t, s, r)).collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn listeners_report_kinds_counts_and_invalid_kinds() {
    let all = statuses(&[
        "kind: TCPRoute\nmetadata: {name: t, namespace: ns}\nspec: {parentRefs: [{name: gw, port: 9000}], rules: [{backendRefs: [{name: svc, port: 80}]}]}",
        "kind: UDPRoute\nmetadata: {name: u, namespace: ns}\nspec: {parentRefs: [{name: gw, sectionName: udp}], rules: [{backendRefs: [{name: svc, port: 80}]}]}",
    ]);
    let gw = all.iter().find(|e| e["kind"] == "Gateway").unwrap();
    let listeners = gw["status"]["listeners"].as_array().unwrap();
    let by_name = |n: &str| listeners.iter().find(|l| l["name"] == n).unwrap();
    let kinds = |n: &str| by_name(n)["supportedKinds"][0]["kind"].clone();
    assert_eq!(kinds("pass"), "TLSRoute");
    assert_eq!(kinds("tcp"), "TCPRoute");
    assert_eq!(kinds("udp"), "UDPRoute");
    assert_eq!(by_name("tcp")["attachedRoutes"], 1);
    assert_eq!(by_name("udp")["attachedRoutes"], 1);
    assert_eq!(by_name("pass")["attachedRoutes"], 0);
    let cond = |n: &str, t: &str| {
        let l = by_name(n);
        let c = l["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == t)
            .unwrap();
        (
            c["status"].as_str().unwrap().to_owned(),
            c["reason"].as_str().unwrap().to_owned(),
        )
    };
    // TCP and UDP on one port number are different sockets.
    assert_eq!(cond("tcp", "Conflicted").0, "False");
    assert_eq!(cond("udp", "Programmed").0, "True");
    assert_eq!(
        cond("bad-kinds", "ResolvedRefs"),
        ("False".into(), "InvalidRouteKinds".into())
    );
    assert_eq!(
        by_name("bad-kinds")["supportedKinds"],
        serde_json::json!([])
    );
}

#[test]
fn table_gets_l4_sockets_with_their_routes() {
    let mut s = snapshot(&[GATEWAY.to_owned()]);
    s.services = vec![Arc::new(serde_yaml_ng::from_str(&service("svc")).unwrap())];
    s.tcp_routes.push(Arc::new(serde_yaml_ng::from_str("metadata: {name: t, namespace: ns}\nspec: {parentRefs: [{name: gw, sectionName: tcp}], rules: [{backendRefs: [{name: svc, port: 80}]}]}").unwrap()));
    s.tls_routes.push(Arc::new(serde_yaml_ng::from_str("metadata: {name: p, namespace: ns}\nspec: {parentRefs: [{name: gw}], hostnames: [a.example.com], rules: [{backendRefs: [{name: svc, port: 80}]}]}").unwrap()));
    let t = translate(&s, &options(PortMap::default()));
    let addr = |p: u16| std::net::SocketAddr::new("127.0.0.9".parse().unwrap(), p);
    let tcp = t.table.listeners.get(&addr(9000)).unwrap();
    assert!(
        matches!(&tcp.l4, Some(crate::table::L4Routes::Tcp { route: Some(r) }) if r.route.name() == "t")
    );
    assert!(matches!(
        &t.table.udp.get(&addr(9000)).unwrap().l4,
        Some(crate::table::L4Routes::Udp { route: None })
    ));
    let Some(crate::table::L4Routes::Tls(sni)) = &t.table.listeners.get(&addr(8443)).unwrap().l4
    else {
        panic!("TLS socket");
    };
    let l = sni.listener(Some("a.example.com")).unwrap();
    assert!(!l.terminate);
    assert_eq!(l.route(Some("a.example.com")).unwrap().route.name(), "p");
    assert!(l.route(Some("b.example.com")).is_none());
    assert!(t.table.listeners.get(&addr(80)).unwrap().l4.is_none());
}
