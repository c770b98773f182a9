//! TrafficPolicy and ProxyConfig translation: precedence, each `Accepted` reason, what an
//! invalid policy applies, Service targets, and ProxyConfig resolution.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::kinds::crd::{ProxyConfig, TrafficPolicy};
use crate::snapshot::Snapshot;
use crate::status::ObjectKind;
use crate::table::{Balance, RouteTable, VirtualHost};
use crate::translate::testing::{options, snapshot};
use crate::translate::{gateway_service_config, translate, Translation};

const GATEWAY: &str = "metadata: {name: gw, namespace: default, generation: 1}\n\
spec:\n  gatewayClassName: c\n  listeners:\n  - {name: http, port: 80, protocol: HTTP}\n";

const ROUTE: &str = "metadata: {name: r, namespace: default, generation: 1}
spec:
  parentRefs: [{name: gw}]
  hostnames: [a.example]
  rules:
  - name: a
    matches: [{path: {type: PathPrefix, value: /a}}]
    backendRefs: [{name: svc, port: 80}]
  - name: b
    matches: [{path: {type: PathPrefix, value: /b}}]
    timeouts: {request: 5s}
    retry: {attempts: 1}
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /c}}]
    backendRefs: [{name: svc, port: 80}]
";

const SERVICE: &str = "metadata: {name: svc, namespace: default}\n\
spec: {ports: [{name: web, port: 80}]}\n";

/// A policy `name` created at second `created`, with `body` (YAML lines of its spec, indented
/// by two spaces).
fn policy(name: &str, created: u32, body: &str) -> Arc<TrafficPolicy> {
    let yaml = format!(
        "metadata: {{name: {name}, namespace: default, generation: 2, \
         creationTimestamp: \"2026-01-01T00:00:{created:02}Z\"}}\nspec:\n{body}"
    );
    Arc::new(serde_yaml_ng::from_str(&yaml).expect("policy fixture"))
}

fn world(policies: Vec<Arc<TrafficPolicy>>) -> Snapshot {
    let mut s = snapshot(&[GATEWAY.to_owned()]);
    s.http_routes = vec![Arc::new(serde_yaml_ng::from_str(ROUTE).unwrap())];
    s.services = vec![Arc::new(serde_yaml_ng::from_str(SERVICE).unwrap())];
    s.traffic_policies = policies;
    s
}

fn run(s: &Snapshot) -> Translation {
    translate(s, &options(Default::default()))
}

fn host(table: &RouteTable) -> &VirtualHost {
    let listener = table.listeners.values().next().expect("a listener");
    listener.hosts.find("a.example").expect("host a.example")
}

/// The table JSON of the rule whose path prefix is `path`.
fn rule(table: &RouteTable, path: &str) -> Value {
    let h = host(table);
    let r = h
        .rules
        .iter()
        .find(|r| {
            serde_json::to_string(&r.matcher)
                .unwrap()
                .contains(&format!("\"{path}\""))
        })
        .expect("rule");
    serde_json::to_value(&**r).unwrap()
}

