//! Incremental translation equals full translation: random sequences of changes (HTTPRoutes
//! and GRPCRoutes,
//! Gateways and their listeners, Services, EndpointSlices, ReferenceGrants, Secrets,
//! TrafficPolicies added,
//! removed, modified, or replaced by an equal copy) are applied to a snapshot, and after
//! each one the translation through a long-lived `Incremental` must serialize exactly like a
//! fresh full translation of the same snapshot: the table (`/debug/config`) and the status.
//! Every step translates at a later time: a reused route status keeps the transition times of
//! the translation that computed it, so the reports must be equal but for those times, and
//! sealed one after the other, as they are published, exactly equal. Namespace labels change
//! too, and listeners select routes by them. Seeded, so a failure names the seed and step that
//! reproduce it.

use std::collections::BTreeMap;
use std::sync::Arc;

use edgeplane::snapshot::Snapshot;
use edgeplane::status::SealedReport;
use edgeplane::table::{AuthBackend, RouteTable, RuleFilters, ServedCertificates};
use edgeplane::translate::{translate_with, Incremental, TranslateOptions};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use serde_json::{json, Value};

const NAMESPACES: [&str; 2] = ["a", "b"];
const HOSTS: [&str; 4] = ["a.ex.com", "b.ex.com", "*.ex.com", "c.other.org"];

fn options() -> TranslateOptions {
    options_at(0)
}

/// Options of the translation of step `at`: one second later per step.
fn options_at(at: usize) -> TranslateOptions {
    let start: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("timestamp");
    TranslateOptions {
        ingress: Default::default(),
        controller_name: "x/y".into(),
        bind_address: "127.0.0.1".parse().expect("ip"),
        now: start + jiff::SignedDuration::from_secs(i64::try_from(at).unwrap_or(0)),
        generation: 1,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    }
}

/// Random objects from small name pools, so changes collide with references often.
struct Gen {
    rng: fastrand::Rng,
    certs: Vec<(String, String)>,
}

