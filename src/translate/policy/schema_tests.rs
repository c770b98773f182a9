//! The CRD refuses what the translator refuses: each value `compile` finds invalid (one per
//! check that does not depend on other objects) is refused by the v1beta1 schema and its CEL
//! rules, through the same admission engine standalone mode runs, and the translator too
//! refuses it when it arrives anyway (a cluster with older CRDs).

use serde_json::{json, Value};

use super::compile_policy;
use crate::admission::builtin;
use crate::kinds::crd::TrafficPolicy;
use crate::snapshot::Snapshot;

fn route() -> Value {
    json!({"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "r"})
}

fn service() -> Value {
    json!({"group": "", "kind": "Service", "name": "s"})
}

/// `(spec, text of the admission refusal, start of the translator's error)`.
fn cases() -> Vec<(Value, &'static str, &'static str)> {
    let r = route;
    let s = service;
    vec![
        (
            json!({"targetRefs": [r()], "rateLimit": {"requests": 0}}),
            "spec.rateLimit.requests",
            "spec.rateLimit.requests",
        ),
        (
            json!({"targetRefs": [r()], "rateLimit": {"requests": 1, "key": {"type": "Header", "header": "bad header"}}}),
            "spec.rateLimit.key.header",
            "spec.rateLimit.key.header",
        ),
        (
            json!({"targetRefs": [r()], "retry": {"attempts": 0}}),
            "spec.retry.attempts",
            "spec.retry.attempts",
        ),
        (
            json!({"targetRefs": [r()], "retry": {"codes": [200]}}),
            "spec.retry.codes[0]",
            "spec.retry.codes",
        ),
        (
            json!({"targetRefs": [r()], "timeouts": {"request": "1s", "backendRequest": "2s"}}),
            "backendRequest must not be longer than request",
            "spec.timeouts",
        ),
        (
            json!({"targetRefs": [s()], "retry": {"budget": {"percent": 101}}}),
            "spec.retry.budget.percent",
            "spec.retry.budget.percent",
        ),
        (
            json!({"targetRefs": [s()], "circuitBreaker": {"maxConnections": 0}}),
            "spec.circuitBreaker.maxConnections",
            "spec.circuitBreaker.maxConnections",
        ),
        (
            json!({"targetRefs": [s()], "circuitBreaker": {"maxPendingRequests": 0}}),
            "spec.circuitBreaker.maxPendingRequests",
            "spec.circuitBreaker.maxPendingRequests",
        ),
        (
            json!({"targetRefs": [s()], "circuitBreaker": {"maxRequests": 0}}),
            "spec.circuitBreaker.maxRequests",
            "spec.circuitBreaker.maxRequests",
        ),
        (
            json!({"targetRefs": [s()], "outlierDetection": {"consecutiveErrors": 0}}),
            "spec.outlierDetection.consecutiveErrors",
            "spec.outlierDetection.consecutiveErrors",
        ),
        (
            json!({"targetRefs": [s()], "outlierDetection": {"baseEjectionTime": "0s"}}),
            "must be longer than 0s",
            "spec.outlierDetection.baseEjectionTime",
        ),
        (
            json!({"targetRefs": [s()], "outlierDetection": {"maxEjectionPercent": 101}}),
            "spec.outlierDetection.maxEjectionPercent",
            "spec.outlierDetection.maxEjectionPercent",
        ),
        (
            json!({"targetRefs": [s()], "loadBalancer": {"algorithm": "ConsistentHash", "hash": {"header": "a b"}}}),
            "spec.loadBalancer.hash.header",
            "spec.loadBalancer.hash.header",
        ),
        (
            json!({"targetRefs": [s()], "loadBalancer": {"algorithm": "ConsistentHash", "hash": {"cookie": ""}}}),
            "spec.loadBalancer.hash.cookie",
            "spec.loadBalancer.hash.cookie",
        ),
        (
            json!({"targetRefs": [s()], "loadBalancer": {"algorithm": "ConsistentHash", "hash": {"queryParameter": ""}}}),
            "spec.loadBalancer.hash.queryParameter",
            "spec.loadBalancer.hash.queryParameter",
        ),
        (
            json!({"targetRefs": [r()], "jwt": {"providers": [{"name": "a", "issuer": "", "jwks": {"secretRef": {"name": "k"}}}]}}),
            "spec.jwt.providers[0].issuer",
            "spec.jwt.providers[0].issuer",
        ),
        (
            json!({"targetRefs": [r()], "jwt": {"providers": [{"name": "a", "issuer": "i", "jwks": {"secretRef": {"name": "k"}},
                   "claimsToHeaders": [{"claim": "sub", "header": "x user"}]}]}}),
            "spec.jwt.providers[0].claimsToHeaders[0].header",
            "spec.jwt.providers[0].claimsToHeaders[0].header",
        ),
        (
            json!({"targetRefs": [r()], "ipAccess": {"allow": ["10.0.0.0/33"]}}),
            "must be a CIDR",
            "spec.ipAccess.allow[0]",
        ),
        (
            json!({"targetRefs": [r()], "ipAccess": {}}),
            "ipAccess must set allow or deny",
            "spec.ipAccess",
        ),
        (
            json!({"targetRefs": [r()], "loadBalancer": {"algorithm": "RoundRobin"}}),
            "every target must be a Service",
            "spec.loadBalancer",
        ),
    ]
}

#[test]
fn every_value_the_translator_refuses_the_schema_refuses() {
    let crds = builtin::crds();
    for (spec, admission, translator) in cases() {
        let mut object = json!({"apiVersion": "edgeplane.dev/v1beta1", "kind": "TrafficPolicy",
            "metadata": {"name": "p", "namespace": "default"}, "spec": spec.clone()});
        let refused = crds.admit(&mut object, None).map_err(|r| r.to_string());
        let Err(text) = refused else {
            panic!("{spec} was admitted; the translator refuses it ({translator})");
        };
        assert!(
            text.contains(admission),
            "{spec}: {text} (expected {admission:?})"
        );
        let policy: TrafficPolicy = serde_json::from_value(object).expect("a TrafficPolicy");
        let compiled = compile_policy(&Snapshot::default(), &policy);
        let error = compiled.error.unwrap_or_default();
        assert!(
            error.starts_with(translator),
            "{spec}: translator said {error:?}"
        );
    }
}

#[test]
fn the_valid_edges_are_admitted_and_compiled() {
    let crds = builtin::crds();
    for spec in [
        json!({"targetRefs": [route()], "rateLimit": {"requests": 1, "key": {"type": "Header", "header": "X-User_1"}},
               "retry": {"attempts": 1, "codes": [400, 599]}, "timeouts": {"request": "0s", "backendRequest": "10s"}}),
        json!({"targetRefs": [service()], "retry": {"budget": {"percent": 100}},
               "circuitBreaker": {"maxConnections": 1, "maxPendingRequests": 1, "maxRequests": 1},
               "outlierDetection": {"consecutiveErrors": 1, "baseEjectionTime": "1ms", "maxEjectionPercent": 100}}),
    ] {
        let mut object = json!({"apiVersion": "edgeplane.dev/v1beta1", "kind": "TrafficPolicy",
            "metadata": {"name": "p", "namespace": "default"}, "spec": spec.clone()});
        crds.admit(&mut object, None)
            .unwrap_or_else(|r| panic!("{spec}: {r}"));
        let policy: TrafficPolicy = serde_json::from_value(object).expect("a TrafficPolicy");
        let compiled = compile_policy(&Snapshot::default(), &policy);
        assert_eq!(compiled.error, None, "{spec}");
    }
}
