//! Standalone admission of the edgeplane kinds with the CRDs generated from their types:
//! defaults, OpenAPI checks and every CEL rule, at both versions, through the admission engine
//! and through the file provider (where v1alpha1 objects are stored as v1beta1).

use std::path::Path;

use edgeplane::admission::builtin;
use edgeplane::kinds::crd::rules;
use edgeplane::provider::file::ConfigDir;
use serde_json::{json, Value};

const BETA: &str = "edgeplane.dev/v1beta1";
const ALPHA: &str = "edgeplane.dev/v1alpha1";

fn object(api_version: &str, kind: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "default"}, "spec": spec})
}

/// The admitted object, or the rejection's text.
fn admit(api_version: &str, kind: &str, spec: Value) -> Result<Value, String> {
    let mut o = object(api_version, kind, spec);
    builtin::crds()
        .admit(&mut o, None)
        .map(|()| o)
        .map_err(|r| r.to_string())
}

fn rejected(api_version: &str, kind: &str, spec: Value, needle: &str) {
    match admit(api_version, kind, spec.clone()) {
        Ok(_) => panic!("{kind} {api_version} {spec} was admitted; expected {needle:?}"),
        Err(e) => assert!(e.contains(needle), "{spec}: {e} (expected {needle:?})"),
    }
}