impl Gen {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.rng.usize(..from.len())]
    }

    fn ns(&mut self) -> &'static str {
        self.pick(&NAMESPACES)
    }

    fn meta(&mut self, name: String, ns: &str) -> Value {
        json!({"name": name, "namespace": ns, "generation": self.rng.i64(1..3)})
    }

    fn meta_in(&mut self, name: String) -> Value {
        let ns = self.ns();
        self.meta(name, ns)
    }

    fn gateway(&mut self, name: String) -> Value {
        let listeners: Vec<Value> = (0..self.rng.usize(1..4))
            .map(|i| {
                let port = self
                    .pick(&["80", "8080", "443"])
                    .parse::<u16>()
                    .unwrap_or(80);
                let mut l = json!({"name": format!("l{i}"), "port": port,
                    "protocol": if port == 443 { "HTTPS" } else { "HTTP" },
                    "allowedRoutes": {"namespaces": {"from": self.pick(&["Same", "All", "Selector"]),
                        "selector": {"matchLabels": {"team": self.pick(&["a", "b"])}}}}});
                if self.rng.bool() {
                    l["hostname"] = json!(self.pick(&HOSTS[..3]));
                }
                if port == 443 {
                    let (secret, ns) = (format!("k{}", self.rng.u8(0..2)), self.ns());
                    l["tls"] = json!({"mode": "Terminate",
                        "certificateRefs": [{"name": secret, "namespace": ns}]});
                }
                l
            })
            .collect();
        let mut spec = json!({"gatewayClassName": "c", "listeners": listeners});
        if self.rng.bool() {
            spec["allowedListeners"] = json!({"namespaces": {
                "from": self.pick(&["Same", "All", "Selector", "None"]),
                "selector": {"matchLabels": {"team": self.pick(&["a", "b"])}}}});
        }
        json!({"metadata": self.meta(name, "a"), "spec": spec})
    }

    /// A ListenerSet on one of the Gateways, with the listeners of a Gateway (so they collide
    /// with the Gateway's and each other's) and a creation time deciding its precedence.
    fn listener_set(&mut self, name: String) -> Value {
        let gateway = self.gateway(String::new());
        let mut meta = self.meta_in(name);
        meta["creationTimestamp"] = json!(format!("2026-01-0{}T00:00:00Z", self.rng.u8(1..4)));
        json!({"metadata": meta, "spec": {
            "parentRef": {"name": format!("g{}", self.rng.u8(0..3)), "namespace": "a"},
            "listeners": gateway["spec"]["listeners"]}})
    }

    fn backend_ref(&mut self) -> Value {
        let mut b = json!({"name": format!("s{}", self.rng.u8(0..4)),
            "port": self.pick(&["80", "81"]).parse::<i32>().unwrap_or(80)});
        if self.rng.u8(0..4) == 0 {
            b["namespace"] = json!(self.ns());
        }
        if self.rng.u8(0..4) == 0 {
            b["weight"] = json!(self.rng.u8(0..3));
        }
        b
    }

    fn route(&mut self, name: String) -> Value {
        let ns = self.ns();
        let parents: Vec<Value> = (0..self.rng.usize(1..3))
            .map(|_| {
                let mut p = if self.rng.u8(0..3) == 0 {
                    json!({"kind": "ListenerSet", "name": format!("ls{}", self.rng.u8(0..3)),
                        "namespace": self.ns()})
                } else {
                    json!({"name": format!("g{}", self.rng.u8(0..3)), "namespace": "a"})
                };
                if self.rng.u8(0..3) == 0 {
                    p["sectionName"] = json!(format!("l{}", self.rng.u8(0..2)));
                }
                p
            })
            .collect();
        let rules: Vec<Value> = (0..self.rng.usize(1..3))
            .map(|_| {
                let path = if self.rng.u8(0..10) == 0 {
                    json!({"type": "RegularExpression", "value": "/(["})
                } else {
                    json!({"type": "PathPrefix", "value": self.pick(&["/", "/x", "/y"])})
                };
                let backends: Vec<Value> = (0..self.rng.usize(0..3))
                    .map(|_| self.backend_ref())
                    .collect();
                let mut rule = json!({"matches": [{"path": path}], "backendRefs": backends});
                if self.rng.u8(0..4) == 0 {
                    rule["filters"] = json!([{"type": "RequestMirror",
                        "requestMirror": {"backendRef": self.backend_ref()}}]);
                } else if self.rng.u8(0..5) == 0 {
                    rule["filters"] = json!([{"type": "ExternalAuth",
                        "externalAuth": {"protocol": "HTTP", "backendRef": self.backend_ref()}}]);
                }
                rule
            })
            .collect();
        let hosts: Vec<&str> = HOSTS.iter().copied().filter(|_| self.rng.bool()).collect();
        let mut meta = self.meta(name, ns);
        meta["creationTimestamp"] = json!(format!("2026-01-0{}T00:00:00Z", self.rng.u8(1..4)));
        json!({"metadata": meta,
            "spec": {"parentRefs": parents, "hostnames": hosts, "rules": rules}})
    }

    /// A GRPCRoute: an HTTPRoute's parents, hostnames and backends, with gRPC method matches
    /// (an invalid regular expression now and then). It shares its name pool with the
    /// HTTPRoutes, so routes of both kinds with one name coexist.
    fn grpc_route(&mut self, name: String) -> Value {
        let mut route = self.route(name);
        if let Some(rules) = route["spec"]["rules"].as_array_mut() {
            for rule in rules {
                let method = match self.rng.u8(0..5) {
                    0 => json!({"service": "a.S", "method": "M"}),
                    1 => json!({"service": "a.S"}),
                    2 => json!({"method": "M"}),
                    3 => json!({"type": "RegularExpression", "service": "(["}),
                    _ => json!({"type": "RegularExpression", "service": "a\\..*"}),
                };
                rule["matches"] = json!([{"method": method}]);
                // GRPCRoute has no ExternalAuth filter.
                if rule["filters"][0]["type"] == "ExternalAuth" {
                    rule.as_object_mut().map(|r| r.remove("filters"));
                }
            }
        }
        route
    }

    fn service(&mut self, name: String) -> Value {
        let mut port =
            json!({"name": "http", "port": self.pick(&["80", "81"]).parse::<i32>().unwrap_or(80)});
        match self.rng.u8(0..6) {
            0 => port["appProtocol"] = json!("kubernetes.io/h2c"),
            1 => port["appProtocol"] = json!("bogus"),
            _ => {}
        }
        json!({"metadata": (self.meta_in(name)), "spec": {"ports": [port]}})
    }

    fn slice(&mut self, name: String) -> Value {
        let endpoints: Vec<Value> = (0..self.rng.usize(0..3))
            .map(|_| {
                json!({"addresses": [format!("10.0.0.{}", self.rng.u8(1..6))],
                "conditions": {"ready": self.rng.u8(0..4) != 0}})
            })
            .collect();
        let mut meta = {
            let ns = self.ns();
            self.meta(name, ns)
        };
        meta["labels"] = json!({"kubernetes.io/service-name": format!("s{}", self.rng.u8(0..4))});
        json!({"metadata": meta, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}], "endpoints": endpoints})
    }

    fn grant(&mut self, name: String) -> Value {
        let from_ns = self.ns();
        let group = "gateway.networking.k8s.io";
        let kind = self.pick(&["HTTPRoute", "GRPCRoute", "Gateway"]);
        let mut to = json!({"group": "", "kind": self.pick(&["Service", "Secret"])});
        if self.rng.bool() {
            to["name"] = json!(self.pick(&["s0", "s1", "k0"]));
        }
        json!({"metadata": (self.meta_in(name)),
            "spec": {"from": [{"group": group, "kind": kind, "namespace": from_ns}], "to": [to]}})
    }

    /// A TrafficPolicy on a Gateway (or one of its listeners), an HTTPRoute or a Service.
    fn policy(&mut self, name: String) -> Value {
        let mut meta = self.meta_in(name);
        meta["creationTimestamp"] = json!(format!("2026-01-0{}T00:00:00Z", self.rng.u8(1..4)));
        let mut spec = match self.rng.u8(0..3) {
            0 => {
                meta["namespace"] = json!("a");
                let mut t = json!({"group": "gateway.networking.k8s.io", "kind": "Gateway",
                    "name": format!("g{}", self.rng.u8(0..3))});
                if self.rng.bool() {
                    t["sectionName"] = json!(format!("l{}", self.rng.u8(0..2)));
                }
                json!({"targetRefs": [t], "timeouts": {"request": "2s"}})
            }
            1 => json!({"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                "name": format!("r{}", self.rng.u8(0..12))}],
                "retry": {"attempts": self.rng.u8(1..3)}}),
            _ => json!({"targetRefs": [{"group": "", "kind": "Service",
                "name": format!("s{}", self.rng.u8(0..4))}],
                "loadBalancer": {"algorithm": self.pick(&["RoundRobin", "LeastRequest"])}}),
        };
        if spec["targetRefs"][0]["kind"] == "Service" {
            spec["circuitBreaker"] = json!({"maxConnections": self.rng.u8(1..4)});
        } else {
            spec["rateLimit"] = json!({"requests": self.rng.u8(1..4), "unit": "Second"});
            if self.rng.u8(0..3) == 0 {
                let service = format!("s{}", self.rng.u8(0..4));
                spec["externalAuth"] = json!({"protocol": "GRPC",
                    "backendRef": {"name": service, "port": 80}});
            }
        }
        json!({"metadata": meta, "spec": spec})
    }

    fn secret(&mut self, name: String) -> Secret {
        let ns = self.ns();
        let (crt, key) = match self.rng.u8(0..5) {
            0 => ("garbage".to_owned(), "garbage".to_owned()),
            n => self.certs[usize::from(n) % self.certs.len()].clone(),
        };
        let meta = serde_json::from_value(self.meta(name, ns)).expect("metadata");
        Secret {
            metadata: meta,
            type_: Some("kubernetes.io/tls".into()),
            data: Some(BTreeMap::from([
                ("tls.crt".to_owned(), ByteString(crt.into_bytes())),
                ("tls.key".to_owned(), ByteString(key.into_bytes())),
            ])),
            ..Default::default()
        }
    }
}

