//! What the dashboard page shows, in one JSON document (`/api/overview`): Gateways with their
//! listeners and addresses, routes of every kind, policies and the other objects with their
//! conditions, backends with their endpoints, certificates with their expiry and the recent
//! reconciles. Drawn from the published status and table at the time of the request.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use serde::Serialize;
use serde_json::Value;

use super::conditions::{conditions, summarize, summarize_conditions, Summary};
use super::tree::{endpoints, route_name, TreeEndpoint};
use crate::published::{Published, Reconcile};
use crate::status::SealedReport;
use crate::table::{BackendSet, BackendTarget, L4Routes, RouteTable};

/// The page's data.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    pub generation: u64,
    pub ready: bool,
    /// When this was drawn, Unix milliseconds (ages are computed against it).
    pub now_unix_ms: i64,
    pub gateways: Vec<Gateway>,
    pub routes: Vec<Object>,
    pub policies: Vec<Object>,
    /// GatewayClasses, ListenerSets and any other kind with a status.
    pub others: Vec<Object>,
    pub backends: Vec<Backend>,
    pub certificates: Vec<Certificate>,
    pub reconciles: Vec<Reconcile>,
}

/// A Gateway: its conditions, addresses and listeners.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gateway {
    #[serde(flatten)]
    pub summary: Summary,
    pub addresses: Vec<String>,
    pub listeners: Vec<Listener>,
}

/// A Gateway listener: conditions, attached routes and the sockets it is served on.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    #[serde(flatten)]
    pub summary: Summary,
    pub attached_routes: u64,
    pub binds: Vec<SocketAddr>,
}

/// A route, policy or other object: its summary and what it is attached to (parents of a
/// route, ancestors of a policy) with each one's conditions.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Object {
    #[serde(flatten)]
    pub summary: Summary,
    pub attachments: Vec<Attachment>,
}

/// One parent or ancestor: the reference as `Kind namespace/name[/section]` and its summary.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    pub target: String,
    pub accepted: String,
    pub resolved_refs: String,
    pub reason: String,
    pub message: String,
}

/// A Service port the table sends traffic to, its endpoints and the routes that use it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Backend {
    pub service: String,
    pub protocol: String,
    pub endpoints: Vec<TreeEndpoint>,
    pub routes: BTreeSet<String>,
}

/// A served certificate: its Secret, names, expiry and the listeners serving it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Certificate {
    pub secret: String,
    pub dns_names: Vec<String>,
    /// Unix seconds; `None` when the certificate's validity could not be read.
    pub not_after: Option<i64>,
    pub listeners: BTreeSet<String>,
}

/// Draws the page's data.
pub fn build(
    table: &RouteTable,
    status: &SealedReport,
    published: &Published,
    ejected: &[SocketAddr],
) -> Overview {
    let entries = match serde_json::to_value(status) {
        Ok(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    let binds = listener_binds(table);
    let mut out = Overview {
        generation: table.generation,
        ready: published.is_ready(),
        now_unix_ms: jiff::Timestamp::now().as_millisecond(),
        gateways: Vec::new(),
        routes: Vec::new(),
        policies: Vec::new(),
        others: Vec::new(),
        backends: backends(table, ejected),
        certificates: certificates(table),
        reconciles: published.recent_reconciles(),
    };
    for e in &entries {
        let status = &e["status"];
        let summary = summarize(e);
        if e["kind"] == "Gateway" {
            out.gateways.push(gateway(e, summary, &binds));
        } else if status.get("parents").is_some() {
            out.routes
                .push(object(summary, &status["parents"], "parentRef"));
        } else if status.get("ancestors").is_some() {
            out.policies
                .push(object(summary, &status["ancestors"], "ancestorRef"));
        } else {
            out.others.push(object(summary, &Value::Null, ""));
        }
    }
    out
}

fn gateway(e: &Value, summary: Summary, binds: &BTreeMap<String, Vec<SocketAddr>>) -> Gateway {
    let status = &e["status"];
    let prefix = format!("{}/{}/", summary.namespace, summary.name);
    let listeners = status["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            let name = l["name"].as_str().unwrap_or_default();
            let conds: Vec<&Value> = l["conditions"].as_array().into_iter().flatten().collect();
            Listener {
                summary: summarize_conditions("Listener", &summary.namespace, name, &conds),
                attached_routes: l["attachedRoutes"].as_u64().unwrap_or(0),
                binds: binds
                    .get(&format!("{prefix}{name}"))
                    .cloned()
                    .unwrap_or_default(),
            }
        })
        .collect();
    Gateway {
        addresses: status["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["value"].as_str().map(str::to_owned))
            .collect(),
        summary,
        listeners,
    }
}

fn object(summary: Summary, list: &Value, reference: &str) -> Object {
    let attachments = list
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let own = serde_json::json!({ "status": { "conditions": p["conditions"] } });
            let s = summarize_conditions("", "", "", &conditions(&own));
            Attachment {
                target: reference_text(&p[reference]),
                accepted: s.accepted,
                resolved_refs: s.resolved_refs,
                reason: s.reason,
                message: s.message,
            }
        })
        .collect();
    Object {
        summary,
        attachments,
    }
}

/// `Gateway default/gw/http`: a parentRef or ancestorRef as one string.
fn reference_text(r: &Value) -> String {
    let s = |k: &str| r[k].as_str().unwrap_or_default();
    let mut text = format!(
        "{} ",
        if s("kind").is_empty() {
            "Gateway"
        } else {
            s("kind")
        }
    );
    if !s("namespace").is_empty() {
        text.push_str(s("namespace"));
        text.push('/');
    }
    text.push_str(s("name"));
    if !s("sectionName").is_empty() {
        text.push('/');
        text.push_str(s("sectionName"));
    }
    if let Some(port) = r["port"].as_u64() {
        text.push_str(&format!(":{port}"));
    }
    text
}

