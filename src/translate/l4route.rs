//! TLSRoute, TCPRoute and UDPRoute: attachment to TLS, TCP and UDP listeners (sectionName,
//! port, allowed kinds and namespaces, and for TLSRoutes hostname intersection), backend
//! resolution into one weighted set per route, and each route's `parents[]` status. L4 routes
//! are compiled in full on every translation. Pure.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use gateway_api::apis::standard::httproutes::{
    HttpRouteStatus, HttpRouteStatusParents, HttpRouteStatusParentsParentRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::backends::{BackendRef, Backends};
use super::conditions::*;
use super::gateway::GatewayModel;
use super::httproute::{AttachError, Attachment};
use super::listener::intersect_hostnames;
use super::refgrant::RefSide;
use super::{GatewayIndex, TranslateOptions};
use crate::snapshot::{namespace_of, Snapshot};
use crate::status::{ObjectKind, ObjectStatus, StatusBody, StatusReport, GATEWAY_GROUP};
use crate::table::{BackendSet, BackendTarget, L4Route, RouteRef, RuleFilters, WeightedBackend};

/// A parentRef of any L4 route kind, borrowed.
struct Parent<'a> {
    group: Option<&'a str>,
    kind: Option<&'a str>,
    name: &'a str,
    namespace: Option<&'a str>,
    port: Option<i32>,
    section_name: Option<&'a str>,
}

/// A backendRef of any L4 route kind, borrowed, with its weight.
struct Backend<'a> {
    reference: BackendRef<'a>,
    weight: Option<i32>,
}

/// One route of an L4 kind, as the rules read it.
struct View<'a> {
    kind: ObjectKind,
    meta: &'a ObjectMeta,
    /// TLSRoutes only; empty: every hostname of the listener.
    hostnames: &'a [String],
    parents: Vec<Parent<'a>>,
    backends: Vec<Backend<'a>>,
}

/// An L4 route accepted on at least one valid listener: what goes into the table.
#[derive(Debug)]
pub struct L4Attached {
    /// Creation time in seconds, then `namespace/name`: older routes win a hostname or a
    /// listener that several routes claim.
    pub created: i64,
    pub route: L4Route,
    pub attachments: Vec<Attachment>,
}

