//! ingress-nginx annotations through `serve --config-dir`: redirects (HTTPS, permanent with a
//! code, app-root), a rewrite-target seen by the backend, upstream-vhost and
//! x-forwarded-prefix, a backend timeout, the body size limit, an allowlist and CORS
//! preflights; an invalid value is reported while the Ingress keeps serving.

use std::time::{Duration, Instant};

use http::Method;

use crate::standalone::{ingress_status, secret, serve, service};
use crate::support::client::{full, get, h1_client, request, send, Reply, TestClient};
use crate::support::echo::start_fleet;
use crate::support::tls::self_signed;

/// One Ingress of class `edge` for `host`: `/` (or `path`) to Service `app`.
fn ingress(name: &str, host: &str, path: &str, annotations: &[(&str, &str)]) -> String {
    let notes: String = annotations
        .iter()
        .map(|(k, v)| format!("    nginx.ingress.kubernetes.io/{k}: {v:?}\n"))
        .collect();
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!("  annotations:\n{notes}")
    };
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n{notes}\
         spec:\n  ingressClassName: edge\n  rules:\n  - host: {host}\n    http:\n      paths:\n\
         \x20     - {{path: {path}, pathType: Prefix, backend: {{service: {{name: app, port: {{number: 80}}}}}}}}\n"
    )
}

const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
    metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}\n";

async fn call(client: &TestClient, req: http::Request<crate::support::client::TestBody>) -> Reply {
    send(client, req).await.expect("request through edgeplane")
}