fn object<T: serde::de::DeserializeOwned>(v: Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v).expect("generated object decodes"))
}

/// Adds, removes, modifies or re-creates (equal content, new `Arc`) one object of `list`.
fn change<T: Clone>(
    rng: &mut fastrand::Rng,
    list: &mut Vec<Arc<T>>,
    pool: usize,
    name_of: impl Fn(&T) -> String,
    mut make: impl FnMut(String) -> Arc<T>,
) {
    let op = rng.u8(0..4);
    if op == 0 || list.is_empty() {
        let used: Vec<String> = list.iter().map(|o| name_of(o)).collect();
        if let Some(name) = (0..pool).map(|i| i.to_string()).find(|n| !used.contains(n)) {
            list.push(make(name));
        }
        return;
    }
    let i = rng.usize(..list.len());
    match op {
        1 => {
            list.remove(i);
        }
        2 => list[i] = make(name_of(&list[i])),
        _ => list[i] = Arc::new(T::clone(&list[i])),
    }
}

/// Name suffix of a generated object (`g3` -> `3`), so a modification keeps its identity.
fn suffix(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or("");
    name.trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .to_owned()
}

fn step(g: &mut Gen, s: &mut Snapshot) {
    let mut rng = fastrand::Rng::with_seed(g.rng.u64(..));
    match rng.u8(0..15) {
        14 => change(
            &mut rng,
            &mut s.traffic_policies,
            4,
            |o| suffix(&o.metadata),
            |n| object(g.policy(format!("tp{n}"))),
        ),
        13 => change(
            &mut rng,
            &mut s.listener_sets,
            3,
            |o| suffix(&o.metadata),
            |n| object(g.listener_set(format!("ls{n}"))),
        ),
        11 | 12 => change(
            &mut rng,
            &mut s.grpc_routes,
            6,
            |o| suffix(&o.metadata),
            |n| object(g.grpc_route(format!("r{n}"))),
        ),
        0..=2 => change(
            &mut rng,
            &mut s.http_routes,
            12,
            |o| suffix(&o.metadata),
            |n| object(g.route(format!("r{n}"))),
        ),
        3 => change(
            &mut rng,
            &mut s.gateways,
            3,
            |o| suffix(&o.metadata),
            |n| object(g.gateway(format!("g{n}"))),
        ),
        4 => change(
            &mut rng,
            &mut s.services,
            4,
            |o| suffix(&o.metadata),
            |n| object(g.service(format!("s{n}"))),
        ),
        5 | 6 => change(
            &mut rng,
            &mut s.endpoint_slices,
            6,
            |o| suffix(&o.metadata),
            |n| object(g.slice(format!("e{n}"))),
        ),
        7 => change(
            &mut rng,
            &mut s.reference_grants,
            3,
            |o| suffix(&o.metadata),
            |n| object(g.grant(format!("rg{n}"))),
        ),
        10 => {
            // A namespace relabelled, dropped or restored.
            let name = NAMESPACES[rng.usize(..NAMESPACES.len())];
            s.namespaces
                .retain(|n| n.metadata.name.as_deref() != Some(name));
            if rng.u8(0..4) != 0 {
                let team = g.pick(&["a", "b"]);
                s.namespaces.push(namespace(name, team));
            }
        }
        _ => change(
            &mut rng,
            &mut s.secrets,
            2,
            |o| suffix(&o.metadata),
            |n| Arc::new(g.secret(format!("k{n}"))),
        ),
    }
}

