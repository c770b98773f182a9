//! The TrafficPolicy settings of an Ingress's annotations through the pure translator: what
//! the served rule carries, the Secrets and Services they read (also across incremental
//! translations, where such an Ingress is compiled anew), and what an unusable setting
//! reports and refuses.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Method};

use crate::kinds::routes::RouteKindId;
use crate::snapshot::Snapshot;
use crate::status::ObjectKind;
use crate::table::{RequestPolicy, RequestView};
use crate::translate::testing::{options, snapshot};
use crate::translate::{translate, PortMap, Translation};

const CLASS: &str = "metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}";

/// An Ingress `a` of class `edge` in `ns` with these annotations (YAML `key: value` pairs
/// without the prefix), `/` to `svc:8080`.
fn ingress(annotations: &[(&str, &str)]) -> String {
    let notes: Vec<String> = annotations
        .iter()
        .map(|(k, v)| format!("nginx.ingress.kubernetes.io/{k}: {v:?}"))
        .collect();
    format!(
        "metadata: {{name: a, namespace: ns, generation: 1, annotations: {{{}}}}}\nspec:\n  \
         ingressClassName: edge\n  rules: [{{http: {{paths: [{{path: /, pathType: Prefix, \
         backend: {{service: {{name: svc, port: {{number: 8080}}}}}}}}]}}}}]",
        notes.join(", ")
    )
}

fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    serde_yaml_ng::from_str(yaml).expect("fixture")
}

/// A snapshot with the class, Service `svc` (and `authz`), the Ingress and `objects` (Secrets
/// or ConfigMaps, by their YAML).
pub(super) fn with(ingress: &str, secrets: &[String]) -> Snapshot {
    let mut s = snapshot(&[]);
    s.ingress_classes = vec![Arc::new(parse(CLASS))];
    s.ingresses = vec![Arc::new(parse(ingress))];
    s.services = vec![
        Arc::new(parse(
            "metadata: {name: svc, namespace: ns}\nspec: {ports: [{port: 8080}]}",
        )),
        Arc::new(parse(
            "metadata: {name: authz, namespace: ns}\nspec: {ports: [{port: 9000}]}",
        )),
    ];
    s.secrets = secrets.iter().map(|y| Arc::new(parse(y))).collect();
    s
}

/// An htpasswd Secret `users` in `ns` under key `auth`.
pub(super) fn htpasswd_secret(lines: &str) -> String {
    format!("metadata: {{name: users, namespace: ns}}\nstringData: {{auth: {lines:?}}}")
}

/// The request policy of the rule serving `/` on port 80 of 127.0.0.9.
pub(super) fn policy_of(t: &Translation) -> Arc<RequestPolicy> {
    let addr: SocketAddr = ([127, 0, 0, 9], 80).into();
    let headers = HeaderMap::new();
    let view = RequestView {
        host: "a.test",
        path: "/",
        query: None,
        method: &Method::GET,
        headers: &headers,
    };
    let listener = t.table.listeners.get(&addr).expect("listener");
    let rule = listener.route(&view).expect("rule");
    rule.filters.policy.clone().expect("a request policy")
}

/// The Ingress's status, as JSON text.
pub(super) fn status_text(t: &Translation) -> String {
    t.status
        .get(ObjectKind::Route(RouteKindId::Ingress), Some("ns"), "a")
        .map(|e| e.status.to_json().to_string())
        .unwrap_or_default()
}

fn run(s: &Snapshot) -> Translation {
    translate(s, &options(PortMap::default()))
}

const SHA_ALICE: &str = "alice:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=";
const SHA_BOB: &str = "bob:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=";

#[test]
fn basic_auth_reads_the_htpasswd_secret_of_the_ingress_namespace() {
    let annotations = [
        ("auth-type", "basic"),
        ("auth-secret", "users"),
        ("auth-realm", "staff"),
    ];
    let t = run(&with(&ingress(&annotations), &[htpasswd_secret(SHA_ALICE)]));
    let auth = policy_of(&t).basic_auth.clone().expect("basic auth");
    assert_eq!(auth.realm, "staff");
    assert_eq!(auth.users.keys().collect::<Vec<_>>(), ["alice"]);
    assert!(
        !status_text(&t).contains("Unsupported"),
        "{}",
        status_text(&t)
    );
}