#[tokio::test]
async fn ingress_nginx_annotations_are_applied() {
    let fleet = start_fleet(&["app-pod"]).await;
    let cert = self_signed(&["secure.test"]);
    let mut text = format!(
        "{CLASS}{}{}",
        service("app", &fleet[0]),
        secret("secure-tls", &cert)
    );
    text.push_str(&ingress("plain", "plain.test", "/", &[]));
    // ssl-redirect is on by default for a host with TLS.
    text.push_str(&ingress("secure", "secure.test", "/", &[]).replace(
        "  rules:\n",
        "  tls: [{hosts: [secure.test], secretName: secure-tls}]\n  rules:\n",
    ));
    text.push_str(&ingress(
        "moved",
        "moved.test",
        "/",
        &[
            ("permanent-redirect", "https://new.example/landing"),
            ("permanent-redirect-code", "308"),
        ],
    ));
    text.push_str(&ingress("root", "root.test", "/", &[("app-root", "/app")]));
    // app-root on an Ingress without `/` on a host whose `/` is another Ingress's: it holds
    // `/app` there, and ingress-nginx's redirect is server-wide.
    text.push_str(&ingress(
        "subapp",
        "site.test",
        "/app",
        &[("app-root", "/app")],
    ));
    text.push_str(&ingress("site", "site.test", "/", &[]));
    // Two Ingresses with `/` on one host: the older one's (by name here: files carry no
    // creation time) is served, so the newer one's app-root is not applied.
    text.push_str(&ingress("shared-a", "shared.test", "/", &[]));
    text.push_str(&ingress(
        "shared-b",
        "shared.test",
        "/",
        &[("app-root", "/app")],
    ));
    text.push_str(&ingress(
        "rewrite",
        "rw.test",
        "/api",
        &[
            ("rewrite-target", "/v2"),
            ("upstream-vhost", "internal.example"),
            ("x-forwarded-prefix", "/api"),
        ],
    ));
    text.push_str(&ingress(
        "slow",
        "slow.test",
        "/",
        &[("proxy-connect-timeout", "1"), ("proxy-read-timeout", "1")],
    ));
    text.push_str(&ingress(
        "small",
        "small.test",
        "/",
        &[("proxy-body-size", "10")],
    ));
    text.push_str(&ingress(
        "allow",
        "allow.test",
        "/",
        &[("allowlist-source-range", "10.0.0.0/8, 192.168.0.1")],
    ));
    text.push_str(&ingress(
        "cors",
        "cors.test",
        "/",
        &[
            ("enable-cors", "true"),
            ("cors-allow-origin", "https://app.example"),
        ],
    ));
    text.push_str(&ingress(
        "bad",
        "bad.test",
        "/",
        &[("proxy-read-timeout", "soon"), ("mirror-target", "true")],
    ));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let http = server.http();

    let deadline = Instant::now() + Duration::from_secs(20);
    while call(&client, get(http, "plain.test", "/")).await.status != 200 {
        assert!(Instant::now() < deadline, "the Ingresses were never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let r = call(&client, get(http, "secure.test", "/x?q=1")).await;
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location").as_deref(),
        Some("https://secure.test/x?q=1")
    );
    // Without TLS for its host, no redirect.
    assert_eq!(
        call(&client, get(http, "plain.test", "/x")).await.status,
        200
    );

    let r = call(&client, get(http, "moved.test", "/old")).await;
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location").as_deref(),
        Some("https://new.example/landing")
    );

    let r = call(&client, get(http, "root.test", "/")).await;
    assert_eq!(r.status, 302);
    assert_eq!(
        r.header("location").as_deref(),
        Some("http://root.test/app")
    );
    let r = call(&client, get(http, "root.test", "/app")).await;
    assert_eq!(r.status, 200, "only / is redirected");
    let r = call(&client, get(http, "site.test", "/")).await;
    assert_eq!(
        r.status, 302,
        "the host's / is redirected by subapp's app-root"
    );
    let r = call(&client, get(http, "site.test", "/other")).await;
    assert_eq!(r.status, 200, "{:?}", r.header("location"));
    let r = call(&client, get(http, "shared.test", "/")).await;
    assert_eq!(r.status, 200, "{:?}", r.header("location"));
    let shared = ingress_status(&client, &server, "shared-b").await;
    assert!(
        shared.contains("app-root: not applied on host shared.test")
            && shared.contains("/ by Ingress default/shared-a"),
        "{shared}"
    );

    // rewrite-target replaces the whole path, as nginx's `rewrite` (tests/ingress/regex.rs).
    let r = call(&client, get(http, "rw.test", "/api/items?x=1")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.field("path").as_deref(), Some("/v2?x=1"));
    assert_eq!(r.field("host").as_deref(), Some("internal.example"));
    assert_eq!(r.echoed_header("x-forwarded-prefix"), ["/api"]);

    // connect 1s + read 1s: the backend answering after 10s gets a 504.
    let r = call(&client, get(http, "slow.test", "/?delay=10s")).await;
    assert_eq!(r.status, 504);
    assert_eq!(call(&client, get(http, "slow.test", "/")).await.status, 200);

    let post = |body: &'static [u8]| {
        request(Method::POST, http, "small.test", "/")
            .body(full(body))
            .expect("request")
    };
    assert_eq!(call(&client, post(b"0123456789abcdef")).await.status, 413);
    assert_eq!(call(&client, post(b"01234")).await.status, 200);

    // The client is on 127.0.0.0/8, not listed.
    assert_eq!(
        call(&client, get(http, "allow.test", "/")).await.status,
        403
    );

    let preflight = request(Method::OPTIONS, http, "cors.test", "/")
        .header("origin", "https://app.example")
        .header("access-control-request-method", "PUT")
        .body(full(&b""[..]))
        .expect("request");
    let r = call(&client, preflight).await;
    assert!(r.status.is_success(), "{}", r.status);
    assert_eq!(
        r.header("access-control-allow-origin").as_deref(),
        Some("https://app.example")
    );
    assert_eq!(
        r.header("access-control-max-age").as_deref(),
        Some("1728000")
    );
    assert_eq!(
        r.header("access-control-allow-credentials").as_deref(),
        Some("true")
    );
    let methods = r.header("access-control-allow-methods").unwrap_or_default();
    assert!(methods.contains("PUT"), "{methods}");

    // An invalid value is reported, the Ingress keeps serving; applied ones are not reported.
    assert_eq!(call(&client, get(http, "bad.test", "/")).await.status, 200);
    let bad = ingress_status(&client, &server, "bad").await;
    assert!(
        bad.contains("nginx.ingress.kubernetes.io/proxy-read-timeout"),
        "{bad}"
    );
    assert!(bad.contains("not a whole number of seconds"), "{bad}");
    assert!(
        bad.contains("nginx.ingress.kubernetes.io/mirror-target is not supported yet"),
        "{bad}"
    );
    let rewrite = ingress_status(&client, &server, "rewrite").await;
    assert!(
        !rewrite.is_empty() && !rewrite.contains("Unsupported"),
        "{rewrite}"
    );
}