/// Every L4 route of the snapshot naming one of our Gateways: statuses go into `report`,
/// counted listeners into the Gateways' `attached`, and the attached routes are returned in
/// precedence order (oldest first, then `namespace/name`).
pub fn attach_l4_routes<'s>(
    snapshot: &'s Snapshot,
    gateways: &mut [GatewayModel<'s>],
    by_name: &GatewayIndex<'_>,
    labels: &HashMap<&str, BTreeMap<String, String>>,
    options: &TranslateOptions,
    report: &mut StatusReport,
) -> Vec<L4Attached> {
    let mut views = Vec::new();
    for r in &snapshot.tls_routes {
        views.push(View {
            kind: ObjectKind::TlsRoute,
            meta: &r.metadata,
            hostnames: &r.spec.hostnames,
            parents: r
                .spec
                .parent_refs
                .iter()
                .flatten()
                .map(|p| Parent {
                    group: p.group.as_deref(),
                    kind: p.kind.as_deref(),
                    name: &p.name,
                    namespace: p.namespace.as_deref(),
                    port: p.port,
                    section_name: p.section_name.as_deref(),
                })
                .collect(),
            backends: r
                .spec
                .rules
                .iter()
                .flat_map(|rule| &rule.backend_refs)
                .map(|b| Backend {
                    reference: BackendRef {
                        from_kind: ObjectKind::TlsRoute.as_str(),
                        group: b.group.as_deref(),
                        kind: b.kind.as_deref(),
                        name: &b.name,
                        namespace: b.namespace.as_deref(),
                        port: b.port,
                    },
                    weight: b.weight,
                })
                .collect(),
        });
    }
    let plain = snapshot
        .tcp_routes
        .iter()
        .map(|r| {
            (
                ObjectKind::TcpRoute,
                &r.metadata,
                &r.spec.parent_refs,
                &r.spec.rules,
            )
        })
        .chain(snapshot.udp_routes.iter().map(|r| {
            (
                ObjectKind::UdpRoute,
                &r.metadata,
                &r.spec.parent_refs,
                &r.spec.rules,
            )
        }));
    for (kind, meta, parents, rules) in plain {
        views.push(View {
            kind,
            meta,
            hostnames: &[],
            parents: parents
                .iter()
                .flatten()
                .map(|p| Parent {
                    group: p.group.as_deref(),
                    kind: p.kind.as_deref(),
                    name: &p.name,
                    namespace: p.namespace.as_deref(),
                    port: p.port,
                    section_name: p.section_name.as_deref(),
                })
                .collect(),
            backends: rules
                .iter()
                .flat_map(|rule| &rule.backend_refs)
                .map(|b| Backend {
                    reference: BackendRef {
                        from_kind: kind.as_str(),
                        group: b.group.as_deref(),
                        kind: b.kind.as_deref(),
                        name: &b.name,
                        namespace: b.namespace.as_deref(),
                        port: b.port,
                    },
                    weight: b.weight,
                })
                .collect(),
        });
    }
    let mut backends = Backends::with_cache(snapshot, Default::default(), false);
    let no_labels = BTreeMap::new();
    let mut out = Vec::new();
    for view in &views {
        let ns = namespace_of(view.meta);
        if !view.parents.iter().any(|p| {
            by_name
                .parent(p.group, p.kind, p.namespace.unwrap_or(ns), p.name)
                .is_some()
        }) {
            continue;
        }
        let route_labels = labels.get(ns).unwrap_or(&no_labels);
        let (route, unresolved) = compile(view, &mut backends);
        let stamp = Stamp {
            generation: view.meta.generation,
            now: options.now,
        };
        let mut parents = Vec::new();
        let mut attachments = Vec::new();
        for parent in &view.parents {
            let Some(target) = by_name.parent(
                parent.group,
                parent.kind,
                parent.namespace.unwrap_or(ns),
                parent.name,
            ) else {
                continue;
            };
            let gi = target.gateway;
            let accepted = match select(view, parent, &gateways[gi], target.set, route_labels) {
                Ok(selected) => {
                    for (li, hostnames) in selected {
                        let name = view.meta.name.as_deref().unwrap_or("");
                        let listener = &mut gateways[gi].listeners[li];
                        listener.attached.insert((view.kind.as_str(), ns, name));
                        if listener.valid() {
                            attachments.push(Attachment {
                                gateway: gi,
                                listener: li,
                                hostnames,
                                parent: parents.len(),
                            });
                        }
                    }
                    stamp.ok(ACCEPTED, REASON_ACCEPTED, "accepted")
                }
                Err(e) => stamp.fail(ACCEPTED, e.reason(), e.to_string()),
            };
            let resolved = match &unresolved {
                None => stamp.ok(RESOLVED_REFS, REASON_RESOLVED_REFS, "resolved"),
                Some((reason, message)) => stamp.fail(RESOLVED_REFS, reason, message.clone()),
            };
            parents.push(HttpRouteStatusParents {
                conditions: vec![accepted, resolved],
                controller_name: options.controller_name.clone(),
                parent_ref: HttpRouteStatusParentsParentRef {
                    group: parent.group.map(str::to_owned),
                    kind: parent.kind.map(str::to_owned),
                    name: parent.name.to_owned(),
                    namespace: parent.namespace.map(str::to_owned),
                    port: parent.port,
                    section_name: parent.section_name.map(str::to_owned),
                },
            });
        }
        if parents.is_empty() {
            continue;
        }
        report.entries.push(ObjectStatus::new(
            view.kind,
            Some(ns),
            view.meta.name.as_deref().unwrap_or(""),
            view.meta.generation,
            StatusBody::HttpRoute(Arc::new(HttpRouteStatus { parents })),
        ));
        if !attachments.is_empty() {
            let created = view
                .meta
                .creation_timestamp
                .as_ref()
                .map_or(0, |t| t.0.as_second());
            out.push(L4Attached {
                created,
                route,
                attachments,
            });
        }
    }
    out.sort_by(|a, b| {
        (a.created, &a.route.route.namespace, &a.route.route.name).cmp(&(
            b.created,
            &b.route.route.namespace,
            &b.route.route.name,
        ))
    });
    out
}