#[test]
fn a_missing_secret_is_reported_and_nobody_gets_in() {
    let annotations = [("auth-type", "basic"), ("auth-secret", "users")];
    let t = run(&with(&ingress(&annotations), &[]));
    let auth = policy_of(&t).basic_auth.clone().expect("basic auth");
    assert!(auth.users.is_empty(), "deny-all: {:?}", auth.users.keys());
    let status = status_text(&t);
    assert!(status.contains("Unsupported"), "{status}");
    assert!(status.contains("Secret ns/users not found"), "{status}");
    assert!(status.contains("refuse every request"), "{status}");
}

#[test]
fn a_changed_secret_reaches_an_incrementally_translated_ingress() {
    let annotations = [("auth-type", "basic"), ("auth-secret", "users")];
    let text = ingress(&annotations);
    let opts = options(PortMap::default());
    let mut memory = crate::translate::Incremental::default();
    for (i, lines) in [SHA_ALICE, SHA_BOB, SHA_ALICE].iter().enumerate() {
        let s = with(&text, &[htpasswd_secret(lines)]);
        let cached = memory.translate(&s, &opts, &Default::default());
        let user = lines.split(':').next().unwrap_or_default();
        let auth = policy_of(&cached).basic_auth.clone().expect("basic auth");
        assert_eq!(auth.users.keys().collect::<Vec<_>>(), [user], "step {i}");
    }
}

#[test]
fn the_secret_of_an_ingress_basic_auth_is_wanted_from_the_cluster() {
    use crate::snapshot::TranslatorRules;
    let annotations = [("auth-type", "basic"), ("auth-secret", "users")];
    let s = with(&ingress(&annotations), &[]);
    assert!(s
        .referenced_secrets()
        .contains(&("ns".to_owned(), "users".to_owned())));
}

#[test]
fn auth_url_asks_its_service_as_ingress_nginx_does() {
    use crate::table::{AuthBackend, AuthPath, HeaderSelection};
    let annotations = [
        (
            "auth-url",
            "http://authz.ns.svc.cluster.local:9000/check?x=1",
        ),
        ("auth-response-headers", "x-user"),
    ];
    let t = run(&with(&ingress(&annotations), &[]));
    let auth = policy_of(&t).external_auth.clone().expect("external auth");
    assert!(
        matches!(auth.backend, AuthBackend::Service(_)),
        "{:?}",
        auth.backend
    );
    assert_eq!(auth.path, AuthPath::Fixed("/check?x=1".into()));
    assert_eq!(auth.request_headers, HeaderSelection::All);
    assert!(auth.original_headers);
    assert_eq!(auth.failure.status, 500);
    assert!(auth
        .response_headers
        .contains(&http::HeaderName::from_static("x-user")));
    assert!(!auth
        .response_headers
        .contains(&http::HeaderName::from_static("x-other")));
    assert!(
        !status_text(&t).contains("Unsupported"),
        "{}",
        status_text(&t)
    );
    // Without auth-response-headers nothing of the answer goes upstream, as in nginx.
    let t = run(&with(&ingress(&annotations[..1]), &[]));
    let auth = policy_of(&t).external_auth.clone().expect("external auth");
    assert_eq!(auth.response_headers, HeaderSelection::Only(Vec::new()));
    // A Service that is not there: reported, and the check refuses everything.
    let gone = [("auth-url", "http://gone.ns.svc/check")];
    let t = run(&with(&ingress(&gone), &[]));
    let auth = policy_of(&t).external_auth.clone().expect("external auth");
    assert!(matches!(auth.backend, AuthBackend::Invalid { .. }));
    assert!(!auth.failure.allow);
    assert!(
        status_text(&t).contains("spec.externalAuth.backendRef"),
        "{}",
        status_text(&t)
    );
}

#[test]
fn rate_limit_and_affinity_reach_the_rule() {
    let annotations = [
        ("limit-rps", "2"),
        ("affinity", "cookie"),
        ("session-cookie-name", "sticky"),
    ];
    let t = run(&with(&ingress(&annotations), &[]));
    let policy = policy_of(&t);
    let rl = policy.rate_limit.clone().expect("rate limit");
    assert_eq!((rl.requests, rl.capacity), (2, 11));
    let addr: SocketAddr = ([127, 0, 0, 9], 80).into();
    let headers = HeaderMap::new();
    let view = RequestView {
        host: "a.test",
        path: "/",
        query: None,
        method: &Method::GET,
        headers: &headers,
    };
    let listener = t.table.listeners.get(&addr).expect("listener");
    let rule = listener.route(&view).expect("rule");
    let session = rule
        .filters
        .session
        .as_deref()
        .expect("session persistence");
    assert_eq!(session.name, "sticky");
}

