//! `custom-http-errors` with `default-backend` through `serve --config-dir`: a backend answer
//! of a listed status is replaced by the error page Service's answer to a `GET /` (`HEAD`
//! kept) carrying ingress-nginx's `X-*` headers; other statuses pass through; an error page
//! Service that does not answer gives a 502 saying so.

use http::Method;

use crate::policy::service_at;
use crate::standalone::{serve, service};
use crate::support::authz::{error_page_server, Seen};
use crate::support::client::{empty, h1_client, request, send};
use crate::support::echo::start_echo;
use crate::support::net::bind_loopback;

const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
    metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}\n";

/// Ingress `name` of class `edge` for `host`: `/` to Service `app`, error pages `404,503`
/// answered by Service `pages`.
fn ingress(name: &str, host: &str, pages: &str) -> String {
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
         annotations:\n    nginx.ingress.kubernetes.io/default-backend: {pages}\n    \
         nginx.ingress.kubernetes.io/custom-http-errors: \"404,503\"\nspec:\n  \
         ingressClassName: edge\n  rules:\n  - host: {host}\n    http:\n      paths:\n      \
         - {{path: /, pathType: Prefix, backend: {{service: {{name: app, port: {{number: 80}}}}}}}}\n"
    )
}

/// A path the echo backend answers with `code` (its retry simulation, never succeeding).
fn failing(id: &str, code: u16) -> String {
    format!("/shop/{id}?uuid=error-pages-{id}&succeedAfter=1000&responseCode={code}")
}

#[tokio::test]
async fn listed_backend_statuses_are_answered_by_the_error_page_service() {
    let app = start_echo("app-pod").await;
    let pages = error_page_server().await;
    // A port nothing listens on: the error page Service of `broken.test` cannot answer.
    let dead = bind_loopback().await.local_addr().expect("address");
    let text = format!(
        "{CLASS}{}{}{}{}{}",
        service("app", &app),
        service_at("pages", pages.addr),
        service_at("deadpages", dead),
        ingress("shop", "shop.test", "pages"),
        ingress("broken", "broken.test", "deadpages"),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let asked = |method: Method, host: &str, path: &str| {
        request(method, server.http(), host, path)
            .header("accept", "text/html")
            .header("x-request-id", "req-1")
            .body(empty())
            .expect("request")
    };
    let last = || -> Seen {
        let log = pages.log.lock().expect("log");
        log.last()
            .cloned()
            .expect("the error page Service was asked")
    };

    // 404 and 503 from the backend: the client gets the error page Service's answer (its
    // status, headers and body), asked with GET / whatever the client's method.
    for (method, code) in [(Method::GET, 404), (Method::POST, 503)] {
        let path = failing(&format!("{code}"), code);
        let r = send(&client, asked(method.clone(), "shop.test", &path))
            .await
            .expect("request through edgeplane");
        assert_eq!(r.status, 418, "{method} {code}");
        assert_eq!(r.header("x-page").as_deref(), Some("custom"));
        assert_eq!(&r.body[..], format!("page for {code}").as_bytes());
        let seen = last();
        assert_eq!((seen.method.as_str(), seen.path.as_str()), ("GET", "/"));
        let h = |name: &str| seen.headers.get(name).cloned().unwrap_or_default();
        let code = code.to_string();
        for (name, want) in [
            ("x-code", code.as_str()),
            ("x-format", "text/html"),
            ("x-original-uri", path.as_str()),
            ("x-namespace", "default"),
            ("x-ingress-name", "shop"),
            ("x-service-name", "app"),
            ("x-service-port", "80"),
            ("x-request-id", "req-1"),
            ("host", "shop.test"),
        ] {
            assert_eq!(h(name), want, "{name} for {method} {code}");
        }
    }

    // HEAD stays HEAD.
    let r = send(
        &client,
        asked(Method::HEAD, "shop.test", &failing("head", 404)),
    )
    .await
    .expect("request through edgeplane");
    assert_eq!(r.status, 418);
    assert_eq!(last().method, "HEAD");

    // A status not in the list passes through untouched, the page Service not asked.
    let before = pages.log.lock().expect("log").len();
    let r = send(
        &client,
        asked(Method::GET, "shop.test", &failing("500", 500)),
    )
    .await
    .expect("request through edgeplane");
    assert_eq!(r.status, 500);
    assert_eq!(r.pod().as_deref(), Some("app-pod"));
    assert_eq!(pages.log.lock().expect("log").len(), before);

    // An error page Service that cannot answer: 502, saying which, not the backend's 404.
    let r = send(
        &client,
        asked(Method::GET, "broken.test", &failing("dead", 404)),
    )
    .await
    .expect("request through edgeplane");
    assert_eq!(r.status, 502);
    let body = String::from_utf8_lossy(&r.body);
    assert!(
        body.contains("error page backend default/deadpages:80 did not answer"),
        "{body}"
    );
}
