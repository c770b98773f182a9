//! External authorization through the whole path (manifests -> translator -> table -> proxy)
//! against an HTTP authorizer and an Envoy `Authorization/Check` gRPC server written here:
//! the HTTPRoute `ExternalAuth` filter (HTTP and gRPC: allow with headers copied upstream,
//! deny with the authorizer's status, headers and body, the body forwarded up to its limit, an
//! authorizer that is down, a cross-namespace authorizer without a ReferenceGrant) and a
//! TrafficPolicy's `externalAuth` (sign-in redirect on 401, a timeout answered with its
//! `statusOnError`), and the metrics they count.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use edgeplane::provider::manifest::parse_manifests;
use edgeplane::proxy::{AccessSink, LogSpec, ProxyOptions};
use edgeplane::snapshot::Snapshot;
use edgeplane::status::ObjectKind;
use edgeplane::table::AccessLogFormat;
use edgeplane::translate::{translate, TranslateOptions, DEFAULT_CONTROLLER_NAME};
use http::{Method, StatusCode};

use crate::support::authz::{grpc_authorizer, http_authorizer};
use crate::support::client::{self, h1_client, send};
use crate::support::echo::start_echo;
use crate::support::net::free_addr;
use crate::support::proxy::{metric_sum, start_with, test_options};

fn service(name: &str, ns: &str, addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  ports: [{{name: p, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: p, port: {port}}}]\nendpoints:\n- addresses: ['{ip}']\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

const ROUTES: &str = r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /f-http}}]
    filters:
    - type: ExternalAuth
      externalAuth:
        protocol: HTTP
        backendRef: {name: authz-http, port: 80}
        http: {path: /check, allowedHeaders: [x-tenant], allowedResponseHeaders: [x-user]}
        forwardBody: {maxSize: 8}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /f-grpc}}]
    filters:
    - type: ExternalAuth
      externalAuth: {protocol: GRPC, backendRef: {name: authz-grpc, port: 80}, grpc: {}}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /down}}]
    filters:
    - type: ExternalAuth
      externalAuth: {protocol: HTTP, backendRef: {name: authz-down, port: 80}}
    backendRefs: [{name: web, port: 80}]
  - name: policy
    matches: [{path: {value: /p-http}}]
    backendRefs: [{name: web, port: 80}]
  - name: lenient
    matches: [{path: {value: /lenient}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: foreign, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /foreign}}]
    filters:
    - type: ExternalAuth
      externalAuth: {protocol: HTTP, backendRef: {name: authz-http, namespace: security, port: 80}}
    backendRefs: [{name: web, port: 80}]
---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {name: sso}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: app, sectionName: policy}]
  externalAuth:
    protocol: HTTP
    backendRef: {name: authz-http, port: 80}
    http: {signinURL: "https://login.example/start", method: GET}
    timeout: 300ms
    statusOnError: 503
---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {name: lenient}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: app, sectionName: lenient}]
  externalAuth:
    protocol: GRPC
    backendRef: {name: authz-down, port: 80}
    failOpen: true
"#;

