//! The live route table as a tree: Gateway -> listener -> hostname -> rule -> backends with
//! weights and endpoint health. Served at `/api/routes` and printed by `edgeplane routes`;
//! the types read back what they write.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::table::{BackendSet, BackendTarget, L4Route, L4Routes, RouteRule, RouteTable};

/// The whole table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteTree {
    /// Generation of the table the tree was drawn from.
    pub generation: u64,
    pub gateways: Vec<TreeGateway>,
}

/// A Gateway (`namespace/name`) and its listeners that are bound to a socket.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeGateway {
    pub name: String,
    pub listeners: Vec<TreeListener>,
}

/// A Gateway listener (for a ListenerSet's, `ListenerSet/namespace/name/listener`), the
/// socket it is served on and what kind of traffic it takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeListener {
    pub name: String,
    pub bind: SocketAddr,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP` or `UDP`.
    pub protocol: String,
    pub hosts: Vec<TreeHost>,
}

/// A hostname (`*` for any) and its rules in the order requests try them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeHost {
    pub hostname: String,
    pub rules: Vec<TreeRule>,
}

/// One rule of a route: the route (`Kind/namespace/name`), the rule's name or index, its
/// matches and its backends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeRule {
    pub route: String,
    pub rule: String,
    pub matches: Vec<String>,
    /// Set when the rule answers itself (a redirect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<String>,
    pub backends: Vec<TreeBackend>,
}

/// A backendRef: the Service port (`namespace/name:port`) or why it is invalid, its weight,
/// and its endpoints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeBackend {
    pub target: String,
    pub weight: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<String>,
    pub endpoints: Vec<TreeEndpoint>,
}

/// An endpoint and its state: `ready`, `terminating` (used only while none is ready) or
/// `ejected` (kept out by outlier detection).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeEndpoint {
    pub address: SocketAddr,
    pub state: String,
}

/// Draws `table`; `ejected` are the endpoints outlier detection keeps out now.
pub fn build(table: &RouteTable, ejected: &[SocketAddr]) -> RouteTree {
    let mut gateways: BTreeMap<String, Vec<TreeListener>> = BTreeMap::new();
    for socket in table.listeners.values().chain(table.udp.values()) {
        for (index, source) in socket.sources.iter().enumerate() {
            let protocol = match (&socket.l4, &socket.tls) {
                (Some(L4Routes::Udp { .. }), _) => "UDP",
                (Some(L4Routes::Tcp { .. }), _) => "TCP",
                (Some(L4Routes::Tls(_)), _) => "TLS",
                (None, Some(_)) => "HTTPS",
                (None, None) => "HTTP",
            };
            let hosts = match &socket.l4 {
                None => socket
                    .hosts
                    .iter()
                    .filter(|h| h.listener as usize == index)
                    .map(|h| TreeHost {
                        hostname: h.hostname.to_string(),
                        rules: http_rules(&h.rules, ejected),
                    })
                    .collect(),
                Some(L4Routes::Tcp { route } | L4Routes::Udp { route }) => route
                    .iter()
                    .map(|r| TreeHost {
                        hostname: "*".to_owned(),
                        rules: vec![l4_rule(r, ejected)],
                    })
                    .collect(),
                Some(L4Routes::Tls(sni)) => {
                    // One SNI listener per Gateway listener, in the sockets' order.
                    let listeners = if sni.listeners.len() == socket.sources.len() {
                        sni.listeners.get(index).into_iter().collect::<Vec<_>>()
                    } else if index == 0 {
                        sni.listeners.iter().collect()
                    } else {
                        Vec::new()
                    };
                    listeners
                        .into_iter()
                        .flat_map(|l| &l.hosts)
                        .map(|(host, r)| TreeHost {
                            hostname: host.clone(),
                            rules: vec![l4_rule(r, ejected)],
                        })
                        .collect()
                }
            };
            let name = match &source.listener_set {
                Some((ns, set)) => format!("ListenerSet/{ns}/{set}/{}", source.listener),
                None => source.listener.clone(),
            };
            gateways
                .entry(format!("{}/{}", source.namespace, source.gateway))
                .or_default()
                .push(TreeListener {
                    name,
                    bind: socket.bind,
                    protocol: protocol.to_owned(),
                    hosts,
                });
        }
    }
    RouteTree {
        generation: table.generation,
        gateways: gateways
            .into_iter()
            .map(|(name, listeners)| TreeGateway { name, listeners })
            .collect(),
    }
}

/// The rules of a virtual host; the matches of one rule (one table entry each) are merged.
fn http_rules(rules: &[Arc<RouteRule>], ejected: &[SocketAddr]) -> Vec<TreeRule> {
    let mut out: Vec<TreeRule> = Vec::new();
    let mut last: Option<(&crate::table::RouteRef, u32)> = None;
    for r in rules {
        let matched = match_text(&serde_json::to_value(&r.matcher).unwrap_or_default());
        let key = (&*r.route, r.rule_index);
        if last == Some(key) {
            if let Some(prev) = out.last_mut() {
                prev.matches.push(matched);
                continue;
            }
        }
        last = Some(key);
        let answers = r.filters.redirect.as_ref().map(|redirect| {
            let v = serde_json::to_value(redirect).unwrap_or_default();
            format!("redirect {}", compact(&v))
        });
        out.push(TreeRule {
            route: route_name(&r.route),
            rule: r
                .rule_name
                .as_deref()
                .map_or_else(|| r.rule_index.to_string(), str::to_owned),
            matches: vec![matched],
            answers,
            backends: backends(&r.backends, ejected),
        });
    }
    out
}

fn l4_rule(r: &L4Route, ejected: &[SocketAddr]) -> TreeRule {
    TreeRule {
        route: route_name(&r.route),
        rule: "0".to_owned(),
        matches: Vec::new(),
        answers: None,
        backends: backends(&r.backends, ejected),
    }
}

/// `Kind/namespace/name`.
pub fn route_name(r: &crate::table::RouteRef) -> String {
    format!("{}/{}", r.kind(), r.label())
}

fn backends(set: &BackendSet, ejected: &[SocketAddr]) -> Vec<TreeBackend> {
    set.backends
        .iter()
        .map(|b| match &b.target {
            BackendTarget::Service(s) => TreeBackend {
                target: s.service.to_string(),
                weight: b.weight,
                invalid: None,
                endpoints: endpoints(&s.endpoints, &s.terminating, ejected),
            },
            BackendTarget::Invalid { reason } => TreeBackend {
                target: "(invalid)".to_owned(),
                weight: b.weight,
                invalid: Some(reason.clone()),
                endpoints: Vec::new(),
            },
        })
        .collect()
}

/// The endpoints of a Service port with their state.
pub fn endpoints(
    ready: &[SocketAddr],
    terminating: &[SocketAddr],
    ejected: &[SocketAddr],
) -> Vec<TreeEndpoint> {
    let state = |a: &SocketAddr, base: &str| {
        if ejected.binary_search(a).is_ok() {
            "ejected".to_owned()
        } else {
            base.to_owned()
        }
    };
    ready
        .iter()
        .map(|a| TreeEndpoint {
            address: *a,
            state: state(a, "ready"),
        })
        .chain(terminating.iter().map(|a| TreeEndpoint {
            address: *a,
            state: state(a, "terminating"),
        }))
        .collect()
}

/// A match as one line: `Prefix /v1 header x-version=v2 method GET`.
fn match_text(m: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(path) = m.get("path") {
        parts.push(format!(
            "{} {}",
            path["type"].as_str().unwrap_or("Path"),
            path["value"].as_str().unwrap_or("/")
        ));
    }
    if let Some(method) = m.get("method").and_then(Value::as_str) {
        parts.push(format!("method {method}"));
    }
    for (key, word) in [("headers", "header"), ("query", "query")] {
        for h in m.get(key).and_then(Value::as_array).into_iter().flatten() {
            let value = &h["value"];
            let v = value["value"]
                .as_str()
                .map_or_else(|| compact(value), str::to_owned);
            let op = match value["type"].as_str() {
                Some("RegularExpression") => "~",
                _ => "=",
            };
            parts.push(format!(
                "{word} {}{op}{v}",
                h["name"].as_str().unwrap_or("?")
            ));
        }
    }
    if let Some(grpc) = m.get("grpc") {
        parts.push(format!("grpc {}", compact(grpc)));
    }
    parts.join(" ")
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matches_read_as_one_line() {
        let m = json!({"path": {"type": "Prefix", "value": "/v1"}, "method": "GET",
            "headers": [{"name": "x-version", "value": {"type": "Exact", "value": "v2"}}]});
        assert_eq!(match_text(&m), "Prefix /v1 method GET header x-version=v2");
    }

    #[test]
    fn endpoint_states() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let c: SocketAddr = "127.0.0.1:3".parse().unwrap();
        let e = endpoints(&[a, b], &[c], &[b]);
        let states: Vec<_> = e.iter().map(|e| e.state.as_str()).collect();
        assert_eq!(states, ["ready", "ejected", "terminating"]);
    }

    #[test]
    fn a_tcp_listener_draws_its_route_and_backend_health() {
        use crate::table::{
            ListenerTable, RouteRef, RuleFilters, ServiceBackend, ServiceKey, SocketSource,
            WeightedBackend,
        };
        let bind: SocketAddr = "127.0.0.1:5432".parse().unwrap();
        let (ready, ejected, leaving): (SocketAddr, SocketAddr, SocketAddr) = (
            "10.0.0.1:5432".parse().unwrap(),
            "10.0.0.2:5432".parse().unwrap(),
            "10.0.0.3:5432".parse().unwrap(),
        );
        let service = ServiceBackend {
            service: ServiceKey {
                namespace: "db".into(),
                name: "pg".into(),
                port: 5432,
            },
            endpoints: vec![ready, ejected],
            terminating: vec![leaving],
            protocol: Default::default(),
            balance: Default::default(),
            limits: None,
        };
        let backends = BackendSet::new(vec![
            WeightedBackend {
                weight: 3,
                target: BackendTarget::Service(Arc::new(service)),
                filters: Arc::new(RuleFilters::default()),
            },
            WeightedBackend {
                weight: 1,
                target: BackendTarget::Invalid {
                    reason: "Service db/gone not found".into(),
                },
                filters: Arc::new(RuleFilters::default()),
            },
        ]);
        let sources = vec![SocketSource::gateway("db", "gw", "pg")];
        let mut listener =
            ListenerTable::new(bind, sources, Vec::<crate::table::VirtualHost>::new());
        listener.l4 = Some(L4Routes::Tcp {
            route: Some(L4Route {
                route: Arc::new(RouteRef::new("TCPRoute", "db", "pg")),
                backends: Arc::new(backends),
            }),
        });
        let mut table = RouteTable {
            generation: 4,
            ..RouteTable::default()
        };
        table.listeners.insert(bind, Arc::new(listener));
        let tree = build(&table, &[ejected]);
        assert_eq!(tree.generation, 4);
        let l = &tree.gateways[0].listeners[0];
        assert_eq!(
            (tree.gateways[0].name.as_str(), l.name.as_str()),
            ("db/gw", "pg")
        );
        assert_eq!((l.protocol.as_str(), l.bind), ("TCP", bind));
        let rule = &l.hosts[0].rules[0];
        assert_eq!(rule.route, "TCPRoute/db/pg");
        let b = &rule.backends;
        assert_eq!((b[0].target.as_str(), b[0].weight), ("db/pg:5432", 3));
        let states: Vec<_> = b[0].endpoints.iter().map(|e| e.state.as_str()).collect();
        assert_eq!(states, ["ready", "ejected", "terminating"]);
        assert_eq!(b[1].invalid.as_deref(), Some("Service db/gone not found"));
    }

    #[test]
    fn an_empty_table_draws_no_gateway() {
        let tree = build(&RouteTable::default(), &[]);
        assert!(tree.gateways.is_empty());
        let back: RouteTree = serde_json::from_str(&serde_json::to_string(&tree).unwrap()).unwrap();
        assert_eq!(back, tree);
    }
}