fn namespace(name: &str, team: &str) -> Arc<k8s_openapi::api::core::v1::Namespace> {
    object(json!({"metadata": {"name": name, "labels": {"team": team}}}))
}

/// Every pool full, so references resolve and routes attach from the first step.
fn initial(g: &mut Gen) -> Snapshot {
    let class = json!({"metadata": {"name": "c", "generation": 1},
        "spec": {"controllerName": "x/y"}});
    let namespaces = NAMESPACES.iter().map(|n| namespace(n, n)).collect();
    Snapshot {
        gateway_classes: vec![object(class)],
        namespaces,
        gateways: (0..3).map(|i| object(g.gateway(format!("g{i}")))).collect(),
        listener_sets: (0..3)
            .map(|i| object(g.listener_set(format!("ls{i}"))))
            .collect(),
        http_routes: (0..12).map(|i| object(g.route(format!("r{i}")))).collect(),
        grpc_routes: (0..4)
            .map(|i| object(g.grpc_route(format!("r{i}"))))
            .collect(),
        services: (0..4).map(|i| object(g.service(format!("s{i}")))).collect(),
        endpoint_slices: (0..6).map(|i| object(g.slice(format!("e{i}")))).collect(),
        reference_grants: (0..3).map(|i| object(g.grant(format!("rg{i}")))).collect(),
        secrets: (0..2)
            .map(|i| Arc::new(g.secret(format!("k{i}"))))
            .collect(),
        traffic_policies: (0..3).map(|i| object(g.policy(format!("tp{i}")))).collect(),
        ..Snapshot::default()
    }
}

