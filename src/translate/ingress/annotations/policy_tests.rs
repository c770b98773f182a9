//! The TrafficPolicy settings the authentication, rate-limit, balancing and upstream
//! annotations read into, and what they report when they cannot be honoured.

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use super::super::Annotations;
use crate::kinds::crd::traffic_policy::TrafficPolicySpec;
use crate::kinds::crd::traffic_policy_auth::ExternalAuthStyle;
use crate::kinds::ingress::NGINX_PREFIX;
use crate::table::{CookieAttributes, SameSite};

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

#[test]
fn auth_url_names_a_service_port_and_keeps_its_path_and_query() {
    let a = parse(&[
        (
            "auth-url",
            "http://oauth2.auth.svc.cluster.local:4180/oauth2/auth?allowed_groups=ops",
        ),
        ("auth-signin", "https://login.example/oauth2/start"),
        (
            "auth-response-headers",
            "X-Auth-Request-User, X-Auth-Request-Email",
        ),
        ("auth-method", "get"),
    ]);
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    let e = a
        .traffic_policy()
        .and_then(|p| p.external_auth)
        .expect("externalAuth");
    assert_eq!(e.backend_ref.name, "oauth2");
    assert_eq!(e.backend_ref.namespace.as_deref(), Some("auth"));
    assert_eq!(e.backend_ref.port, Some(4180));
    assert_eq!(e.status_on_error, Some(500));
    let http = e.http.expect("http");
    assert_eq!(http.style, Some(ExternalAuthStyle::IngressNginx));
    assert_eq!(
        http.path.as_deref(),
        Some("/oauth2/auth?allowed_groups=ops")
    );
    assert_eq!(
        http.signin_url.as_deref(),
        Some("https://login.example/oauth2/start")
    );
    assert_eq!(
        http.allowed_response_headers,
        ["X-Auth-Request-User", "X-Auth-Request-Email"]
    );
    assert_eq!(http.method.as_deref(), Some("GET"));
    // The Ingress's own namespace, port 80 and path `/` by default.
    let own = spec(&[("auth-url", "http://authz.apps.svc")])
        .external_auth
        .expect("externalAuth");
    assert_eq!(own.backend_ref.namespace, None);
    assert_eq!(own.backend_ref.port, Some(80));
    assert_eq!(own.http.and_then(|h| h.path).as_deref(), Some("/"));
}

#[test]
fn an_auth_url_that_names_no_service_is_reported_and_refuses_everything() {
    for (url, why) in [
        ("https://authz.apps.svc/check", "plain HTTP"),
        ("http://auth.example.com/check", "names no Service"),
        ("http://authz.apps.svc/check?u=$host", "nginx variables"),
        ("authz", "not a URL"),
    ] {
        let a = parse(&[("auth-url", url)]);
        let problem = reported(&a, "auth-url");
        assert!(problem.contains(why), "{url}: {problem}");
        assert!(problem.contains("every request is refused"), "{problem}");
        let e = a
            .traffic_policy()
            .and_then(|p| p.external_auth)
            .expect("kept");
        assert!(
            e.backend_ref.name.contains('/'),
            "{url}: {:?}",
            e.backend_ref
        );
    }
    let a = parse(&[
        ("auth-url", "http://authz.apps.svc/check"),
        ("auth-signin", "https://$host/oauth2/start"),
    ]);
    assert!(reported(&a, "auth-signin").contains("nginx variables"));
    let e = a
        .traffic_policy()
        .and_then(|p| p.external_auth)
        .expect("kept");
    assert_eq!(e.backend_ref.name, "authz", "the check itself stays");
    assert_eq!(e.http.and_then(|h| h.signin_url), None);
    let a = parse(&[("auth-signin", "https://login.example/")]);
    assert!(reported(&a, "auth-signin").contains("ignored without auth-url"));
    assert_eq!(a.traffic_policy(), None);
}

#[test]
fn rate_limits_are_per_client_with_nginx_burst() {
    use crate::kinds::crd::traffic_policy::RateLimitUnit;
    let rl = spec(&[("limit-rps", "10")]).rate_limit.expect("rateLimit");
    assert_eq!((rl.requests, rl.unit), (10, RateLimitUnit::Second));
    // nginx: burst = 10 x 5, nodelay: 51 at once. Ours: a bucket of requests + burst.
    assert_eq!(rl.requests + rl.burst.expect("burst"), 51);
    assert_eq!(rl.key, None, "one bucket per client address");
    let rl = spec(&[("limit-rpm", "60"), ("limit-burst-multiplier", "2")])
        .rate_limit
        .expect("rateLimit");
    assert_eq!((rl.requests, rl.unit), (60, RateLimitUnit::Minute));
    assert_eq!(rl.requests + rl.burst.expect("burst"), 121);
    let both = parse(&[("limit-rps", "1"), ("limit-rpm", "100")]);
    assert!(reported(&both, "limit-rpm").contains("not applied"));
    assert_eq!(
        both.traffic_policy()
            .and_then(|p| p.rate_limit)
            .map(|r| r.requests),
        Some(1)
    );
    let bad = parse(&[("limit-rps", "0"), ("limit-connections", "none")]);
    assert!(reported(&bad, "limit-rps").contains("not a positive whole number"));
    assert!(reported(&bad, "limit-connections").contains("not a positive whole number"));
    assert_eq!(bad.traffic_policy(), None);
}

