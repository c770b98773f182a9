//! The ingress-nginx annotations served as TrafficPolicy settings, through `serve
//! --config-dir`: basic authentication against an htpasswd Secret (and refusing everyone when
//! its Secret is missing, reported); `auth-url` against an HTTP authorizer on loopback (allow
//! with the listed answer headers copied, deny as the authorizer says, `auth-signin`, a URL
//! naming no Service refused and reported); `limit-rpm` per client (429 past the bucket);
//! cookie affinity over two endpoints.

use std::time::{Duration, Instant};

use http::Method;

use crate::standalone::{ingress_status, serve, service, Server};
use crate::support::authz::http_authorizer;
use crate::support::client::{full, get, h1_client, request, send, Reply, TestClient};
use crate::support::echo::start_fleet;

const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
    metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}\n";

/// One Ingress of class `edge` for `host`: `/` to Service `app`, with these annotations.
fn ingress(name: &str, host: &str, annotations: &[(&str, &str)]) -> String {
    let notes: String = annotations
        .iter()
        .map(|(k, v)| format!("    nginx.ingress.kubernetes.io/{k}: {v:?}\n"))
        .collect();
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
         annotations:\n{notes}spec:\n  ingressClassName: edge\n  rules:\n  - host: {host}\n    \
         http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: app, \
         port: {{number: 80}}}}}}}}\n"
    )
}

/// The htpasswd Secret `name` under ingress-nginx's key `auth`.
fn htpasswd(name: &str, lines: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}}}\nstringData: {{auth: {lines:?}}}\n"
    )
}

async fn call(client: &TestClient, req: http::Request<crate::support::client::TestBody>) -> Reply {
    send(client, req).await.expect("request through edgeplane")
}