fn admitted(api_version: &str, kind: &str, spec: Value) -> Value {
    admit(api_version, kind, spec.clone()).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn route() -> Value {
    json!({"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "r"})
}
fn service() -> Value {
    json!({"group": "", "kind": "Service", "name": "s"})
}

#[test]
fn every_rule_compiles_in_the_engine_and_is_enforced_at_both_versions() {
    let crds = builtin::crds();
    let listed = |v: &str, k: &str| -> Vec<String> {
        crds.rules(v, k).into_iter().map(|(_, r)| r).collect()
    };
    let beta = listed(BETA, "TrafficPolicy");
    for (rule, _) in [
        rules::TARGET_COUNT,
        rules::TARGET_KINDS,
        rules::SECTION_NAME_TARGETS,
        rules::SERVICE_SCOPED,
        rules::REQUEST_SCOPED,
        rules::HASH_ONLY_WITH_CONSISTENT_HASH,
        rules::ONE_HASH_KEY,
        rules::RATE_KEY_HEADER,
        rules::JWKS_ONE_SOURCE,
        rules::JWT_UNIQUE_NAMES,
        rules::IP_ACCESS_NOT_EMPTY,
        rules::CIDRS,
        rules::BACKEND_WITHIN_REQUEST,
        rules::POSITIVE_DURATION,
    ] {
        assert!(beta.iter().any(|r| r == rule), "{rule} not in {beta:?}");
    }
    let alpha = listed(ALPHA, "TrafficPolicy");
    for (rule, _) in [
        rules::TARGET_KINDS,
        rules::SECTION_NAME_TARGETS,
        rules::ALPHA_SERVICE_SCOPED,
        rules::ALPHA_REQUEST_SCOPED,
        rules::ALPHA_HASH,
        rules::ALPHA_JWT,
        rules::ALPHA_BACKEND_WITHIN_REQUEST,
        rules::POSITIVE_DURATION,
        rules::CIDRS,
    ] {
        assert!(alpha.iter().any(|r| r == rule), "{rule} not in {alpha:?}");
    }
    for v in [BETA, ALPHA] {
        assert!(listed(v, "ProxyConfig").iter().any(|r| r == rules::CIDRS.0));
    }
}

#[test]
fn v1beta1_traffic_policies_get_defaults() {
    let o = admitted(
        BETA,
        "TrafficPolicy",
        json!({"targetRefs": [route()], "rateLimit": {"requests": 10, "key": {}}}),
    );
    assert_eq!(o["spec"]["rateLimit"]["unit"], "Second");
    assert_eq!(o["spec"]["rateLimit"]["key"]["type"], "ClientIP");
    let o = admitted(
        BETA,
        "TrafficPolicy",
        json!({"targetRefs": [service()], "loadBalancer": {}}),
    );
    assert_eq!(o["spec"]["loadBalancer"]["algorithm"], "LeastRequest");
}

#[test]
fn v1beta1_traffic_policy_rules() {
    let tp = "TrafficPolicy";
    let gw = json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "g", "sectionName": "https"});
    admitted(
        BETA,
        tp,
        json!({"targetRefs": [gw, route()], "timeouts": {"request": "10s", "backendRequest": "1s500ms"},
               "retry": {"attempts": 2, "codes": [503], "backoff": "100ms"},
               "rateLimit": {"requests": 5, "unit": "Minute", "key": {"type": "Header", "header": "x-user"}},
               "basicAuth": {"secretRef": {"name": "htpasswd"}},
               "jwt": {"providers": [
                   {"name": "a", "issuer": "https://a", "jwks": {"secretRef": {"name": "k"}}},
                   {"name": "b", "issuer": "https://b", "jwks": {"configMapRef": {"name": "k"}}}]},
               "ipAccess": {"allow": ["10.0.0.0/8"], "deny": ["10.1.0.0/16"]},
               "bodyLimits": {"maxRequestBytes": 1024}}),
    );
    admitted(
        BETA,
        tp,
        json!({"targetRefs": [service()], "loadBalancer": {"algorithm": "ConsistentHash", "hash": {"header": "x-user"}},
               "circuitBreaker": {"maxConnections": 10}, "outlierDetection": {"consecutiveErrors": 5, "baseEjectionTime": "30s"},
               "retry": {"budget": {"percent": 20}}}),
    );
    rejected(BETA, tp, json!({"targetRefs": []}), "1 to 16 targets");
    let many: Vec<Value> = (0..17).map(|_| route()).collect();
    rejected(BETA, tp, json!({"targetRefs": many}), "17");
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [{"group": "", "kind": "Gateway", "name": "g"}]}),
        "a target must be a Gateway or HTTPRoute",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [{"group": "", "kind": "Service", "name": "s", "sectionName": "http"}]}),
        "sectionName is only allowed",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [route()], "circuitBreaker": {"maxConnections": 1}}),
        "every target must be a Service",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [service(), route()], "retry": {"budget": {"percent": 1}}}),
        "every target must be a Service",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [service()], "rateLimit": {"requests": 1}}),
        "no target may be a Service",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [service()], "retry": {"attempts": 1}}),
        "no target may be a Service",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [service()], "loadBalancer": {"algorithm": "ConsistentHash"}}),
        "hash is required with algorithm ConsistentHash",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [service()], "loadBalancer": {"hash": {"header": "h"}}}),
        "hash is required with algorithm ConsistentHash",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [service()], "loadBalancer": {"algorithm": "ConsistentHash", "hash": {"header": "h", "cookie": "c"}}}),
        "exactly one of header, cookie",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [route()], "rateLimit": {"requests": 1, "key": {"type": "Header"}}}),
        "header is required with key type Header",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [route()], "jwt": {"providers": [{"name": "a", "issuer": "i", "jwks": {}}]}}),
        "exactly one of secretRef and configMapRef",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [route()], "jwt": {"providers": [
            {"name": "a", "issuer": "i", "jwks": {"secretRef": {"name": "k"}}},
            {"name": "a", "issuer": "j", "jwks": {"secretRef": {"name": "k"}}}]}}),
        "names must be unique",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [route()], "ipAccess": {}}),
        "ipAccess must set allow or deny",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [route()], "ipAccess": {"allow": ["10.0.0.1"]}}),
        "must be a CIDR",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [route()], "timeouts": {"request": "10 seconds"}}),
        "spec.timeouts.request",
    );
    rejected(
        BETA,
        tp,
        json!({"targetRefs": [route()], "rateLimit": {"requests": 1, "unit": "Day"}}),
        "Unsupported value",
    );
}