/// Every mirror target with its endpoints: `/debug/config` names a mirror's Service only, but
/// the proxy sends copies to its endpoints, so they must be as fresh as the backends'.
fn mirror_endpoints(table: &RouteTable) -> Vec<String> {
    let mut out = Vec::new();
    let mut hosts = Vec::new();
    let mut add = |f: &RuleFilters| {
        for m in &f.mirrors {
            out.push(format!("{} {:?}", m.backend.service, m.backend.endpoints));
        }
        let policy = f.policy.as_ref().and_then(|p| p.external_auth.as_ref());
        let filters = f.external_auth.iter().flat_map(|list| list.iter());
        for a in policy.into_iter().chain(filters) {
            if let AuthBackend::Service(b) = &a.backend {
                out.push(format!("auth {} {:?}", b.service, b.endpoints));
            }
        }
    };
    for l in table.listeners.values() {
        for h in l.hosts.iter() {
            let policy = h.policy.as_ref().and_then(|p| p.external_auth.as_ref());
            if let Some(a) = policy {
                if let AuthBackend::Service(b) = &a.backend {
                    hosts.push(format!("host auth {} {:?}", b.service, b.endpoints));
                }
            }
            for r in &h.rules {
                add(&r.filters);
                r.backends.backends.iter().for_each(|b| add(&b.filters));
            }
        }
    }
    out.extend(hosts);
    out
}

/// The reports as published so far: after full translations and after incremental ones.
#[derive(Default)]
struct Published {
    full: SealedReport,
    incremental: SealedReport,
}

/// `value` without any `lastTransitionTime`.
fn without_times(mut value: Value) -> Value {
    match &mut value {
        Value::Object(map) => {
            map.remove("lastTransitionTime");
            for v in map.values_mut() {
                *v = without_times(v.take());
            }
        }
        Value::Array(items) => {
            for v in items {
                *v = without_times(v.take());
            }
        }
        _ => {}
    }
    value
}

fn assert_same(
    seed: u64,
    at: usize,
    s: &Snapshot,
    cache: &mut Incremental,
    published: &mut Published,
) {
    let served = ServedCertificates::default();
    let options = options_at(at);
    let full = translate_with(s, &options, &served);
    let incremental = cache.translate(s, &options, &served);
    let json = |t: &edgeplane::translate::Translation| {
        (
            serde_json::to_value(&t.table).expect("table serializes"),
            without_times(serde_json::to_value(&t.status).expect("status serializes")),
        )
    };
    assert_eq!(
        mirror_endpoints(&full.table),
        mirror_endpoints(&incremental.table),
        "seed {seed} step {at}: mirror endpoints differ"
    );
    let (full_json, incremental_json) = (json(&full), json(&incremental));
    assert!(
        full_json.0 == incremental_json.0,
        "seed {seed} step {at}: tables differ\nfull: {}\nincremental: {}",
        full_json.0,
        incremental_json.0
    );
    assert!(
        full_json.1 == incremental_json.1,
        "seed {seed} step {at}: statuses differ\nfull: {}\nincremental: {}",
        full_json.1,
        incremental_json.1
    );
    published.full = full.status.seal(&published.full);
    published.incremental = incremental.status.seal(&published.incremental);
    let sealed = |r: &SealedReport| serde_json::to_value(r).expect("status serializes");
    let (full, incremental) = (sealed(&published.full), sealed(&published.incremental));
    assert!(
        full == incremental,
        "seed {seed} step {at}: published statuses differ\nfull: {full}\nincremental: {incremental}"
    );
}

#[test]
fn incremental_equals_full_translation_after_every_change() {
    let certs: Vec<(String, String)> = [["a.ex.com", "*.ex.com"], ["b.ex.com", "c.other.org"]]
        .iter()
        .map(|names| {
            let c = rcgen::generate_simple_self_signed(names.map(str::to_owned).to_vec())
                .expect("rcgen makes a certificate");
            (c.cert.pem(), c.signing_key.serialize_pem())
        })
        .collect();
    let (mut compiled_reused, mut reattached) = (0, 0);
    for seed in 0..20u64 {
        let mut g = Gen {
            rng: fastrand::Rng::with_seed(seed),
            certs: certs.clone(),
        };
        let mut snapshot = initial(&mut g);
        // The first translation compiles its routes on one to three threads.
        let mut cache = Incremental::with_threads(1 + (seed % 3) as usize);
        let mut published = Published::default();
        for at in 0..50 {
            step(&mut g, &mut snapshot);
            assert_same(seed, at, &snapshot, &mut cache, &mut published);
            compiled_reused += cache.last().reused;
            reattached += cache.last().reattached;
        }
    }
    // The sequences must exercise reuse, or the comparison proves nothing.
    assert!(
        compiled_reused > 1000,
        "only {compiled_reused} routes reused"
    );
    assert!(reattached > 500, "only {reattached} attachments reused");
}