/// The sockets each Gateway listener (`namespace/gateway/listener`) is served on.
fn listener_binds(table: &RouteTable) -> BTreeMap<String, Vec<SocketAddr>> {
    let mut out: BTreeMap<String, Vec<SocketAddr>> = BTreeMap::new();
    for l in table.listeners.values().chain(table.udp.values()) {
        for s in &l.sources {
            if s.listener_set.is_none() {
                let key = format!("{}/{}/{}", s.namespace, s.gateway, s.listener);
                out.entry(key).or_default().push(l.bind);
            }
        }
    }
    out
}

/// Every Service port of the table, with the routes that send to it.
fn backends(table: &RouteTable, ejected: &[SocketAddr]) -> Vec<Backend> {
    let mut out: BTreeMap<String, Backend> = BTreeMap::new();
    let mut add = |route: String, set: &BackendSet| {
        for b in &set.backends {
            if let BackendTarget::Service(s) = &b.target {
                out.entry(s.service.to_string())
                    .or_insert_with(|| Backend {
                        service: s.service.to_string(),
                        protocol: format!("{:?}", s.protocol).to_lowercase(),
                        endpoints: endpoints(&s.endpoints, &s.terminating, ejected),
                        routes: BTreeSet::new(),
                    })
                    .routes
                    .insert(route.clone());
            }
        }
    };
    for l in table.listeners.values().chain(table.udp.values()) {
        for h in l.hosts.iter() {
            for r in &h.rules {
                add(route_name(&r.route), &r.backends);
            }
        }
        match &l.l4 {
            Some(L4Routes::Tcp { route: Some(r) } | L4Routes::Udp { route: Some(r) }) => {
                add(route_name(&r.route), &r.backends);
            }
            Some(L4Routes::Tls(sni)) => {
                for sl in &sni.listeners {
                    for (_, r) in &sl.hosts {
                        add(route_name(&r.route), &r.backends);
                    }
                }
            }
            _ => {}
        }
    }
    out.into_values().collect()
}

/// Every certificate the HTTPS sockets serve, by Secret.
fn certificates(table: &RouteTable) -> Vec<Certificate> {
    let mut out: BTreeMap<String, Certificate> = BTreeMap::new();
    for l in table.listeners.values() {
        for t in l.tls.iter().flat_map(|t| t.iter()) {
            let c = &t.certificate;
            out.entry(c.secret.clone())
                .or_insert_with(|| Certificate {
                    secret: c.secret.clone(),
                    dns_names: c.dns_names.clone(),
                    not_after: c.not_after,
                    listeners: BTreeSet::new(),
                })
                .listeners
                .insert(t.source.clone());
        }
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use crate::status::{ObjectStatus, StatusReport};
    use serde_json::json;

    fn entry(v: Value) -> ObjectStatus {
        serde_json::from_value(v).expect("status entry")
    }

    #[test]
    fn entries_are_sorted_into_gateways_routes_policies_and_others() {
        let cond = |ty: &str, status: &str, reason: &str| {
            json!({"type": ty, "status": status, "reason": reason, "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1})
        };
        let report = StatusReport {
            entries: vec![
                entry(json!({"kind": "GatewayClass", "name": "c",
                    "status": {"conditions": [cond("Accepted", "True", "Accepted")]}})),
                entry(json!({"kind": "Gateway", "namespace": "ns", "name": "gw",
                    "status": {"conditions": [cond("Accepted", "True", "Accepted")],
                        "addresses": [{"type": "IPAddress", "value": "10.0.0.1"}],
                        "listeners": [{"name": "http", "attachedRoutes": 2, "supportedKinds": [],
                            "conditions": [cond("Programmed", "False", "Invalid")]}]}})),
                entry(json!({"kind": "TCPRoute", "namespace": "ns", "name": "db",
                    "status": {"parents": [{"parentRef": {"name": "gw", "sectionName": "tcp"},
                        "controllerName": "x",
                        "conditions": [cond("Accepted", "False", "NotAllowedByListeners")]}]}})),
                entry(
                    json!({"kind": "BackendTLSPolicy", "namespace": "ns", "name": "tls",
                    "status": {"ancestors": [{"ancestorRef": {"kind": "Gateway",
                        "namespace": "ns", "name": "gw"}, "controllerName": "x",
                        "conditions": [cond("Accepted", "True", "Accepted")]}]}}),
                ),
            ],
        };
        let published = Published::new(Metrics::new());
        let o = build(&RouteTable::default(), &report.into(), &published, &[]);
        assert_eq!(o.gateways.len(), 1);
        let gw = &o.gateways[0];
        assert_eq!(gw.addresses, ["10.0.0.1"]);
        let l = &gw.listeners[0];
        assert_eq!(
            (l.summary.programmed.as_str(), l.attached_routes),
            ("False", 2)
        );
        let route = &o.routes[0];
        assert_eq!(route.summary.reason, "NotAllowedByListeners");
        assert_eq!(route.attachments[0].target, "Gateway gw/tcp");
        assert_eq!(route.attachments[0].accepted, "False");
        let policy = &o.policies[0];
        assert_eq!(policy.summary.kind, "BackendTLSPolicy");
        assert_eq!(policy.attachments[0].target, "Gateway ns/gw");
        assert_eq!(o.others[0].summary.kind, "GatewayClass");
        assert!(o.backends.is_empty() && o.certificates.is_empty());
    }
}