/// The route's weighted backends, and the first unresolved reference as `(reason, message)`.
/// An unresolved backend keeps its weight: its share of connections is refused.
fn compile(
    view: &View<'_>,
    backends: &mut Backends<'_>,
) -> (L4Route, Option<(&'static str, String)>) {
    let ns = namespace_of(view.meta);
    let from = RefSide {
        group: GATEWAY_GROUP,
        kind: view.kind.as_str(),
        namespace: ns,
    };
    let mut unresolved = None;
    let set = view
        .backends
        .iter()
        .map(|b| {
            let weight = u32::try_from(b.weight.unwrap_or(1)).unwrap_or(0);
            let target = match backends.resolve_from(from, &b.reference) {
                Ok(service) => BackendTarget::Service(service),
                Err(e) => {
                    unresolved.get_or_insert((e.reason(), e.to_string()));
                    BackendTarget::Invalid {
                        reason: e.to_string(),
                    }
                }
            };
            WeightedBackend {
                weight,
                target,
                filters: RuleFilters::default(),
            }
        })
        .collect();
    let route = L4Route {
        route: Arc::new(RouteRef {
            kind: view.kind.as_str().to_owned(),
            namespace: ns.to_owned(),
            name: view.meta.name.clone().unwrap_or_default(),
        }),
        backends: Arc::new(BackendSet::new(set)),
    };
    (route, unresolved)
}

/// The listeners a parentRef attaches to, with the effective hostnames on each (`*` for TCP
/// and UDP); or why none. The most telling failure wins, as for HTTPRoutes.
fn select(
    view: &View<'_>,
    parent: &Parent<'_>,
    gateway: &GatewayModel<'_>,
    set: Option<usize>,
    labels: &BTreeMap<String, String>,
) -> Result<Vec<(usize, Vec<String>)>, AttachError> {
    let route_ns = namespace_of(view.meta);
    let selected: Vec<usize> = gateway
        .listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.set() == set
                && parent.section_name.is_none_or(|s| s == l.spec.name)
                && parent.port.is_none_or(|p| p == l.spec.port)
        })
        .map(|(i, _)| i)
        .collect();
    if selected.is_empty() {
        return Err(AttachError::NoMatchingParent);
    }
    let kind = view.kind.as_str();
    let allowed: Vec<usize> = selected
        .into_iter()
        .filter(|&i| {
            let l = &gateway.listeners[i];
            l.accepts(kind) && l.allows_namespace(gateway.namespace, route_ns, labels)
        })
        .collect();
    if allowed.is_empty() {
        return Err(AttachError::NotAllowedByListeners);
    }
    if view.kind != ObjectKind::TlsRoute {
        return Ok(allowed
            .into_iter()
            .map(|i| (i, vec!["*".to_owned()]))
            .collect());
    }
    let matched: Vec<(usize, Vec<String>)> = allowed
        .into_iter()
        .filter_map(|i| {
            let h = intersect_hostnames(gateway.listeners[i].hostname, view.hostnames);
            (!h.is_empty()).then_some((i, h))
        })
        .collect();
    if matched.is_empty() {
        return Err(AttachError::NoMatchingListenerHostname);
    }
    Ok(matched)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::testing::{options, snapshot};
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
            matches!(&tcp.l4, Some(crate::table::L4Routes::Tcp { route: Some(r) }) if r.route.name == "t")
        );
        assert!(matches!(
            &t.table.udp.get(&addr(9000)).unwrap().l4,
            Some(crate::table::L4Routes::Udp { route: None })
        ));
        let Some(crate::table::L4Routes::Tls(sni)) =
            &t.table.listeners.get(&addr(8443)).unwrap().l4
        else {
            panic!("TLS socket");
        };
        let l = sni.listener(Some("a.example.com")).unwrap();
        assert!(!l.terminate);
        assert_eq!(l.route(Some("a.example.com")).unwrap().route.name, "p");
        assert!(l.route(Some("b.example.com")).is_none());
        assert!(t.table.listeners.get(&addr(80)).unwrap().l4.is_none());
    }
}