/// A full translation on several threads (each compiling a part of the routes, resolving
/// their backends on caches of its own) equals one on a single thread, for every number of
/// threads, after random changes.
#[test]
fn full_translation_on_several_threads_equals_one() {
    let served = ServedCertificates::default();
    for seed in 0..20u64 {
        let mut g = Gen {
            rng: fastrand::Rng::with_seed(seed),
            certs: vec![("garbage".into(), "garbage".into())],
        };
        let mut snapshot = initial(&mut g);
        for at in 0..5 {
            step(&mut g, &mut snapshot);
            let options = options_at(at);
            let json = |threads: usize| {
                let t = Incremental::with_threads(threads).translate(&snapshot, &options, &served);
                (
                    serde_json::to_value(&t.table).expect("table serializes"),
                    serde_json::to_value(&t.status).expect("status serializes"),
                    mirror_endpoints(&t.table),
                )
            };
            let one = json(1);
            for threads in [2, 3, 5] {
                assert!(
                    json(threads) == one,
                    "seed {seed} step {at}: {threads} threads differ from one"
                );
            }
        }
    }
}

/// An EndpointSlice change recompiles no route: the routes using its Service are relinked to
/// the new endpoints, the others reused.
#[test]
fn endpoint_changes_relink_routes_without_compiling() {
    let mut g = Gen {
        rng: fastrand::Rng::with_seed(7),
        certs: vec![("garbage".into(), "garbage".into())],
    };
    let route = |name: &str, service: &str| {
        object(json!({"metadata": {"name": name, "namespace": "a"},
            "spec": {"parentRefs": [{"name": "g0"}], "rules": [{"backendRefs": [{"name": service, "port": 80}],
                "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": service, "port": 80}}}]}]}}))
    };
    let service = |name: &str| {
        object(json!({"metadata": {"name": name, "namespace": "a"},
            "spec": {"ports": [{"name": "http", "port": 80}]}}))
    };
    let slice = |service: &str, ip: &str| {
        object(json!({"metadata": {"name": service, "namespace": "a",
                "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": [ip]}]}))
    };
    let mut gateway = g.gateway("g0".into());
    gateway["spec"]["listeners"] = json!([{"name": "l0", "port": 80, "protocol": "HTTP"}]);
    let mut s = initial(&mut g);
    s.gateways = vec![object(gateway)];
    s.http_routes = vec![route("r0", "s0"), route("r1", "s1")];
    s.grpc_routes.clear();
    s.services = vec![service("s0"), service("s1")];
    s.endpoint_slices = vec![slice("s0", "10.0.0.1"), slice("s1", "10.0.0.2")];
    s.reference_grants.clear();
    s.secrets.clear();
    let mut cache = Incremental::default();
    let mut published = Published::default();
    assert_same(7, 0, &s, &mut cache, &mut published);
    s.endpoint_slices[0] = slice("s0", "10.0.0.3");
    assert_same(7, 1, &s, &mut cache, &mut published);
    let reuse = cache.last();
    assert_eq!((reuse.reused, reuse.relinked, reuse.compiled), (1, 1, 0));
    let table = serde_json::to_string(
        &cache
            .translate(&s, &options(), &ServedCertificates::default())
            .table,
    )
    .expect("table serializes");
    assert!(
        table.contains("10.0.0.3:8080") && !table.contains("10.0.0.1:8080"),
        "{table}"
    );
    // An object added or removed rechecks only the routes naming its Service.
    let checked = |cache: &Incremental| {
        let r = cache.last();
        (r.reused, r.relinked, r.compiled, r.rechecked)
    };
    s.endpoint_slices.insert(1, slice("s0", "10.0.0.4"));
    assert_same(7, 2, &s, &mut cache, &mut published);
    assert_eq!(checked(&cache), (1, 1, 0, 1), "a slice added");
    s.endpoint_slices.remove(1);
    assert_same(7, 3, &s, &mut cache, &mut published);
    assert_eq!(checked(&cache), (1, 1, 0, 1), "a slice removed");
    s.services.insert(0, service("s2"));
    assert_same(7, 4, &s, &mut cache, &mut published);
    assert_eq!(checked(&cache), (2, 0, 0, 0), "an unused Service added");
    s.services.remove(1);
    assert_same(7, 5, &s, &mut cache, &mut published);
    assert_eq!(checked(&cache), (1, 0, 1, 1), "a used Service removed");
}