fn accepted(t: &Translation, name: &str) -> Vec<(String, String, String)> {
    let entry = t
        .status
        .get(ObjectKind::TrafficPolicy, Some("default"), name)
        .unwrap_or_else(|| panic!("no status for {name}"));
    let json = entry.status.to_json();
    json["ancestors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let c = &a["conditions"][0];
            assert_eq!(c["observedGeneration"], 2);
            (
                a["ancestorRef"]["name"].as_str().unwrap().to_owned(),
                c["reason"].as_str().unwrap().to_owned(),
                c["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

const ROUTE_TARGET: &str =
    "  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]\n";

#[test]
fn rule_beats_route_beats_listener_beats_gateway() {
    let gw = "  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n";
    let listener = "  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: http}]\n";
    let rule_a = "  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: a}]\n";
    let s = world(vec![
        policy("gw", 1, &format!("{gw}  rateLimit: {{requests: 1, unit: Second}}\n  bodyLimits: {{maxRequestBytes: 100}}\n  timeouts: {{request: 1s}}\n  retry: {{attempts: 3}}\n")),
        policy("listener", 2, &format!("{listener}  rateLimit: {{requests: 2, unit: Second}}\n")),
        policy("route", 3, &format!("{ROUTE_TARGET}  rateLimit: {{requests: 3, unit: Second}}\n")),
        policy("rule", 4, &format!("{rule_a}  rateLimit: {{requests: 4, unit: Minute}}\n  timeouts: {{request: 2s}}\n")),
    ]);
    let t = run(&s);
    let h = host(&t.table).policy.clone().expect("host policy");
    assert_eq!(
        h.rate_limit.as_ref().unwrap().requests,
        2,
        "listener over Gateway"
    );
    assert_eq!(
        h.max_request_body,
        Some(100),
        "Gateway fills what the listener leaves"
    );
    let a = rule(&t.table, "/a");
    assert_eq!(a["filters"]["policy"]["rateLimit"]["requests"], 4);
    assert_eq!(a["filters"]["policy"]["rateLimit"]["per"], "60000ms");
    assert_eq!(a["filters"]["timeouts"]["request"], "2000ms", "rule policy");
    assert_eq!(a["filters"]["retry"]["attempts"], 3, "Gateway policy");
    let b = rule(&t.table, "/b");
    assert_eq!(b["filters"]["timeouts"]["request"], "5000ms", "route's own");
    assert_eq!(b["filters"]["retry"]["attempts"], 1, "route's own");
    assert_eq!(b["filters"]["policy"]["rateLimit"]["requests"], 3);
    let c = rule(&t.table, "/c");
    assert_eq!(c["filters"]["policy"]["rateLimit"]["requests"], 3);
    assert_eq!(
        c["filters"]["timeouts"]["request"], "1000ms",
        "Gateway policy"
    );
    for name in ["gw", "listener", "route", "rule"] {
        let got = accepted(&t, name);
        assert!(
            got.iter().all(|(_, r, _)| r == "Accepted"),
            "{name}: {got:?}"
        );
    }
    let listener_status = t
        .status
        .get(ObjectKind::TrafficPolicy, Some("default"), "listener")
        .unwrap()
        .status
        .to_json();
    assert_eq!(
        listener_status["ancestors"][0]["ancestorRef"]["sectionName"],
        "http"
    );
    assert_eq!(listener_status["ancestors"][0]["controllerName"], "x/y");
}

#[test]
fn the_oldest_wins_a_tie_and_a_fully_shadowed_policy_is_conflicted() {
    let s = world(vec![
        policy("young", 9, &format!("{ROUTE_TARGET}  rateLimit: {{requests: 20, unit: Second}}\n")),
        policy("old", 1, &format!("{ROUTE_TARGET}  rateLimit: {{requests: 10, unit: Second}}\n")),
        policy("partial", 5, &format!("{ROUTE_TARGET}  rateLimit: {{requests: 30, unit: Second}}\n  ipAccess: {{deny: [10.0.0.0/8]}}\n")),
    ]);
    let t = run(&s);
    let a = rule(&t.table, "/a");
    assert_eq!(a["filters"]["policy"]["rateLimit"]["requests"], 10);
    assert_eq!(
        a["filters"]["policy"]["rateLimit"]["id"],
        "default/old:10/s+0:clientIP"
    );
    assert_eq!(a["filters"]["policy"]["ipAccess"]["deny"][0], "10.0.0.0/8");
    let young = accepted(&t, "young");
    assert_eq!(young[0].1, "Conflicted");
    assert!(young[0].2.contains("default/old"), "{young:?}");
    assert_eq!(accepted(&t, "partial")[0].1, "Accepted");
    assert_eq!(accepted(&t, "old")[0].0, "gw", "ancestor is the Gateway");
}

#[test]
fn missing_targets_are_their_own_ancestors() {
    let s = world(vec![
        policy("no-route", 1, "  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: gone}]\n  rateLimit: {requests: 1, unit: Second}\n"),
        policy("no-listener", 2, "  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: nope}]\n  rateLimit: {requests: 1, unit: Second}\n"),
        policy("no-rule", 3, "  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: z}]\n  rateLimit: {requests: 1, unit: Second}\n"),
    ]);
    let t = run(&s);
    let status = |n| {
        t.status
            .get(ObjectKind::TrafficPolicy, Some("default"), n)
            .unwrap()
            .status
            .to_json()
            .into_owned()
    };
    let gone = status("no-route");
    assert_eq!(gone["ancestors"][0]["ancestorRef"]["kind"], "HTTPRoute");
    assert_eq!(gone["ancestors"][0]["ancestorRef"]["name"], "gone");
    assert_eq!(
        gone["ancestors"][0]["conditions"][0]["reason"],
        "TargetNotFound"
    );
    assert_eq!(accepted(&t, "no-listener")[0].1, "TargetNotFound");
    assert!(accepted(&t, "no-listener")[0]
        .2
        .contains("no listener \"nope\""));
    assert_eq!(accepted(&t, "no-rule")[0].1, "TargetNotFound");
    assert!(host(&t.table).policy.is_none());
    assert!(rule(&t.table, "/a")["filters"].get("policy").is_none());
}

#[test]
fn an_invalid_policy_applies_nothing_and_names_the_field() {
    let s = world(vec![policy(
        "lb-on-route",
        1,
        &format!("{ROUTE_TARGET}  loadBalancer: {{algorithm: RoundRobin}}\n  rateLimit: {{requests: 5, unit: Second}}\n"),
    ), policy(
        "bad-cidr",
        2,
        &format!("{ROUTE_TARGET}  ipAccess: {{allow: [10.0.0.0/33]}}\n"),
    )]);
    let t = run(&s);
    let got = accepted(&t, "lb-on-route");
    assert_eq!(got[0].1, "Invalid");
    assert!(
        got[0]
            .2
            .starts_with("spec.loadBalancer: valid only when every targetRef is a Service"),
        "{got:?}"
    );
    let got = accepted(&t, "bad-cidr");
    assert!(
        got[0].2.starts_with("spec.ipAccess.allow[0]: invalid CIDR"),
        "{got:?}"
    );
    assert!(got[0].2.contains("access controls fail closed"), "{got:?}");
    // The policy without access controls applies nothing; the broken CIDR list refuses all.
    let policy = &rule(&t.table, "/a")["filters"]["policy"];
    assert_eq!(
        policy["ipAccess"]["refuseAll"], "default/bad-cidr",
        "{policy}"
    );
    assert!(policy.get("rateLimit").is_none(), "{policy}");
    let problems = t.status.problems();
    assert!(
        problems
            .iter()
            .any(|p| p.object.contains("TrafficPolicy default/bad-cidr")),
        "{problems:?}"
    );
}

#[test]
fn unusable_authentication_denies_everyone() {
    let s = world(vec![policy(
        "auth",
        1,
        &format!("{ROUTE_TARGET}  basicAuth: {{secretRef: {{name: missing}}}}\n  rateLimit: {{requests: 5, unit: Second}}\n"),
    )]);
    let t = run(&s);
    let got = accepted(&t, "auth");
    assert_eq!(got[0].1, "Invalid");
    assert!(
        got[0]
            .2
            .starts_with("spec.basicAuth.secretRef: Secret default/missing not found"),
        "{got:?}"
    );
    assert!(got[0].2.contains("401"), "{got:?}");
    let h = host(&t.table);
    let r = h.rules.iter().find(|r| r.rule_index == 0).unwrap();
    let p = r.filters.policy.as_ref().expect("deny-all policy");
    assert!(p.basic_auth.as_ref().unwrap().users.is_empty());
    assert!(p.rate_limit.is_none(), "nothing else applies");
}

#[test]
fn basic_auth_and_jwks_are_read_from_referenced_objects() {
    let mut s = world(vec![policy(
        "auth",
        1,
        &format!("{ROUTE_TARGET}  basicAuth: {{secretRef: {{name: users}}, realm: r}}\n  jwt:\n    providers:\n    - {{name: idp, issuer: https://idp, jwks: {{configMapRef: {{name: keys}}}}, claimsToHeaders: [{{claim: sub, header: X-User}}]}}\n"),
    )]);
    s.secrets = vec![Arc::new(
        serde_yaml_ng::from_str("metadata: {name: users, namespace: default}\nstringData: {.htpasswd: \"u:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=\"}").unwrap(),
    )];
    s.config_maps = vec![Arc::new(
        serde_yaml_ng::from_str("metadata: {name: keys, namespace: default}\ndata: {jwks.json: '{\"keys\":[{\"kty\":\"EC\"}]}'}").unwrap(),
    )];
    let t = run(&s);
    assert_eq!(accepted(&t, "auth")[0].1, "Accepted");
    let h = host(&t.table);
    let p = h.rules[0].filters.policy.clone().unwrap();
    assert_eq!(p.basic_auth.as_ref().unwrap().users.len(), 1);
    let jwt = p.jwt.as_ref().unwrap();
    assert_eq!(jwt.providers[0].jwks["keys"][0]["kty"], "EC");
    assert_eq!(
        jwt.providers[0].claims_to_headers,
        [("sub".to_owned(), "x-user".to_owned())]
    );
    let wanted = crate::translate::referenced_policy_objects(&s.traffic_policies);
    assert_eq!(
        wanted,
        [
            ("Secret", "default".to_owned(), "users".to_owned()),
            ("ConfigMap", "default".to_owned(), "keys".to_owned())
        ]
    );
}

#[test]
fn service_targets_set_balance_and_limits_with_the_gateways_as_ancestors() {
    let svc = "  targetRefs: [{group: \"\", kind: Service, name: svc}]\n";
    let s = world(vec![
        policy("svc", 1, &format!("{svc}  loadBalancer: {{algorithm: RoundRobin}}\n  circuitBreaker: {{maxConnections: 7}}\n  retry: {{budget: {{percent: 20}}}}\n")),
        policy("outlier", 2, &format!("{svc}  outlierDetection: {{consecutiveErrors: 3, baseEjectionTime: 10s}}\n")),
        policy("port", 4, "  targetRefs: [{group: \"\", kind: Service, name: svc, sectionName: web}]\n  circuitBreaker: {maxConnections: 1}\n"),
        policy("req-on-svc", 3, &format!("{svc}  timeouts: {{request: 1s}}\n")),
    ]);
    let t = run(&s);
    let a = rule(&t.table, "/a");
    let backend = &a["backends"]["backends"][0]["target"];
    assert_eq!(backend["balance"]["type"], "roundRobin");
    assert_eq!(backend["limits"]["maxConnections"], 7);
    assert_eq!(backend["limits"]["retryBudgetPercent"], 20);
    assert_eq!(backend["limits"]["outlierConsecutiveErrors"], 3);
    assert_eq!(backend["limits"]["outlierBaseEjection"], "10000ms");
    assert_eq!(
        accepted(&t, "svc"),
        [("gw".into(), "Accepted".into(), "accepted".into())]
    );
    let bad = accepted(&t, "req-on-svc");
    assert_eq!(bad[0].1, "Invalid");
    assert!(bad[0]
        .2
        .starts_with("spec.timeouts: valid only when every targetRef is a Gateway"));
    // Balance is an input of resolution, so a change reaches an incremental translation.
    let mut inc = crate::translate::Incremental::default();
    let first = inc.translate(&s, &options(Default::default()), &Default::default());
    let b0 = rule(&first.table, "/a")["backends"]["backends"][0]["target"]["balance"].clone();
    assert_eq!(b0["type"], "roundRobin");
    let mut changed = s.clone();
    changed
        .traffic_policies
        .retain(|p| p.metadata.name.as_deref() != Some("svc"));
    let second = inc.translate(&changed, &options(Default::default()), &Default::default());
    let h = host(&second.table);
    let crate::table::BackendTarget::Service(b) = &h.rules[0].backends.backends[0].target else {
        panic!("no service");
    };
    assert_eq!(b.balance, Balance::LeastRequest);
    assert!(b.limits.as_ref().unwrap().max_connections.is_none());
}

#[test]
fn rate_limit_ids_follow_the_rate_only() {
    let a = world(vec![policy("p", 1, &format!("{ROUTE_TARGET}  rateLimit: {{requests: 10, unit: Second, burst: 5, key: {{type: Header, header: X-Key}}}}\n"))]);
    let t = run(&a);
    let id = rule(&t.table, "/a")["filters"]["policy"]["rateLimit"]["id"].clone();
    assert_eq!(id, "default/p:10/s+5:header:x-key");
    assert_eq!(
        rule(&t.table, "/a")["filters"]["policy"]["rateLimit"]["capacity"],
        15
    );
}

fn proxy_config(name: &str, spec: &str) -> Arc<ProxyConfig> {
    Arc::new(
        serde_yaml_ng::from_str(&format!(
            "metadata: {{name: {name}, namespace: default}}\nspec: {spec}"
        ))
        .unwrap(),
    )
}

/// A snapshot whose class names ProxyConfig `class-pc` and whose Gateway `gw` names `own`
/// (when set).
fn configured(own: Option<&str>, configs: Vec<Arc<ProxyConfig>>) -> Snapshot {
    let infra = own
        .map(|n| format!("  infrastructure: {{parametersRef: {{group: edgeplane.dev, kind: ProxyConfig, name: {n}}}}}\n"))
        .unwrap_or_default();
    let mut s = snapshot(&[format!("{GATEWAY}{infra}")]);
    s.gateway_classes = vec![Arc::new(
        serde_yaml_ng::from_str(
            "metadata: {name: c, generation: 1}\nspec: {controllerName: x/y, parametersRef: \
             {group: edgeplane.dev, kind: ProxyConfig, name: class-pc, namespace: default}}",
        )
        .unwrap(),
    )];
    s.proxy_configs = configs;
    s
}

fn condition(t: &Translation, kind: ObjectKind, ns: Option<&str>, name: &str) -> (String, String) {
    let j = t
        .status
        .get(kind, ns, name)
        .unwrap()
        .status
        .to_json()
        .into_owned();
    (
        j["conditions"][0]["reason"].as_str().unwrap().to_owned(),
        j["conditions"][0]["message"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn a_gateway_proxy_config_replaces_its_class_one() {
    let class_pc = proxy_config(
        "class-pc",
        "{clientTimeouts: {idle: 1m}, service: {type: NodePort}}",
    );
    let own = proxy_config(
        "own",
        "{drainDuration: 5s, service: {type: ClusterIP, annotations: {a: b}}}",
    );
    let s = configured(None, vec![class_pc.clone(), own.clone()]);
    let t = run(&s);
    let settings = t
        .table
        .listeners
        .values()
        .next()
        .unwrap()
        .settings
        .clone()
        .unwrap();
    assert_eq!(settings.source, "default/class-pc");
    assert_eq!(settings.idle_timeout, Some(Duration::from_secs(60)));
    let svc = gateway_service_config(&s, &s.gateways[0]).unwrap();
    assert_eq!(
        svc.type_,
        Some(crate::kinds::crd::proxy_config::ServiceType::NodePort)
    );

    let s = configured(Some("own"), vec![class_pc, own]);
    let t = run(&s);
    let settings = t
        .table
        .listeners
        .values()
        .next()
        .unwrap()
        .settings
        .clone()
        .unwrap();
    assert_eq!(settings.source, "default/own");
    assert_eq!(settings.idle_timeout, None, "the whole object, not a merge");
    assert_eq!(settings.drain, Some(Duration::from_secs(5)));
    let svc = gateway_service_config(&s, &s.gateways[0]).unwrap();
    assert_eq!(
        svc.type_,
        Some(crate::kinds::crd::proxy_config::ServiceType::ClusterIp)
    );
    assert_eq!(svc.annotations["a"], "b");
    assert_eq!(
        condition(&t, ObjectKind::Gateway, Some("default"), "gw").0,
        "Accepted"
    );
}

#[test]
fn invalid_or_missing_proxy_configs_are_invalid_parameters() {
    let bad = proxy_config("class-pc", "{clientTimeouts: {idle: 5x}}");
    let t = run(&configured(None, vec![bad]));
    let (reason, message) = condition(&t, ObjectKind::GatewayClass, None, "c");
    assert_eq!(reason, "InvalidParameters");
    assert!(
        message.ends_with("spec.clientTimeouts.idle: invalid duration \"5x\""),
        "{message}"
    );
    assert_eq!(
        condition(&t, ObjectKind::Gateway, Some("default"), "gw").0,
        "InvalidParameters"
    );
    assert!(t.table.listeners.is_empty());

    let class_pc = proxy_config("class-pc", "{}");
    let s = configured(Some("absent"), vec![class_pc]);
    let t = run(&s);
    assert_eq!(
        condition(&t, ObjectKind::GatewayClass, None, "c").0,
        "Accepted"
    );
    let (reason, message) = condition(&t, ObjectKind::Gateway, Some("default"), "gw");
    assert_eq!(reason, "InvalidParameters");
    assert!(
        message.contains("edgeplane.dev/ProxyConfig default/absent"),
        "{message}"
    );
    assert!(gateway_service_config(&s, &s.gateways[0]).is_none());
}

#[test]
fn unchanged_policies_keep_the_copied_rules_and_hosts() {
    let limit = |n: u32| {
        world(vec![policy(
            "route",
            1,
            &format!("{ROUTE_TARGET}  rateLimit: {{requests: {n}, unit: Second}}\n"),
        )])
    };
    let mut inc = crate::translate::Incremental::default();
    let opts = options(Default::default());
    let first = inc.translate(&limit(1), &opts, &Default::default());
    let second = inc.translate(&limit(1), &opts, &Default::default());
    assert!(Arc::ptr_eq(
        &host(&first.table).rules[0],
        &host(&second.table).rules[0]
    ));
    let listener = |t: &Translation| t.table.listeners.values().next().unwrap().clone();
    let (l1, l2) = (listener(&first), listener(&second));
    let h1 = l1.hosts.iter().next().unwrap() as *const VirtualHost;
    let h2 = l2.hosts.iter().next().unwrap() as *const VirtualHost;
    assert_eq!(h1, h2, "the virtual host is reused");
    let third = inc.translate(&limit(2), &opts, &Default::default());
    assert!(!Arc::ptr_eq(
        &host(&second.table).rules[0],
        &host(&third.table).rules[0]
    ));
    let p = host(&third.table).rules[0].filters.policy.clone().unwrap();
    assert_eq!(p.rate_limit.as_ref().unwrap().requests, 2);
    assert_eq!(
        p.rate_limit.as_ref().unwrap().id,
        "default/route:2/s+0:clientIP"
    );
}

#[test]
fn a_query_parameter_hash_key_reaches_the_service() {
    let svc = "  targetRefs: [{group: \"\", kind: Service, name: svc}]\n";
    let s = world(vec![policy(
        "hash",
        1,
        &format!(
            "{svc}  loadBalancer: {{algorithm: ConsistentHash, hash: {{queryParameter: user}}}}\n"
        ),
    )]);
    let t = run(&s);
    let backend = &rule(&t.table, "/a")["backends"]["backends"][0]["target"];
    assert_eq!(backend["balance"]["on"]["source"], "query", "{backend:#}");
    assert_eq!(backend["balance"]["on"]["name"], "user");
    assert_eq!(accepted(&t, "hash")[0].1, "Accepted");
}

#[test]
fn path_hash_keys_reach_the_service() {
    let svc = "  targetRefs: [{group: \"\", kind: Service, name: svc}]\n";
    for (key, source) in [("path", "path"), ("pathAndQuery", "pathAndQuery")] {
        let s = world(vec![policy(
            "hash",
            1,
            &format!("{svc}  loadBalancer: {{algorithm: ConsistentHash, hash: {{{key}: true}}}}\n"),
        )]);
        let t = run(&s);
        let backend = &rule(&t.table, "/a")["backends"]["backends"][0]["target"];
        assert_eq!(backend["balance"]["on"]["source"], source, "{backend:#}");
        assert_eq!(accepted(&t, "hash")[0].1, "Accepted");
    }
}

const GATEWAY_TARGET: &str =
    "  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n";

#[test]
fn an_invalid_policy_with_ip_lists_refuses_every_client_on_its_targets() {
    let s = world(vec![
        policy(
            "allow-and-zero-rate",
            1,
            &format!("{GATEWAY_TARGET}  ipAccess: {{allow: [127.0.0.1/32]}}\n  rateLimit: {{requests: 0}}\n"),
        ),
        policy(
            "zero-rate-only",
            2,
            &format!("{ROUTE_TARGET}  rateLimit: {{requests: 0}}\n  bodyLimits: {{maxRequestBytes: 10}}\n"),
        ),
    ]);
    let t = run(&s);
    let got = accepted(&t, "allow-and-zero-rate");
    assert_eq!(got[0].1, "Invalid");
    assert!(
        got[0].2.starts_with("spec.rateLimit.requests: 0 is less than 1; access controls fail closed until it is fixed: its ipAccess refuses every client"),
        "{got:?}"
    );
    let access = host(&t.table).policy.as_ref().expect("the host's policy");
    let lists = access.ip_access.as_ref().expect("deny-all lists");
    assert_eq!(
        lists.refuse_all.as_deref(),
        Some("default/allow-and-zero-rate")
    );
    assert!(access.rate_limit.is_none(), "nothing else applies");
    // Without access controls an invalid policy applies nothing, as before.
    let got = accepted(&t, "zero-rate-only");
    assert_eq!(got[0].1, "Invalid");
    assert!(
        got[0].2.ends_with("; the policy applies nothing"),
        "{got:?}"
    );
    assert!(rule(&t.table, "/a")["filters"].get("policy").is_none());
}

const L4_GATEWAY: &str = "metadata: {name: gw, namespace: default, generation: 1}\n\
spec:\n  gatewayClassName: c\n  listeners:\n  - {name: http, port: 80, protocol: HTTP}\n  \
- {name: tcp, port: 5000, protocol: TCP}\n  - {name: udp, port: 5001, protocol: UDP}\n";

fn l4_world(policies: Vec<Arc<TrafficPolicy>>) -> Snapshot {
    let mut s = snapshot(&[L4_GATEWAY.to_owned()]);
    s.traffic_policies = policies;
    s
}

#[test]
fn gateway_ip_lists_reach_tcp_and_udp_sockets_and_status_names_what_does_not() {
    let s = l4_world(vec![policy(
        "lists",
        1,
        &format!(
            "{GATEWAY_TARGET}  ipAccess: {{deny: [127.0.0.2/32]}}\n  rateLimit: {{requests: 5}}\n"
        ),
    )]);
    let t = run(&s);
    let tcp = t
        .table
        .listeners
        .values()
        .find(|l| l.l4.is_some())
        .expect("TCP socket");
    assert_eq!(tcp.ip_access.len(), 1);
    assert_eq!(tcp.ip_access[0].deny[0].to_string(), "127.0.0.2/32");
    let udp = t.table.udp.values().next().expect("UDP socket");
    assert_eq!(udp.ip_access, tcp.ip_access);
    let got = accepted(&t, "lists");
    assert_eq!(got[0].1, "Accepted");
    assert_eq!(
        got[0].2,
        "accepted; rateLimit not applied on listener(s) \"tcp\" (TCP), \"udp\" (UDP): only ipAccess applies to TLS, TCP and UDP listeners"
    );
}

#[test]
fn a_listener_policy_none_of_whose_settings_apply_is_not_accepted() {
    let target = "  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: tcp}]\n";
    let s = l4_world(vec![
        policy(
            "rate",
            1,
            &format!("{target}  rateLimit: {{requests: 5}}\n"),
        ),
        policy(
            "lists",
            2,
            &format!("{target}  ipAccess: {{allow: [10.0.0.0/8]}}\n"),
        ),
    ]);
    let t = run(&s);
    let got = accepted(&t, "rate");
    assert_eq!(got[0].1, "Invalid");
    assert!(
        got[0]
            .2
            .starts_with("nothing applies: rateLimit not applied on listener(s) \"tcp\" (TCP)"),
        "{got:?}"
    );
    assert_eq!(accepted(&t, "lists")[0].1, "Accepted");
    let tcp = t
        .table
        .listeners
        .values()
        .find(|l| l.l4.is_some())
        .expect("TCP socket");
    assert_eq!(tcp.ip_access[0].allow[0].to_string(), "10.0.0.0/8");
    assert!(t
        .table
        .udp
        .values()
        .next()
        .expect("UDP socket")
        .ip_access
        .is_empty());
}