#[test]
fn v1alpha1_traffic_policy_rules() {
    let tp = "TrafficPolicy";
    admitted(
        ALPHA,
        tp,
        json!({"targetRef": route(), "requestTimeout": "5s", "retries": 2, "requestsPerSecond": 10,
               "jwtIssuer": "https://i", "jwksSecret": "k", "allowCIDRs": ["10.0.0.0/8"]}),
    );
    admitted(
        ALPHA,
        tp,
        json!({"targetRef": service(), "loadBalancing": "ConsistentHash", "hashCookie": "c", "maxConnections": 3}),
    );
    rejected(
        ALPHA,
        tp,
        json!({"targetRef": route(), "maxConnections": 3}),
        "the target must be a Service",
    );
    rejected(
        ALPHA,
        tp,
        json!({"targetRef": service(), "requestsPerSecond": 3}),
        "the target must not be a Service",
    );
    rejected(
        ALPHA,
        tp,
        json!({"targetRef": service(), "loadBalancing": "ConsistentHash"}),
        "needs exactly one of hashHeader",
    );
    rejected(
        ALPHA,
        tp,
        json!({"targetRef": route(), "jwtIssuer": "https://i"}),
        "jwtIssuer and jwksSecret go together",
    );
    rejected(
        ALPHA,
        tp,
        json!({"targetRef": {"group": "apps", "kind": "Deployment", "name": "d"}}),
        "a target must be a Gateway or HTTPRoute",
    );
    rejected(
        ALPHA,
        tp,
        json!({"targetRef": route(), "denyCIDRs": ["nope"]}),
        "must be a CIDR",
    );
}

#[test]
fn proxy_config_rules_at_both_versions() {
    let pc = "ProxyConfig";
    admitted(
        BETA,
        pc,
        json!({"service": {"type": "NodePort"}, "clientTimeouts": {"idle": "1m"}, "drainDuration": "1500ms",
               "trustedProxies": ["10.0.0.0/8"], "accessLog": {"format": "JSON", "fields": ["time", "path"]}}),
    );
    admitted(
        ALPHA,
        pc,
        json!({"serviceType": "ClusterIP", "idleTimeout": "1m", "drainSeconds": 30, "trustedProxyCIDRs": ["::1/128"]}),
    );
    rejected(
        BETA,
        pc,
        json!({"drainDuration": "30"}),
        "spec.drainDuration",
    );
    rejected(
        BETA,
        pc,
        json!({"trustedProxies": ["10.0.0.0/33"]}),
        "must be a CIDR",
    );
    rejected(
        BETA,
        pc,
        json!({"service": {"type": "External"}}),
        "Unsupported value",
    );
    rejected(
        ALPHA,
        pc,
        json!({"drainSeconds": 100000}),
        "spec.drainSeconds",
    );
    rejected(
        ALPHA,
        pc,
        json!({"http2KeepaliveInterval": "soon"}),
        "spec.http2KeepaliveInterval",
    );
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write");
}

const ALPHA_POLICY: &str = "apiVersion: edgeplane.dev/v1alpha1
kind: TrafficPolicy
metadata:
  name: limits
spec:
  targetRef:
    group: gateway.networking.k8s.io
    kind: HTTPRoute
    name: web
  requestsPerSecond: 5
  burst: 2
";

const ALPHA_PROXY: &str = "apiVersion: edgeplane.dev/v1alpha1
kind: ProxyConfig
metadata:
  name: proxy
  namespace: infra
spec:
  serviceType: NodePort
  drainSeconds: 20
";

#[test]
fn the_file_provider_stores_v1alpha1_objects_as_v1beta1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(d, "policy.yaml", ALPHA_POLICY);
    write(d, "proxy.yaml", ALPHA_PROXY);
    write(
        d,
        "beta.yaml",
        "apiVersion: edgeplane.dev/v1beta1\nkind: TrafficPolicy\nmetadata:\n  name: lb\nspec:\n  targetRefs:\n  - {group: \"\", kind: Service, name: svc}\n  loadBalancer: {}\n",
    );
    let mut config = ConfigDir::new(d, builtin::crds());
    let loaded = config.load().expect("load");
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let policies = &loaded.snapshot.traffic_policies;
    assert_eq!(policies.len(), 2);
    let limits = policies
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("limits"))
        .expect("converted policy");
    assert_eq!(limits.spec.target_refs.len(), 1);
    assert_eq!(limits.spec.target_refs[0].name, "web");
    let rate = limits.spec.rate_limit.as_ref().expect("rate limit");
    assert_eq!((rate.requests, rate.burst), (5, Some(2)));
    assert_eq!(limits.metadata.namespace.as_deref(), Some("default"));
    let lb = policies
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("lb"))
        .expect("v1beta1 policy");
    assert!(lb.spec.load_balancer.is_some(), "defaulted");
    let proxy = &loaded.snapshot.proxy_configs[0];
    assert_eq!(proxy.spec.drain_duration.as_deref(), Some("20s"));
    assert_eq!(proxy.metadata.namespace.as_deref(), Some("infra"));
}

