//! The ingress-nginx annotations served as TrafficPolicy settings, through `serve
//! --config-dir`: basic authentication against an htpasswd Secret (and refusing everyone when
//! its Secret is missing, reported).

use std::time::{Duration, Instant};

use http::Method;
use serde_json::Value;

use crate::standalone::{serve, service, Server};
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

/// The status of Ingress `name` as `/debug/status` shows it, as JSON text.
async fn status_text(client: &TestClient, server: &Server, name: &str) -> String {
    let addr = server.dashboard();
    let r = call(client, get(addr, &addr.to_string(), "/debug/status")).await;
    let all: Value = serde_json::from_slice(&r.body).expect("status JSON");
    all.as_array()
        .into_iter()
        .flatten()
        .find(|e| e["kind"] == "Ingress" && e["name"] == name)
        .map(|e| e["status"].to_string())
        .unwrap_or_default()
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
    let status = status_text(&client, &server, "lost").await;
    assert!(
        status.contains("Secret default/missing not found"),
        "{status}"
    );
    assert!(!status_text(&client, &server, "staff")
        .await
        .contains("Unsupported"));
}