/// Waits (bounded) until `host` answers `/` with `status`.
async fn until_status(client: &TestClient, server: &Server, host: &str, status: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while call(client, get(server.http(), host, "/")).await.status != status {
        assert!(Instant::now() < deadline, "{host} never answered {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `GET /` for `host` with basic credentials.
fn with_basic(
    server: &Server,
    host: &str,
    user: &str,
    password: &str,
) -> http::Request<crate::support::client::TestBody> {
    use base64::Engine;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    request(Method::GET, server.http(), host, "/")
        .header("authorization", format!("Basic {token}"))
        .body(full(&b""[..]))
        .expect("request")
}

/// `{SHA}` of "secret", as `htpasswd -s` writes it.
const ALICE: &str = "alice:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=";

#[tokio::test]
async fn basic_auth_checks_the_htpasswd_secret_and_fails_closed_without_it() {
    let fleet = start_fleet(&["app-pod"]).await;
    let mut text = format!(
        "{CLASS}{}{}",
        service("app", &fleet[0]),
        htpasswd("users", ALICE)
    );
    text.push_str(&ingress("open", "open.test", &[]));
    text.push_str(&ingress(
        "staff",
        "staff.test",
        &[
            ("auth-type", "basic"),
            ("auth-secret", "users"),
            ("auth-realm", "Staff only"),
        ],
    ));
    text.push_str(&ingress(
        "lost",
        "lost.test",
        &[("auth-type", "basic"), ("auth-secret", "missing")],
    ));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    until_status(&client, &server, "open.test", 200).await;

    let r = call(&client, get(server.http(), "staff.test", "/")).await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate").as_deref(),
        Some("Basic realm=\"Staff only\"")
    );
    let r = call(
        &client,
        with_basic(&server, "staff.test", "alice", "secret"),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.pod().as_deref(), Some("app-pod"));
    let r = call(&client, with_basic(&server, "staff.test", "alice", "wrong")).await;
    assert_eq!(r.status, 401);

    // Its Secret missing, nobody gets in, and the Ingress says why.
    let r = call(&client, with_basic(&server, "lost.test", "alice", "secret")).await;
    assert_eq!(r.status, 401);
    let status = ingress_status(&client, &server, "lost").await;
    assert!(
        status.contains("Secret default/missing not found"),
        "{status}"
    );
    assert!(!ingress_status(&client, &server, "staff")
        .await
        .contains("Unsupported"));
}

/// Service `name` with port 80 to `addr` (an authorizer).
pub(crate) fn service_at(name: &str, addr: std::net::SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n\
         spec: {{ports: [{{name: http, port: 80, targetPort: {port}}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: {name}-1, labels: {{kubernetes.io/service-name: {name}}}}}\n\
         addressType: IPv4\nports: [{{name: http, port: {port}}}]\n\
         endpoints: [{{addresses: [\"{ip}\"], conditions: {{ready: true}}}}]\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

#[tokio::test]
async fn auth_url_asks_the_authorizer_service_as_ingress_nginx_does() {
    let fleet = start_fleet(&["app-pod"]).await;
    let authz = http_authorizer().await;
    let url = |path: &str| format!("http://authz.default.svc.cluster.local{path}");
    let mut text = format!(
        "{CLASS}{}{}",
        service("app", &fleet[0]),
        service_at("authz", authz.addr)
    );
    text.push_str(&ingress(
        "guarded",
        "guarded.test",
        &[
            ("auth-url", &url("/check?tenant=a")),
            ("auth-response-headers", "x-user"),
        ],
    ));
    text.push_str(&ingress(
        "denied",
        "denied.test",
        &[("auth-url", &url("/deny"))],
    ));
    text.push_str(&ingress(
        "signin",
        "signin.test",
        &[
            ("auth-url", &url("/login")),
            ("auth-signin", "https://login.example/start"),
        ],
    ));
    text.push_str(&ingress(
        "elsewhere",
        "elsewhere.test",
        &[("auth-url", "http://auth.example.com/check")],
    ));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    until_status(&client, &server, "guarded.test", 200).await;

    let req = request(Method::GET, server.http(), "guarded.test", "/page?q=1")
        .header("cookie", "session=abc")
        .body(full(&b""[..]))
        .expect("request");
    let r = call(&client, req).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.echoed_header("x-user"), ["alice"]);
    assert!(
        r.echoed_header("x-secret").is_empty(),
        "only the listed headers"
    );
    let seen = authz.log.lock().unwrap().last().cloned().expect("a check");
    assert_eq!(
        seen.path, "/check?tenant=a",
        "the URL's own path, not the client's"
    );
    assert_eq!(
        seen.headers.get("cookie").map(String::as_str),
        Some("session=abc")
    );
    assert_eq!(
        seen.headers.get("x-original-url").map(String::as_str),
        Some("http://guarded.test/page?q=1")
    );
    assert_eq!(
        seen.headers.get("x-original-method").map(String::as_str),
        Some("GET")
    );

    let r = call(&client, get(server.http(), "denied.test", "/")).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.header("x-reason").as_deref(), Some("not-you"));

    let r = call(&client, get(server.http(), "signin.test", "/a?b=c")).await;
    assert_eq!(r.status, 302);
    assert_eq!(
        r.header("location").as_deref(),
        Some("https://login.example/start?rd=http%3A%2F%2Fsignin.test%2Fa%3Fb%3Dc")
    );

    // A URL naming no Service: refused as nginx refuses an authorizer it cannot ask.
    let checks = authz.log.lock().unwrap().len();
    let r = call(&client, get(server.http(), "elsewhere.test", "/")).await;
    assert_eq!(r.status, 500);
    assert_eq!(authz.log.lock().unwrap().len(), checks);
    let status = ingress_status(&client, &server, "elsewhere").await;
    assert!(status.contains("names no Service"), "{status}");
}

/// Service `name` with port 80 to every echo of `fleet` (one endpoint each).
fn service_of_all(name: &str, fleet: &[crate::support::echo::Echo]) -> String {
    let mut text = format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n\
         spec: {{ports: [{{name: http, port: 80}}]}}\n"
    );
    for (i, e) in fleet.iter().enumerate() {
        text.push_str(&format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: {name}-{i}, labels: {{kubernetes.io/service-name: {name}}}}}\n\
             addressType: IPv4\nports: [{{name: http, port: {port}}}]\n\
             endpoints: [{{addresses: [\"{ip}\"], conditions: {{ready: true}}}}]\n",
            port = e.addr.port(),
            ip = e.addr.ip(),
        ));
    }
    text
}

#[tokio::test]
async fn rate_limit_and_cookie_affinity() {
    let fleet = start_fleet(&["pod-a", "pod-b"]).await;
    let mut text = format!("{CLASS}{}", service_of_all("app", &fleet));
    text.push_str(&ingress(
        "limited",
        "limited.test",
        &[("limit-rpm", "1"), ("limit-burst-multiplier", "1")],
    ));
    text.push_str(&ingress(
        "sticky",
        "sticky.test",
        &[("affinity", "cookie"), ("session-cookie-name", "route")],
    ));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    until_status(&client, &server, "sticky.test", 200).await;

    // 1 a minute with a burst of 1 x 1: a bucket of 2 (nginx: burst 1, nodelay).
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(
            call(&client, get(server.http(), "limited.test", "/"))
                .await
                .status,
        );
    }
    assert_eq!(seen, [200, 200, 429]);

    // Fresh clients land on either endpoint; each cookie keeps its client there.
    let mut cookies: Vec<(String, String)> = Vec::new();
    for _ in 0..40 {
        let r = call(&client, get(server.http(), "sticky.test", "/")).await;
        let pod = r.pod().expect("an echo answered");
        let set = r.header("set-cookie").expect("an affinity cookie");
        assert!(set.starts_with("route="), "{set}");
        let cookie = set.split(';').next().unwrap_or_default().to_owned();
        if !cookies.iter().any(|(p, _)| *p == pod) {
            cookies.push((pod, cookie));
        }
        if cookies.len() == 2 {
            break;
        }
    }
    assert_eq!(cookies.len(), 2, "both endpoints serve fresh clients");
    for (pod, cookie) in &cookies {
        for _ in 0..5 {
            let req = request(Method::GET, server.http(), "sticky.test", "/")
                .header("cookie", cookie.as_str())
                .body(full(&b""[..]))
                .expect("request");
            let r = call(&client, req).await;
            assert_eq!(r.pod().as_deref(), Some(pod.as_str()), "{cookie}");
        }
    }
}

/// An Ingress of class `edge` for `host` with Prefix `path` to Service `app`.
fn ingress_at(name: &str, host: &str, path: &str, annotations: &[(&str, &str)]) -> String {
    ingress(name, host, annotations).replace("{path: /,", &format!("{{path: {path},"))
}

#[tokio::test]
async fn affinity_cookie_attributes() {
    let fleet = start_fleet(&["pod-a", "pod-b"]).await;
    let mut text = format!("{CLASS}{}", service_of_all("app", &fleet));
    let affinity = [("affinity", "cookie"), ("session-cookie-name", "route")];
    text.push_str(&ingress_at("located", "located.test", "/shop", &affinity));
    let attributes = [
        ("affinity", "cookie"),
        ("session-cookie-path", "/"),
        ("session-cookie-samesite", "None"),
        ("session-cookie-secure", "true"),
    ];
    text.push_str(&ingress_at("set", "set.test", "/shop", &attributes));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let cookie = |host: &'static str| {
        let (client, server) = (&client, &server);
        async move {
            let r = call(client, get(server.http(), host, "/shop/cart")).await;
            (r.status, r.header("set-cookie").unwrap_or_default())
        }
    };
    while cookie("set.test").await.0 != 200 {
        assert!(Instant::now() < deadline, "set.test never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // nginx's default: the location's path, not Secure, no SameSite.
    let (_, located) = cookie("located.test").await;
    let attrs: Vec<&str> = located.split("; ").skip(1).collect();
    assert!(located.starts_with("route="), "{located}");
    assert_eq!(attrs, ["Path=/shop", "HttpOnly"], "{located}");
    let (_, set) = cookie("set.test").await;
    let attrs: Vec<&str> = set.split("; ").skip(1).collect();
    assert!(set.starts_with("INGRESSCOOKIE="), "{set}");
    assert_eq!(
        attrs,
        ["Path=/", "HttpOnly", "SameSite=None", "Secure"],
        "{set}"
    );
    // The Ingress reports nothing: every annotation is served.
    let status = ingress_status(&client, &server, "set").await;
    assert!(!status.contains("Unsupported\""), "{status}");
}
