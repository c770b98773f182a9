//! Server-level ingress-nginx annotations through `serve --config-dir`: `server-alias` from the
//! oldest Ingress of a host serves every Ingress's paths of the host (a later Ingress's alias
//! is reported), and `from-to-www-redirect` answers the other name with 308.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::standalone::{serve, service, Server};
use crate::support::client::{get, h1_client, send, Reply, TestClient};
use crate::support::echo::start_fleet;

const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
    metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}\n";

fn ingress(
    name: &str,
    created: &str,
    host: &str,
    path: &str,
    svc: &str,
    notes: &[(&str, &str)],
) -> String {
    let notes: String = notes
        .iter()
        .map(|(k, v)| format!("    nginx.ingress.kubernetes.io/{k}: {v:?}\n"))
        .collect();
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  creationTimestamp: {created:?}\n  annotations:\n{notes}    x: y\n\
         spec:\n  ingressClassName: edge\n  rules:\n  - host: {host}\n    http:\n      paths:\n\
         \x20     - {{path: {path}, pathType: Prefix, backend: {{service: {{name: {svc}, port: {{number: 80}}}}}}}}\n"
    )
}

async fn call(client: &TestClient, server: &Server, host: &str, path: &str) -> Reply {
    send(client, get(server.http(), host, path))
        .await
        .expect("request through edgeplane")
}

#[tokio::test]
async fn server_alias_from_the_oldest_ingress_and_www_redirects() {
    let fleet = start_fleet(&["one", "two"]).await;
    let mut text = format!(
        "{CLASS}{}{}",
        service("one", &fleet[0]),
        service("two", &fleet[1])
    );
    text.push_str(&ingress(
        "old",
        "2024-01-01T00:00:00Z",
        "a.test",
        "/",
        "one",
        &[("server-alias", "alias.test")],
    ));
    text.push_str(&ingress(
        "new",
        "2025-01-01T00:00:00Z",
        "a.test",
        "/api",
        "two",
        &[("server-alias", "late.test")],
    ));
    text.push_str(&ingress(
        "www",
        "2024-01-01T00:00:00Z",
        "www.w.test",
        "/",
        "one",
        &[("from-to-www-redirect", "true")],
    ));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while call(&client, &server, "a.test", "/").await.status != 200 {
        assert!(Instant::now() < deadline, "the Ingresses were never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The alias serves both Ingresses' paths of the host.
    assert_eq!(
        call(&client, &server, "alias.test", "/x")
            .await
            .pod()
            .as_deref(),
        Some("one")
    );
    assert_eq!(
        call(&client, &server, "alias.test", "/api/x")
            .await
            .pod()
            .as_deref(),
        Some("two")
    );
    // The newer Ingress's alias is not used, and reported.
    assert_eq!(
        call(&client, &server, "late.test", "/api").await.status,
        404
    );
    let addr = server.dashboard();
    let r = send(&client, get(addr, &addr.to_string(), "/debug/status"))
        .await
        .expect("status");
    let all: Value = serde_json::from_slice(&r.body).expect("status JSON");
    let new = all
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["kind"] == "Ingress" && e["name"] == "new")
        .map(|e| e["status"].to_string())
        .unwrap_or_default();
    assert!(
        new.contains("server-alias is not applied to host a.test"),
        "{new}"
    );
    // from-to-www-redirect: the bare name answers 308 to www, path and query kept.
    let r = call(&client, &server, "w.test", "/p?q=1").await;
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location").as_deref(),
        Some("http://www.w.test/p?q=1")
    );
    assert_eq!(
        call(&client, &server, "www.w.test", "/p")
            .await
            .pod()
            .as_deref(),
        Some("one")
    );
}
