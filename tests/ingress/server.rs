//! Server-level ingress-nginx annotations through `serve --config-dir`: `server-alias` from the
//! oldest Ingress of a host serves every Ingress's paths of the host (a later Ingress's alias
//! is reported) and, for a TLS host, gets its certificate and its `ssl-redirect`; and
//! `from-to-www-redirect` answers the other name with 308.

use std::time::{Duration, Instant};

use crate::standalone::{ingress_status, serve, service, Server};
use crate::support::client::{get, h1_client, send, Reply, TestClient};
use crate::support::echo::start_fleet;
use crate::support::tls::{get_tls, self_signed};

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
    let new = ingress_status(&client, &server, "new").await;
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

#[tokio::test]
async fn an_alias_of_a_tls_host_gets_its_certificate_and_redirect() {
    let fleet = start_fleet(&["one"]).await;
    let cert = self_signed(&["secure.test", "alias.secure.test"]);
    let indent = |pem: &str| -> String { pem.lines().map(|l| format!("    {l}\n")).collect() };
    let mut text = format!("{CLASS}{}", service("one", &fleet[0]));
    text.push_str(&format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: secure-tls, namespace: default}}\n\
         type: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        indent(&cert.cert_pem),
        indent(&cert.key_pem)
    ));
    let tls = "  tls: [{hosts: [secure.test], secretName: secure-tls}]\n";
    let secure = ingress(
        "secure",
        "2024-01-01T00:00:00Z",
        "secure.test",
        "/",
        "one",
        &[("server-alias", "alias.secure.test")],
    );
    text.push_str(&secure.replace("  rules:\n", &format!("{tls}  rules:\n")));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while call(&client, &server, "secure.test", "/").await.status != 308 {
        assert!(Instant::now() < deadline, "the Ingress was never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Over TLS by SNI, the alias is answered with the host's certificate (verified here).
    let r = get_tls(
        server.https(),
        "alias.secure.test",
        &[&cert],
        "alias.secure.test",
        "/x",
    )
    .await
    .expect("TLS to the alias");
    assert_eq!((r.status.as_u16(), r.pod().as_deref()), (200, Some("one")));
    // Plain HTTP for the alias is redirected like the host's.
    let r = call(&client, &server, "alias.secure.test", "/x?q=1").await;
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location").as_deref(),
        Some("https://alias.secure.test/x?q=1")
    );
}