#[test]
fn send_timeout_is_the_rules_send_idle_limit_beside_its_read_timeout() {
    let annotations = [("proxy-send-timeout", "7"), ("proxy-read-timeout", "10")];
    let t = run(&with(&ingress(&annotations), &[]));
    let addr: SocketAddr = ([127, 0, 0, 9], 80).into();
    let headers = HeaderMap::new();
    let view = RequestView {
        host: "a.test",
        path: "/",
        query: None,
        method: &Method::GET,
        headers: &headers,
    };
    let listener = t.table.listeners.get(&addr).expect("listener");
    let rule = listener.route(&view).expect("rule");
    assert_eq!(rule.filters.send_idle(), Some(Duration::from_secs(7)));
    assert_eq!(
        rule.filters.timeouts.backend_request,
        Some(Duration::from_secs(15))
    );
    assert!(!status_text(&t).contains("proxy-send-timeout"));
}

#[test]
fn next_upstream_tries_retry_the_rule() {
    let annotations = [
        ("proxy-next-upstream", "error http_503"),
        ("proxy-next-upstream-tries", "2"),
        ("proxy-next-upstream-timeout", "4"),
    ];
    let t = run(&with(&ingress(&annotations), &[]));
    let addr: SocketAddr = ([127, 0, 0, 9], 80).into();
    let headers = HeaderMap::new();
    let view = RequestView {
        host: "a.test",
        path: "/",
        query: None,
        method: &Method::GET,
        headers: &headers,
    };
    let listener = t.table.listeners.get(&addr).expect("listener");
    let rule = listener.route(&view).expect("rule");
    let retry = rule.filters.retry.as_deref().expect("retry");
    assert_eq!(retry.attempts, 1);
    assert!(retry.codes.contains(&503), "{retry:?}");
    assert_eq!(retry.within, Some(Duration::from_secs(4)));
}

#[test]
fn custom_http_errors_are_answered_by_the_default_backend_service() {
    let annotations = [
        ("default-backend", "authz"),
        ("custom-http-errors", "503, 404,503"),
    ];
    let t = run(&with(&ingress(&annotations), &[]));
    let pages = policy_of(&t).error_pages.clone().expect("error pages");
    assert_eq!(pages.codes, vec![404, 503]);
    assert_eq!(pages.backend.service.to_string(), "ns/authz:9000");
    assert!(pages.intercepts(404) && !pages.intercepts(500));
    assert!(
        !status_text(&t).contains("Unsupported"),
        "{}",
        status_text(&t)
    );
    // Turned off: no error pages.
    let off = [
        annotations[0],
        annotations[1],
        ("enable-custom-http-errors", "false"),
        ("limit-rps", "5"),
    ];
    let t = run(&with(&ingress(&off), &[]));
    assert!(policy_of(&t).error_pages.is_none());
    // Without default-backend there is no Service to ask: reported, not applied.
    let alone = [annotations[1], ("limit-rps", "5")];
    let t = run(&with(&ingress(&alone), &[]));
    assert!(policy_of(&t).error_pages.is_none());
    assert!(
        status_text(&t).contains("custom-http-errors needs"),
        "{}",
        status_text(&t)
    );
}

#[test]
fn canary_rules_folded_into_the_ingress_get_its_error_pages() {
    let main = ingress(&[("default-backend", "authz"), ("custom-http-errors", "404")]);
    let canary = "metadata: {name: b, namespace: ns, generation: 1, annotations: \
        {nginx.ingress.kubernetes.io/canary: \"true\", \
        nginx.ingress.kubernetes.io/canary-by-header: x-canary}}\nspec:\n  \
        ingressClassName: edge\n  rules: [{http: {paths: [{path: /, pathType: Prefix, \
        backend: {service: {name: authz, port: {number: 9000}}}}]}}]";
    let mut s = with(&main, &[]);
    s.ingresses.push(Arc::new(parse(canary)));
    let t = run(&s);
    let addr: SocketAddr = ([127, 0, 0, 9], 80).into();
    let mut headers = HeaderMap::new();
    headers.insert("x-canary", http::HeaderValue::from_static("always"));
    let view = RequestView {
        host: "a.test",
        path: "/",
        query: None,
        method: &Method::GET,
        headers: &headers,
    };
    let listener = t.table.listeners.get(&addr).expect("listener");
    let rule = listener.route(&view).expect("rule");
    assert!(
        rule.matcher.headers.iter().any(|h| h.name == "x-canary"),
        "the canary's rule: {:?}",
        rule.matcher
    );
    let policy = rule.filters.policy.clone().expect("a request policy");
    let pages = policy.error_pages.clone().expect("error pages");
    assert_eq!(pages.codes, vec![404]);
}