#[tokio::test]
async fn external_authorizers_allow_deny_redirect_and_fail_closed() {
    let web = start_echo("web").await;
    let authz = http_authorizer().await;
    let grpc = grpc_authorizer().await;
    let down = free_addr();
    let bind = free_addr();
    let manifests = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: edge}}\nspec: {{controllerName: {DEFAULT_CONTROLLER_NAME}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw}}\nspec:\n  gatewayClassName: edge\n  listeners:\n  - {{name: http, port: {port}, protocol: HTTP}}\n{ROUTES}{}{}{}{}{}",
        service("web", "default", web.addr),
        service("authz-http", "default", authz.addr),
        service("authz-http", "security", authz.addr),
        service("authz-grpc", "default", grpc.addr),
        service("authz-down", "default", down),
        port = bind.port(),
    );
    let objects = parse_manifests(std::path::Path::new("auth.yaml"), &manifests).unwrap();
    let options = TranslateOptions {
        controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: bind.ip(),
        now: jiff::Timestamp::now(),
        generation: 1,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
        ingress: Default::default(),
    };
    let t = translate(&Snapshot::from_objects(objects), &options);
    let policy = t
        .status
        .get(ObjectKind::TrafficPolicy, Some("default"), "sso")
        .expect("policy status");
    let policy = policy.status.to_json();
    assert_eq!(
        policy["ancestors"][0]["conditions"][0]["reason"],
        "Accepted"
    );
    let foreign = t
        .status
        .get(
            ObjectKind::Route(edgeplane::kinds::routes::RouteKindId::HttpRoute),
            Some("default"),
            "foreign",
        )
        .expect("route status")
        .status
        .to_json();
    let resolved = foreign["parents"][0]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ResolvedRefs")
        .cloned()
        .unwrap();
    assert_eq!(
        (resolved["status"].as_str(), resolved["reason"].as_str()),
        (Some("False"), Some("RefNotPermitted"))
    );
    let lines = Arc::new(Mutex::new(Vec::new()));
    let logged = ProxyOptions {
        access_log: LogSpec::new(AccessLogFormat::Json),
        access_sink: AccessSink::Capture(lines.clone()),
        ..test_options()
    };
    let p = start_with(t.table, logged).await;
    let c = h1_client();
    let get = |path: &str| {
        client::request(Method::GET, bind, "h", path)
            .header("x-tenant", "t1")
            .header("cookie", "secret")
            .header("authorization", "Bearer token")
            .body(client::empty())
            .unwrap()
    };

    // HTTP filter, allowed: the selected answer header reaches the backend, the other not.
    let r = send(&c, get("/f-http/allow?q=1")).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.echoed_header("x-user"), ["alice"]);
    assert!(r.echoed_header("x-secret").is_empty());
    let seen = authz.log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.path, "/check/f-http/allow?q=1");
    assert_eq!(seen.headers.get("x-tenant").map(String::as_str), Some("t1"));
    assert_eq!(
        seen.headers.get("authorization").map(String::as_str),
        Some("Bearer token")
    );
    assert_eq!(seen.headers.get("host").map(String::as_str), Some("h"));
    assert!(!seen.headers.contains_key("cookie"), "{seen:?}");

    // Over HTTP/2 (no Host header, the authority instead) the same check and host.
    let mut h2 = client::H2c::connect(bind).await.unwrap();
    let req = client::H2c::request(Method::GET, "h", "/f-http/allow")
        .body(client::empty())
        .unwrap();
    let r = h2.send(req).await.unwrap();
    assert_eq!(
        (r.status, r.echoed_header("x-user")),
        (StatusCode::OK, vec!["alice".to_owned()])
    );
    let seen = authz.log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.headers.get("host").map(String::as_str), Some("h"));

    // HTTP filter, denied: the authorizer's status, headers and body; the backend never sees it.
    let r = send(&c, get("/f-http/deny")).await.unwrap();
    assert_eq!(r.status, 403);
    assert_eq!(r.header("x-reason").as_deref(), Some("not-you"));
    assert_eq!(r.header("www-authenticate").as_deref(), Some("Bearer"));
    assert_eq!(&r.body[..], b"go away");

    // The body goes to the authorizer up to maxSize (8 bytes), all of it to the backend.
    let post = client::request(Method::POST, bind, "h", "/f-http/body")
        .body(client::full("0123456789abcdef"))
        .unwrap();
    let r = send(&c, post).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["bodyLength"], 16);
    let seen = authz.log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.body, b"01234567");
    assert_eq!(
        seen.headers.get("content-length").map(String::as_str),
        Some("8")
    );
    assert_eq!(
        seen.headers
            .get("x-envoy-auth-partial-body")
            .map(String::as_str),
        Some("true")
    );
    let post = client::request(Method::POST, bind, "h", "/f-http/body")
        .body(client::full("0123"))
        .unwrap();
    assert_eq!(send(&c, post).await.unwrap().json()["bodyLength"], 4);
    let seen = authz.log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (
            seen.body.as_slice(),
            seen.headers
                .get("x-envoy-auth-partial-body")
                .map(String::as_str)
        ),
        (&b"0123"[..], Some("false"))
    );

    // gRPC filter: every header is sent; OK sets the answer's header upstream.
    let r = send(&c, get("/f-grpc/allow")).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.echoed_header("x-user"), ["grpc-h"]);
    let seen = grpc.log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        seen.path,
        "/envoy.service.auth.v3.Authorization/Check GET /f-grpc/allow"
    );
    assert_eq!(
        seen.headers.get("cookie").map(String::as_str),
        Some("secret")
    );
    let r = send(&c, get("/f-grpc/deny")).await.unwrap();
    assert_eq!(r.status, 418);
    assert_eq!(r.header("x-reason").as_deref(), Some("grpc-policy"));
    assert_eq!(&r.body[..], b"grpc says no");

    // Authorizers that cannot be asked fail closed with 403, or open where the policy says so.
    assert_eq!(send(&c, get("/down")).await.unwrap().status, 403);
    assert_eq!(send(&c, get("/lenient")).await.unwrap().status, 200);
    assert_eq!(send(&c, get("/foreign")).await.unwrap().status, 403);

    // TrafficPolicy: a 401 becomes the sign-in redirect; a timeout its statusOnError.
    let r = send(&c, get("/p-http/login?x=1")).await.unwrap();
    assert_eq!(r.status, 302);
    assert_eq!(
        r.header("location").as_deref(),
        Some("https://login.example/start?rd=http%3A%2F%2Fh%2Fp-http%2Flogin%3Fx%3D1")
    );
    let post = client::request(Method::POST, bind, "h", "/p-http/ok")
        .body(client::full("abc"))
        .unwrap();
    assert_eq!(send(&c, post).await.unwrap().status, 200);
    let seen = authz.log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.path, "/p-http/ok");
    assert!(
        seen.body.is_empty(),
        "no body forwarded without forwardBody"
    );
    assert_eq!(send(&c, get("/p-http/slow")).await.unwrap().status, 503);

    let text = p.metrics.encode();
    let count = |backend: &str, result: &str| {
        let labels = [
            format!("backend=\"{backend}\""),
            format!("result=\"{result}\""),
        ];
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        metric_sum(&text, "edgeplane_external_auth_total", &labels)
    };
    assert_eq!(count("default/authz-http:80", "allowed"), 5.0);
    assert_eq!(count("default/authz-http:80", "denied"), 2.0);
    assert_eq!(count("default/authz-http:80", "timeout"), 1.0);
    assert_eq!(count("default/authz-grpc:80", "allowed"), 1.0);
    assert_eq!(count("default/authz-grpc:80", "denied"), 1.0);
    assert_eq!(count("default/authz-down:80", "error"), 2.0);
    assert_eq!(count("invalid", "error"), 1.0);

    // The access log says what became of each request (lines are written in a batch).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let decisions = loop {
        let decisions: Vec<(String, String)> = lines
            .lock()
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|l| {
                (
                    l["path"].as_str().unwrap_or("").to_owned(),
                    l["decision"].to_string(),
                )
            })
            .collect();
        if decisions.iter().any(|(path, _)| path == "/p-http/slow") {
            break decisions;
        }
        assert!(std::time::Instant::now() < deadline, "{decisions:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let decision = |path: &str| {
        decisions
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, d)| d.trim_matches('"').to_owned())
    };
    assert_eq!(decision("/f-http/allow?q=1").as_deref(), Some("proxied"));
    assert_eq!(decision("/f-http/deny").as_deref(), Some("ext_auth_denied"));
    assert_eq!(decision("/down").as_deref(), Some("ext_auth_failed"));
    assert_eq!(decision("/p-http/slow").as_deref(), Some("ext_auth_failed"));
}
