//! Header annotations through `serve --config-dir`: the entries of the `custom-headers`
//! ConfigMap on the response, a `configuration-snippet`'s `more_set_input_headers` and
//! `proxy_set_header` on the request the backend sees and its `more_set_headers`/`add_header`
//! on the response (`add_header` without `always` on 2xx/3xx only); a snippet with another
//! directive is refused, reported with it, and the Ingress keeps serving without it.

use crate::standalone::{ingress_status, serve, service, Server};
use crate::support::client::{get, h1_client, send, Reply, TestClient};
use crate::support::echo::start_echo;

const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
    metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}\n";

const CONFIG_MAP: &str = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: hdrs}\n\
    data: {X-Served-By: edgeplane, X-Env: test}\n";

/// Ingress `name` for host `<name>.test`, `/` to Service `app`, with these annotations.
fn ingress(name: &str, annotations: &[(&str, &str)]) -> String {
    let notes: String = annotations
        .iter()
        .map(|(k, v)| format!("    nginx.ingress.kubernetes.io/{k}: {v:?}\n"))
        .collect();
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
         annotations:\n{notes}spec:\n  ingressClassName: edge\n  rules:\n  - host: {name}.test\n    \
         http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: app, \
         port: {{number: 80}}}}}}}}\n"
    )
}

async fn call(client: &TestClient, server: &Server, host: &str) -> Reply {
    send(client, get(server.http(), host, "/p"))
        .await
        .expect("request through edgeplane")
}

fn header<'r>(r: &'r Reply, name: &str) -> Option<&'r str> {
    r.headers.get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn custom_headers_and_header_snippets_edit_requests_and_responses() {
    let echo = start_echo("app-pod").await;
    let mut text = format!("{CLASS}{CONFIG_MAP}{}", service("app", &echo));
    let snippet = "more_set_input_headers \"X-Tenant: blue\";\n\
                   proxy_set_header X-Source edge;\n\
                   more_set_headers \"X-Frame-Options: DENY\";\n\
                   add_header Cache-Control no-store always;\n";
    text.push_str(&ingress(
        "edited",
        &[
            ("custom-headers", "default/hdrs"),
            ("configuration-snippet", snippet),
        ],
    ));
    text.push_str(&ingress(
        "refused",
        &[(
            "configuration-snippet",
            "more_set_headers \"X-A: b\";\nproxy_pass http://evil.example;\n",
        )],
    ));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;

    let r = call(&client, &server, "edited.test").await;
    assert_eq!(r.status, 200);
    assert_eq!(header(&r, "x-served-by"), Some("edgeplane"));
    assert_eq!(header(&r, "x-env"), Some("test"));
    assert_eq!(header(&r, "x-frame-options"), Some("DENY"));
    assert_eq!(header(&r, "cache-control"), Some("no-store"));
    let seen = r.json();
    assert_eq!(seen["headers"]["X-Tenant"], serde_json::json!(["blue"]));
    assert_eq!(seen["headers"]["X-Source"], serde_json::json!(["edge"]));

    let r = call(&client, &server, "refused.test").await;
    assert_eq!(r.status, 200);
    assert_eq!(header(&r, "x-a"), None);
    let refused = ingress_status(&client, &server, "refused").await;
    assert!(
        refused.contains("\\\"proxy_pass\\\" is refused"),
        "{refused}"
    );
}

#[tokio::test]
async fn add_header_without_always_is_on_2xx_and_3xx_responses_only() {
    let echo = start_echo("app-pod").await;
    let mut text = format!("{CLASS}{}", service("app", &echo));
    let snippet = "add_header X-Ok yes;\nadd_header X-All yes always;\n";
    text.push_str(&ingress("added", &[("configuration-snippet", snippet)]));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;

    let r = call(&client, &server, "added.test").await;
    assert_eq!(r.status, 200);
    assert_eq!(header(&r, "x-ok"), Some("yes"));
    assert_eq!(header(&r, "x-all"), Some("yes"));
    // The echo answers every attempt of these with the status asked for.
    for code in [404, 500] {
        let path = format!("/p?uuid=add-header-{code}&succeedAfter=100&responseCode={code}");
        let r = send(&client, get(server.http(), "added.test", &path))
            .await
            .expect("request through edgeplane");
        assert_eq!(r.status, code);
        assert_eq!(header(&r, "x-ok"), None, "{code}");
        assert_eq!(header(&r, "x-all"), Some("yes"), "{code}");
    }
}

/// Ingress `name` created at `second`, host `shared.test` path `path` to Service `app`.
fn shared(name: &str, second: u32, path: &str, snippet: Option<&str>) -> String {
    let notes = snippet
        .map(|s| format!("  annotations:\n    nginx.ingress.kubernetes.io/server-snippet: {s:?}\n"))
        .unwrap_or_default();
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
         creationTimestamp: \"2026-01-01T00:00:{second:02}Z\"\n{notes}spec:\n  \
         ingressClassName: edge\n  rules:\n  - host: shared.test\n    http:\n      paths:\n      \
         - {{path: {path}, pathType: Prefix, backend: {{service: {{name: app, \
         port: {{number: 80}}}}}}}}\n"
    )
}

#[tokio::test]
async fn server_snippet_of_the_oldest_ingress_applies_to_every_path_of_the_host() {
    let echo = start_echo("app-pod").await;
    let mut text = format!("{CLASS}{}", service("app", &echo));
    text.push_str(&shared(
        "old",
        1,
        "/old",
        Some("more_set_headers \"X-Server: old\";"),
    ));
    text.push_str(&shared(
        "new",
        2,
        "/new",
        Some("more_set_headers \"X-Server: new\";"),
    ));
    text.push_str(&shared("plain", 3, "/plain", None));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    for path in ["/old", "/new", "/plain"] {
        let r = send(&client, get(server.http(), "shared.test", path))
            .await
            .expect("request through edgeplane");
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(header(&r, "x-server"), Some("old"), "{path}");
    }
}
