//! The `default-backend` annotation through `serve --config-dir`: a path whose Service has no
//! endpoint is answered by the default backend's Service, a path whose Service has one by its
//! own.

use crate::standalone::{serve, service};
use crate::support::client::{get, h1_client, send};
use crate::support::echo::start_echo;

const TEXT: &str = r#"
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: edge}
spec: {controller: edgeplane.dev/ingress-controller}
---
apiVersion: v1
kind: Service
metadata: {name: gone}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  annotations: {nginx.ingress.kubernetes.io/default-backend: sorry}
spec:
  ingressClassName: edge
  rules:
  - host: shop.test
    http:
      paths:
      - {path: /old, pathType: Prefix, backend: {service: {name: gone, port: {number: 80}}}}
      - {path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}
"#;

#[tokio::test]
async fn a_path_without_endpoints_is_answered_by_the_default_backend() {
    let app = start_echo("app-pod").await;
    let sorry = start_echo("sorry-pod").await;
    let text = format!("{TEXT}{}{}", service("app", &app), service("sorry", &sorry));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    for (path, pod) in [("/old/page", "sorry-pod"), ("/new", "app-pod")] {
        let r = send(&client, get(server.http(), "shop.test", path))
            .await
            .expect("request through edgeplane");
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.pod().as_deref(), Some(pod), "{path}");
    }
}
