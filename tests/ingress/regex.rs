//! ingress-nginx's regex paths through `serve --config-dir`: `use-regex` paths as nginx's
//! `location ~* "^PATH"` (prefix, any case, longest first), on every Ingress of the host;
//! `rewrite-target` with captures seen by the backend, query kept; and the same Ingresses
//! served with `--no-ingress-quirk` switches.

use std::time::{Duration, Instant};

use crate::standalone::{serve_with, service, Server};
use crate::support::client::{get, h1_client, send, Reply, TestClient};
use crate::support::echo::start_fleet;

const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
    metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}\n";

/// An Ingress of class `edge` for `host` with `paths` as `(path, pathType, Service)`.
fn ingress(name: &str, host: &str, notes: &[(&str, &str)], paths: &[(&str, &str, &str)]) -> String {
    let notes: String = notes
        .iter()
        .map(|(k, v)| format!("    nginx.ingress.kubernetes.io/{k}: {v:?}\n"))
        .collect();
    let paths: String = paths
        .iter()
        .map(|(p, t, s)| {
            format!("      - {{path: {p:?}, pathType: {t}, backend: {{service: {{name: {s}, port: {{number: 80}}}}}}}}\n")
        })
        .collect();
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  annotations:\n{notes}    x: y\n\
         spec:\n  ingressClassName: edge\n  rules:\n  - host: {host}\n    http:\n      paths:\n{paths}"
    )
}

async fn call(client: &TestClient, server: &Server, host: &str, path: &str) -> Reply {
    send(client, get(server.http(), host, path))
        .await
        .expect("request through edgeplane")
}

/// `pod path` of the echo backend that answered, or the status when none did.
async fn reached(client: &TestClient, server: &Server, host: &str, path: &str) -> String {
    let r = call(client, server, host, path).await;
    match r.pod() {
        Some(pod) => format!("{pod} {}", r.field("path").unwrap_or_default()),
        None => r.status.as_u16().to_string(),
    }
}

async fn start(
    flags: &[&str],
) -> (
    tempfile::TempDir,
    TestClient,
    Server,
    Vec<crate::support::echo::Echo>,
) {
    let fleet = start_fleet(&["one", "two", "three"]).await;
    let mut text = CLASS.to_owned();
    for (name, echo) in ["one", "two", "three"].iter().zip(&fleet) {
        text.push_str(&service(name, echo));
    }
    text.push_str(&ingress(
        "regex",
        "a.test",
        &[("use-regex", "true")],
        &[
            ("/api", "Prefix", "one"),
            ("/api/v[0-9]+", "ImplementationSpecific", "two"),
        ],
    ));
    text.push_str(&ingress(
        "plain",
        "a.test",
        &[],
        &[("/static", "Prefix", "three"), ("/exact", "Exact", "three")],
    ));
    text.push_str(&ingress(
        "plain-b",
        "b.test",
        &[],
        &[("/static", "Prefix", "three")],
    ));
    text.push_str(&ingress(
        "rewrite",
        "rw.test",
        &[("rewrite-target", "/v2/$2")],
        &[("/svc(/|$)(.*)", "ImplementationSpecific", "one")],
    ));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve_with(dir.path(), &client, flags).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while call(&client, &server, "b.test", "/static").await.status != 200 {
        assert!(Instant::now() < deadline, "the Ingresses were never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (dir, client, server, fleet)
}

#[tokio::test]
async fn regex_paths_and_capture_rewrites_as_ingress_nginx() {
    let (_dir, client, server, _fleet) = start(&[]).await;
    let at = |host: &'static str, path: &'static str| reached(&client, &server, host, path);
    // Longest path first, any case, a prefix of the path.
    assert_eq!(at("a.test", "/api/v1").await, "two /api/v1");
    assert_eq!(
        at("a.test", "/API/V2/items?q=1").await,
        "two /API/V2/items?q=1"
    );
    assert_eq!(at("a.test", "/apix").await, "one /apix");
    assert_eq!(at("a.test", "/x/api").await, "404");
    // use-regex on one Ingress: the other Ingress's paths on the host are regex too.
    assert_eq!(at("a.test", "/staticfoo").await, "three /staticfoo");
    assert_eq!(at("a.test", "/exact/more").await, "three /exact/more");
    // Not on another host.
    assert_eq!(at("b.test", "/static/x").await, "three /static/x");
    assert_eq!(at("b.test", "/staticfoo").await, "404");
    // rewrite-target with captures: the whole path, query kept.
    assert_eq!(
        at("rw.test", "/svc/items/1?x=1").await,
        "one /v2/items/1?x=1"
    );
    assert_eq!(at("rw.test", "/Svc").await, "one /v2/");
    assert_eq!(at("rw.test", "/other").await, "404");
}

#[tokio::test]
async fn each_quirk_switched_off() {
    let (_dir, client, server, _fleet) = start(&[
        "--no-ingress-quirk",
        "host-wide-regex",
        "--no-ingress-quirk=regex-case-insensitive",
        "--no-ingress-quirk",
        "regex-prefix",
    ])
    .await;
    let at = |host: &'static str, path: &'static str| reached(&client, &server, host, path);
    // Whole path, case counts.
    assert_eq!(at("a.test", "/api/v1").await, "two /api/v1");
    assert_eq!(at("a.test", "/api/v1/x").await, "404");
    assert_eq!(at("a.test", "/API").await, "404");
    // The other Ingress keeps its plain paths.
    assert_eq!(at("a.test", "/staticfoo").await, "404");
    assert_eq!(at("a.test", "/static/x").await, "three /static/x");
    assert_eq!(at("a.test", "/exact/more").await, "404");
    // The rewrite's regex must now match the whole path: `(.*)` still takes the rest.
    assert_eq!(at("rw.test", "/svc/items?x=1").await, "one /v2/items?x=1");
    assert_eq!(at("rw.test", "/SVC/items").await, "404");
}

#[tokio::test]
async fn an_unknown_quirk_is_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_edgeplane"))
        .args([
            "serve",
            "--no-ingress-quirk",
            "regex-everything",
            "--config-dir",
            ".",
        ])
        .output()
        .expect("run edgeplane");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("host-wide-regex"), "{err}");
}
