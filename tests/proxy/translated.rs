//! The extended HTTPRoute features through the whole path: manifests -> translator -> route
//! table -> proxy, against loopback backends named by hand-written EndpointSlices.

use std::net::SocketAddr;
use std::time::Duration;

use edgeplane::provider::manifest::parse_manifests;
use edgeplane::snapshot::Snapshot;
use edgeplane::translate::{translate, TranslateOptions, DEFAULT_CONTROLLER_NAME};
use http::Method;

use crate::support::client::{self, get, h1_client, send};
use crate::support::echo::start_echo;
use crate::support::mirror::start_recorder;
use crate::support::net::free_addr;
use crate::support::proxy::start;
use crate::support::websocket::{start_ws_echo, ws_connect, ws_round_trip};

/// A Service `name` whose port 80 (with `app_protocol`) has the one endpoint `addr`.
fn service(name: &str, app_protocol: &str, addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec:\n  ports: [{{name: p, port: 80, appProtocol: {app_protocol}}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: p, port: {port}}}]\nendpoints:\n- addresses: ['{ip}']\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

const ROUTE: &str = r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: features}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /mirror}}]
    filters:
    - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Mirrored, value: 'yes'}]}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: shadow, port: 80}}}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /timeout}}]
    timeouts: {request: 300ms}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /cors}}]
    filters:
    - type: CORS
      cors: {allowOrigins: ['https://*.example.com'], allowMethods: [PUT]}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /ws}}]
    backendRefs: [{name: chat, port: 80}]
"#;

/// Conditions that report a problem: any False except `Conflicted`, and `PartiallyInvalid`.
fn problem_conditions(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            if let (Some(ty), Some(status)) = (map.get("type"), map.get("status")) {
                let bad = (status == "False" && ty != "Conflicted") || ty == "PartiallyInvalid";
                if bad {
                    out.push(v.to_string());
                }
            }
            map.values().for_each(|c| problem_conditions(c, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|c| problem_conditions(c, out)),
        _ => {}
    }
}

#[tokio::test]
async fn manifests_drive_mirrors_timeouts_cors_and_websockets() {
    let web = start_echo("web").await;
    let chat = start_ws_echo("chat").await;
    let (shadow, mut rec) = start_recorder("shadow").await;
    let bind = free_addr();
    let manifests = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: edge}}\nspec: {{controllerName: {DEFAULT_CONTROLLER_NAME}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw}}\nspec:\n  gatewayClassName: edge\n  addresses: [{{type: IPAddress}}]\n  listeners:\n  - {{name: http, port: {port}, protocol: HTTP}}\n{ROUTE}{}{}{}",
        service("web", "http", web.addr),
        service("chat", "kubernetes.io/ws", chat.addr),
        service("shadow", "http", shadow.addr),
        port = bind.port(),
    );
    let objects = parse_manifests(std::path::Path::new("features.yaml"), &manifests).unwrap();
    let options = TranslateOptions {
        ingress: Default::default(),
        controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: bind.ip(),
        now: jiff::Timestamp::now(),
        generation: 1,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    };
    let translation = translate(&Snapshot::from_objects(objects), &options);
    let mut problems = Vec::new();
    for e in &translation.status.entries {
        problem_conditions(&e.status.to_json(), &mut problems);
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        translation.table.listener(&bind).is_some(),
        "the empty address binds the bind address"
    );
    let _p = start(translation.table).await;
    let c = h1_client();

    let r = send(&c, get(bind, "a.example.com", "/mirror"))
        .await
        .unwrap();
    assert_eq!(r.pod().as_deref(), Some("web"));
    let copy = rec.next(Duration::from_secs(5)).await.expect("mirror copy");
    assert_eq!(
        (copy.path.as_str(), copy.host.as_str()),
        ("/mirror", "a.example.com")
    );
    assert_eq!(copy.headers["x-mirrored"], "yes");

    assert_eq!(
        send(&c, get(bind, "h", "/timeout?delay=2s"))
            .await
            .unwrap()
            .status,
        504
    );
    assert_eq!(
        send(&c, get(bind, "h", "/timeout")).await.unwrap().status,
        200
    );

    let req = client::request(Method::OPTIONS, bind, "h", "/cors")
        .header("origin", "https://app.example.com")
        .header("access-control-request-method", "PUT")
        .body(client::empty())
        .unwrap();
    let r = send(&c, req).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("access-control-allow-origin").as_deref(),
        Some("https://app.example.com")
    );
    assert_eq!(
        r.header("access-control-allow-methods").as_deref(),
        Some("PUT")
    );
    assert_eq!(r.header("access-control-max-age").as_deref(), Some("5"));

    let mut ws = ws_connect(bind, "chat.example", "/ws").await.unwrap();
    assert_eq!(ws_round_trip(&mut ws, "hi").await.unwrap(), "chat: hi");
}
