//! The TrafficPolicy settings the authentication, rate-limit, balancing and upstream
//! annotations read into, and what they report when they cannot be honoured.

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use super::super::Annotations;
use crate::kinds::crd::traffic_policy::TrafficPolicySpec;
use crate::kinds::ingress::NGINX_PREFIX;

fn parse(annotations: &[(&str, &str)]) -> Annotations {
    let map: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (format!("{NGINX_PREFIX}{k}"), json!(v)))
        .collect();
    let ingress: Ingress = serde_json::from_value(
        json!({"metadata": {"name": "i", "namespace": "apps", "annotations": map}}),
    )
    .expect("Ingress");
    Annotations::parse(&ingress)
}

fn spec(annotations: &[(&str, &str)]) -> TrafficPolicySpec {
    parse(annotations).traffic_policy().expect("a policy")
}

fn reported(a: &Annotations, name: &str) -> String {
    a.problems
        .iter()
        .find(|p| p.contains(&format!("{NGINX_PREFIX}{name}")))
        .cloned()
        .unwrap_or_default()
}

#[test]
fn basic_auth_reads_the_auth_key_of_the_secret_and_the_realm() {
    let a = parse(&[
        ("auth-type", "basic"),
        ("auth-secret", "users"),
        ("auth-realm", "Staff only"),
    ]);
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    let b = a
        .traffic_policy()
        .and_then(|p| p.basic_auth)
        .expect("basicAuth");
    assert_eq!(b.secret_ref.name, "users");
    assert_eq!(b.secret_ref.key.as_deref(), Some("auth"));
    assert_eq!(b.realm.as_deref(), Some("Staff only"));
    // The namespace/name form in the Ingress's own namespace, and auth-file said outright.
    let own = spec(&[
        ("auth-type", "basic"),
        ("auth-secret", "apps/users"),
        ("auth-secret-type", "auth-file"),
    ]);
    assert_eq!(own.basic_auth.expect("basicAuth").secret_ref.name, "users");
}

#[test]
fn basic_auth_that_cannot_be_served_is_reported_and_refuses_everything() {
    for (annotations, name, why) in [
        (
            &[("auth-type", "basic"), ("auth-secret", "other/users")][..],
            "auth-secret",
            "another namespace",
        ),
        (
            &[("auth-type", "basic")][..],
            "auth-type",
            "needs auth-secret",
        ),
        (
            &[("auth-type", "digest"), ("auth-secret", "users")][..],
            "auth-type",
            "digest",
        ),
        (
            &[
                ("auth-type", "basic"),
                ("auth-secret", "users"),
                ("auth-secret-type", "auth-map"),
            ][..],
            "auth-secret-type",
            "auth-map",
        ),
    ] {
        let a = parse(annotations);
        let problem = reported(&a, name);
        assert!(problem.contains(why), "{annotations:?}: {:?}", a.problems);
        assert!(problem.contains("every request is refused"), "{problem}");
        let b = a.traffic_policy().and_then(|p| p.basic_auth).expect("kept");
        assert!(
            b.secret_ref.name.contains('/'),
            "a reference no Secret can answer: {:?}",
            b.secret_ref
        );
    }
}

#[test]
fn auth_settings_without_auth_type_are_reported_and_ask_nothing() {
    let a = parse(&[("auth-secret", "users"), ("auth-realm", "r")]);
    assert!(reported(&a, "auth-secret").contains("ignored without auth-type"));
    assert!(reported(&a, "auth-realm").contains("ignored without auth-type"));
    assert_eq!(a.traffic_policy(), None);
}
