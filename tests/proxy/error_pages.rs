//! A TrafficPolicy's `errorPages` on an HTTPRoute through the whole path (manifests ->
//! translator -> table -> proxy): a backend answer of a listed status is replaced by the
//! error page Service's, asked with `GET /` and the route's names; another status passes
//! through; the request is counted once and logged with the status the client got.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use edgeplane::provider::manifest::parse_manifests;
use edgeplane::proxy::{AccessSink, LogSpec, ProxyOptions};
use edgeplane::snapshot::Snapshot;
use edgeplane::table::AccessLogFormat;
use edgeplane::translate::{translate, TranslateOptions, DEFAULT_CONTROLLER_NAME};
use http::Method;

use crate::support::authz::error_page_server;
use crate::support::client::{self, h1_client, send};
use crate::support::echo::start_echo;
use crate::support::net::free_addr;
use crate::support::proxy::{metric_sum, start_with, test_options};

fn service(name: &str, addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec:\n  ports: [{{name: p, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: p, port: {port}}}]\nendpoints:\n- addresses: ['{ip}']\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

const ROUTES: &str = r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop}
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: web, port: 80}]
---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {name: pages}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: shop}]
  errorPages:
    statusCodes: [404, 503]
    backendRef: {name: pages, port: 80}
"#;

#[tokio::test]
async fn a_route_s_error_pages_replace_listed_backend_answers() {
    let web = start_echo("web").await;
    let pages = error_page_server().await;
    let bind = free_addr();
    let manifests = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: edge}}\nspec: {{controllerName: {DEFAULT_CONTROLLER_NAME}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw}}\nspec:\n  gatewayClassName: edge\n  listeners:\n  - {{name: http, port: {port}, protocol: HTTP}}\n{ROUTES}{}{}",
        service("web", web.addr),
        service("pages", pages.addr),
        port = bind.port(),
    );
    let objects = parse_manifests(std::path::Path::new("pages.yaml"), &manifests).unwrap();
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
            .header("accept", "application/json")
            .body(client::empty())
            .unwrap()
    };

    let failing = "/a?uuid=route-pages&succeedAfter=1000&responseCode=503";
    let r = send(&c, get(failing)).await.unwrap();
    assert_eq!(r.status, 418);
    assert_eq!(&r.body[..], b"page for 503");
    let seen = pages.log.lock().unwrap().last().cloned().unwrap();
    assert_eq!((seen.method.as_str(), seen.path.as_str()), ("GET", "/"));
    let h = |name: &str| seen.headers.get(name).cloned().unwrap_or_default();
    assert_eq!(h("x-code"), "503");
    assert_eq!(h("x-format"), "application/json");
    assert_eq!(h("x-original-uri"), failing);
    assert_eq!(h("x-namespace"), "default");
    assert_eq!(h("x-ingress-name"), "shop");
    assert_eq!(h("x-service-name"), "web");
    assert_eq!(h("x-service-port"), "80");
    assert_eq!(h("host"), "h");
    assert!(!h("x-request-id").is_empty(), "{seen:?}");

    // Not listed: passed through as the backend gave it.
    let r = send(
        &c,
        get("/b?uuid=route-pass&succeedAfter=1000&responseCode=502"),
    )
    .await
    .unwrap();
    assert_eq!((r.status.as_u16(), r.pod().as_deref()), (502, Some("web")));
    assert_eq!(pages.log.lock().unwrap().len(), 1);

    // Counted once each, with the status the client got.
    let text = p.metrics.encode();
    let count = |code: &str| {
        let code = format!("code=\"{code}\"");
        metric_sum(&text, "edgeplane_requests_total", &[code.as_str()])
    };
    assert_eq!((count("418"), count("503"), count("502")), (1.0, 0.0, 1.0));

    // The access log says the status the client got and that an error page answered.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let entry = loop {
        let found = lines
            .lock()
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|l| l["path"].as_str().is_some_and(|p| p.starts_with("/a")));
        if let Some(found) = found {
            break found;
        }
        assert!(std::time::Instant::now() < deadline, "no access log line");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(entry["status"], 418, "{entry}");
    assert_eq!(entry["decision"], "error_page", "{entry}");
}