#[test]
fn limit_connections_is_a_per_client_concurrency_limit() {
    let cl = spec(&[("limit-connections", "3")])
        .concurrency_limit
        .expect("concurrencyLimit");
    assert_eq!(cl.per_client, 3);
    let zero = parse(&[("limit-connections", "0")]);
    assert!(reported(&zero, "limit-connections").contains("not applied"));
    assert_eq!(zero.traffic_policy(), None);
}

#[test]
fn cookie_affinity_is_session_persistence_of_the_rules() {
    let a = parse(&[
        ("affinity", "cookie"),
        ("session-cookie-name", "route"),
        ("session-cookie-max-age", "3600"),
        ("affinity-mode", "balanced"),
    ]);
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    assert_eq!(
        a.policy.session,
        Some(
            json!({"type": "Cookie", "sessionName": "route", "absoluteTimeout": "3600s",
                    "cookieConfig": {"lifetimeType": "Permanent"}})
        )
    );
    let plain = parse(&[
        ("affinity", "cookie"),
        ("session-cookie-samesite", "Strict"),
    ]);
    assert_eq!(
        plain.policy.session,
        Some(json!({"type": "Cookie", "sessionName": "INGRESSCOOKIE"}))
    );
    assert!(plain.problems.is_empty(), "{:?}", plain.problems);
    assert_eq!(plain.policy.cookie.same_site, Some(SameSite::Strict));
    let none = parse(&[("session-cookie-name", "x")]);
    assert!(reported(&none, "session-cookie-name").contains("without affinity"));
    assert_eq!(none.policy.session, None);
}

#[test]
fn session_cookie_attributes_are_read_with_affinity_only() {
    let a = parse(&[
        ("affinity", "cookie"),
        ("session-cookie-path", "/app"),
        ("session-cookie-samesite", "none"),
        ("session-cookie-secure", "true"),
    ]);
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    assert_eq!(
        a.policy.cookie,
        CookieAttributes {
            path: Some("/app".into()),
            same_site: Some(SameSite::None),
            secure: true,
        }
    );
    let bad = parse(&[
        ("affinity", "cookie"),
        ("session-cookie-path", "app;x"),
        ("session-cookie-samesite", "Sometimes"),
        ("session-cookie-secure", "yes"),
    ]);
    assert!(reported(&bad, "session-cookie-path").contains("the rule's path is used"));
    assert!(reported(&bad, "session-cookie-samesite").contains("not None, Lax or Strict"));
    assert!(reported(&bad, "session-cookie-secure").contains("not true or false"));
    assert_eq!(bad.policy.cookie, CookieAttributes::default());
    let conditional = parse(&[
        ("affinity", "cookie"),
        ("session-cookie-samesite", "None"),
        ("session-cookie-conditional-samesite-none", "true"),
    ]);
    assert!(
        reported(&conditional, "session-cookie-conditional-samesite-none").contains("not applied")
    );
    let without = parse(&[("session-cookie-secure", "true")]);
    assert!(reported(&without, "session-cookie-secure").contains("without affinity"));
    assert_eq!(without.policy.cookie, CookieAttributes::default());
}

#[test]
fn next_upstream_is_the_rules_retry_and_buffer_size_has_no_effect() {
    let a = parse(&[
        ("proxy-next-upstream", "error timeout http_502 http_503"),
        ("proxy-next-upstream-tries", "4"),
    ]);
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    assert_eq!(
        a.policy.retry,
        Some(json!({"attempts": 3, "codes": [502, 503]}))
    );
    // nginx's defaults: error and timeout, 3 tries.
    let tries = parse(&[("proxy-next-upstream-tries", "3")]);
    assert_eq!(tries.policy.retry, Some(json!({"attempts": 2})));
    assert_eq!(parse(&[("proxy-next-upstream", "off")]).policy.retry, None);
    let bad = parse(&[("proxy-next-upstream", "error http_418")]);
    assert!(reported(&bad, "proxy-next-upstream").contains("not applied"));
    assert_eq!(bad.policy.retry, None);
    let buffer = parse(&[
        ("client-body-buffer-size", "1m"),
        ("proxy-next-upstream-timeout", "5"),
    ]);
    assert!(reported(&buffer, "client-body-buffer-size").contains("accepted, no effect"));
    assert!(reported(&buffer, "proxy-next-upstream-timeout").contains("nothing is retried"));
    let budget = parse(&[
        ("proxy-next-upstream-tries", "3"),
        ("proxy-next-upstream-timeout", "5"),
    ]);
    assert!(budget.problems.is_empty(), "{:?}", budget.problems);
    assert_eq!(
        budget.policy.retry_within,
        Some(std::time::Duration::from_secs(5))
    );
    let unlimited = parse(&[
        ("proxy-next-upstream-tries", "3"),
        ("proxy-next-upstream-timeout", "0"),
    ]);
    assert!(unlimited.problems.is_empty(), "{:?}", unlimited.problems);
    assert_eq!(unlimited.policy.retry_within, None);
    assert_eq!(buffer.traffic_policy(), None);
}
