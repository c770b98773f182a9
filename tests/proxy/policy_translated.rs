//! TrafficPolicies through the whole path: manifests -> translator -> route table -> proxy.
//! Basic auth from an htpasswd Secret on one rule, a policy whose Secret is missing (not
//! accepted, and its rule refuses everyone rather than opening), a rate limit on the route,
//! and an unprotected rule beside them.

use std::net::SocketAddr;

use edgeplane::provider::manifest::parse_manifests;
use edgeplane::snapshot::Snapshot;
use edgeplane::status::ObjectKind;
use edgeplane::translate::{translate, TranslateOptions, DEFAULT_CONTROLLER_NAME};
use http::Method;

use crate::support::client::{self, get, h1_client, send};
use crate::support::echo::start_echo;
use crate::support::net::free_addr;
use crate::support::proxy::start;

const POLICIES: &str = r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw}]
  rules:
  - name: admin
    matches: [{path: {value: /admin}}]
    backendRefs: [{name: web, port: 80}]
  - name: locked
    matches: [{path: {value: /locked}}]
    backendRefs: [{name: web, port: 80}]
  - name: limited
    matches: [{path: {value: /limited}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /open}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: v1
kind: Secret
metadata: {name: admins}
stringData:
  .htpasswd: |
    # user "u", password "test"
    u:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=
---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {name: admin-auth}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: app, sectionName: admin}]
  basicAuth: {secretRef: {name: admins}, realm: admin}
---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {name: broken-auth}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: app, sectionName: locked}]
  basicAuth: {secretRef: {name: missing}}
---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {name: limit}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: app, sectionName: limited}]
  rateLimit: {requests: 1, unit: Minute}
"#;

fn service(addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: web}}\nspec:\n  ports: [{{name: p, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-1\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{{name: p, port: {port}}}]\nendpoints:\n- addresses: ['{ip}']\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

#[tokio::test]
async fn translated_policies_authenticate_refuse_and_limit() {
    let web = start_echo("web").await;
    let bind = free_addr();
    let manifests = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: edge}}\nspec: {{controllerName: {DEFAULT_CONTROLLER_NAME}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw}}\nspec:\n  gatewayClassName: edge\n  listeners:\n  - {{name: http, port: {port}, protocol: HTTP}}\n{POLICIES}{}",
        service(web.addr),
        port = bind.port(),
    );
    let objects = parse_manifests(std::path::Path::new("policies.yaml"), &manifests).unwrap();
    let options = TranslateOptions {
        ingress: Default::default(),
        controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: bind.ip(),
        now: jiff::Timestamp::now(),
        generation: 1,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    };
    let t = translate(&Snapshot::from_objects(objects), &options);
    let reason = |name: &str| {
        let s = t
            .status
            .get(ObjectKind::TrafficPolicy, Some("default"), name)
            .expect("policy status");
        s.status.to_json()["ancestors"][0]["conditions"][0]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(reason("admin-auth"), "Accepted");
    assert_eq!(reason("limit"), "Accepted");
    assert_eq!(reason("broken-auth"), "Invalid");
    let _p = start(t.table).await;
    let c = h1_client();
    let with_auth = |path: &str, credentials: &str| {
        client::request(Method::GET, bind, "h", path)
            .header("authorization", format!("Basic {credentials}"))
            .body(client::empty())
            .unwrap()
    };
    // "u:test" and "u:wrong" in base64.
    let (good, bad) = ("dTp0ZXN0", "dTp3cm9uZw==");

    let r = send(&c, get(bind, "h", "/admin")).await.unwrap();
    assert_eq!(r.status, 401);
    assert!(r
        .header("www-authenticate")
        .is_some_and(|v| v.contains("admin")));
    assert_eq!(
        send(&c, with_auth("/admin", bad)).await.unwrap().status,
        401
    );
    let r = send(&c, with_auth("/admin", good)).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.pod().as_deref(), Some("web"));

    assert_eq!(
        send(&c, with_auth("/locked", good)).await.unwrap().status,
        401
    );
    assert_eq!(send(&c, get(bind, "h", "/open")).await.unwrap().status, 200);

    assert_eq!(
        send(&c, get(bind, "h", "/limited")).await.unwrap().status,
        200
    );
    let r = send(&c, get(bind, "h", "/limited")).await.unwrap();
    assert_eq!(r.status, 429);
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!(retry >= 1);
}