#[test]
fn a_rejected_v1alpha1_object_names_file_and_line_and_keeps_its_admitted_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(d, "policy.yaml", ALPHA_POLICY);
    let mut config = ConfigDir::new(d, builtin::crds());
    let first = config.load().expect("load");
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    // The same policy now sets a Service-only setting on a route.
    write(
        d,
        "policy.yaml",
        &format!("# changed\n{ALPHA_POLICY}  maxConnections: 7\n"),
    );
    let (applied, snapshot) = config.reload().expect("reload");
    let [e] = applied.errors.as_slice() else {
        panic!("{:?}", applied.errors)
    };
    let message = e.to_string();
    assert!(message.contains("policy.yaml"), "{message}");
    assert!(
        message.contains("the target must be a Service"),
        "{message}"
    );
    assert_eq!(e.line, Some(6), "the line of spec: {message}");
    assert!(
        message.ends_with("the previously admitted version stays in force"),
        "{message}"
    );
    let kept = &snapshot.traffic_policies[0];
    assert_eq!(kept.spec.circuit_breaker, None);
    assert_eq!(
        kept.spec.rate_limit.as_ref().map(|r| r.requests),
        Some(5),
        "the admitted version stays"
    );

    // A bad duration is reported at its own line.
    write(
        d,
        "policy.yaml",
        &ALPHA_POLICY.replace("  burst: 2\n", "  burst: 2\n  requestTimeout: 10 seconds\n"),
    );
    let (applied, _) = config.reload().expect("reload");
    let [e] = applied.errors.as_slice() else {
        panic!("{:?}", applied.errors)
    };
    assert_eq!(e.line, Some(12), "{e}");
}

/// v1alpha1 refuses the values the translator refuses once the object is converted, as
/// v1beta1 does (the v1beta1 cases are checked against the translator in its own tests).
#[test]
fn v1alpha1_refuses_what_the_translator_refuses() {
    let tp = "TrafficPolicy";
    for (spec, needle) in [
        (
            json!({"targetRef": route(), "requestsPerSecond": 0}),
            "spec.requestsPerSecond",
        ),
        (json!({"targetRef": route(), "retries": 0}), "spec.retries"),
        (
            json!({"targetRef": route(), "retryOn": [302]}),
            "spec.retryOn[0]",
        ),
        (
            json!({"targetRef": route(), "requestTimeout": "1s", "backendRequestTimeout": "2s"}),
            "backendRequestTimeout must not be longer than requestTimeout",
        ),
        (
            json!({"targetRef": route(), "jwtIssuer": "", "jwksSecret": "k"}),
            "spec.jwtIssuer",
        ),
        (
            json!({"targetRef": service(), "retryBudgetPercent": 101}),
            "spec.retryBudgetPercent",
        ),
        (
            json!({"targetRef": service(), "maxConnections": 0}),
            "spec.maxConnections",
        ),
        (
            json!({"targetRef": service(), "maxPendingRequests": 0}),
            "spec.maxPendingRequests",
        ),
        (
            json!({"targetRef": service(), "maxRequests": 0}),
            "spec.maxRequests",
        ),
        (
            json!({"targetRef": service(), "ejectAfterErrors": 0}),
            "spec.ejectAfterErrors",
        ),
        (
            json!({"targetRef": service(), "ejectionTime": "0ms"}),
            "must be longer than 0s",
        ),
        (
            json!({"targetRef": service(), "maxEjectionPercent": 101}),
            "spec.maxEjectionPercent",
        ),
        (
            json!({"targetRef": service(), "loadBalancing": "ConsistentHash", "hashHeader": "a b"}),
            "spec.hashHeader",
        ),
        (
            json!({"targetRef": service(), "loadBalancing": "ConsistentHash", "hashCookie": ""}),
            "spec.hashCookie",
        ),
    ] {
        rejected(ALPHA, tp, spec, needle);
    }
    admitted(
        ALPHA,
        tp,
        json!({"targetRef": route(), "requestsPerSecond": 1, "retries": 1, "retryOn": [599],
               "requestTimeout": "0s", "backendRequestTimeout": "5s"}),
    );
}
