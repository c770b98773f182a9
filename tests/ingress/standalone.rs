//! `serve --config-dir` with an Ingress: hosts, Exact and Prefix paths, the default backend,
//! TLS by SNI with the Ingress's Secret, the implicit Gateway in `/debug/status`, the
//! Ingress's problems reported, and its metrics labelled `Ingress/ns/name`.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::client::{get, h1_client, send, TestClient};
use crate::support::echo::{start_fleet, Echo};
use crate::support::net::loopback_ip;
use crate::support::tls::{get_tls, self_signed, TestCert};

/// The `edgeplane serve` process of one test, killed when dropped.
pub(crate) struct Server {
    child: Child,
    ip: IpAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub(crate) fn admin(&self) -> SocketAddr {
        SocketAddr::new(self.ip, 9901)
    }
    pub(crate) fn dashboard(&self) -> SocketAddr {
        SocketAddr::new(self.ip, 9902)
    }
    pub(crate) fn http(&self) -> SocketAddr {
        SocketAddr::new(self.ip, 18080)
    }
    pub(crate) fn https(&self) -> SocketAddr {
        SocketAddr::new(self.ip, 18443)
    }
}

/// Every entry of `/debug/status` on `server`'s dashboard.
pub(crate) async fn status_entries(client: &TestClient, server: &Server) -> Vec<Value> {
    let dashboard = server.dashboard();
    let status = send(
        client,
        get(dashboard, &dashboard.to_string(), "/debug/status"),
    )
    .await
    .expect("debug status");
    let all: Value = serde_json::from_slice(&status.body).expect("status JSON");
    all.as_array().cloned().unwrap_or_default()
}

/// The status of Ingress `name` as `/debug/status` shows it, as JSON text (empty when the
/// Ingress has none).
pub(crate) async fn ingress_status(client: &TestClient, server: &Server, name: &str) -> String {
    status_entries(client, server)
        .await
        .iter()
        .find(|e| e["kind"] == "Ingress" && e["name"] == name)
        .map(|e| e["status"].to_string())
        .unwrap_or_default()
}

pub(crate) async fn serve(dir: &Path, client: &TestClient) -> Server {
    serve_with(dir, client, &[]).await
}

/// [`serve`] with more flags.
pub(crate) async fn serve_with(dir: &Path, client: &TestClient, flags: &[&str]) -> Server {
    let ip = loopback_ip();
    let child = Command::new(env!("CARGO_BIN_EXE_edgeplane"))
        .args(["serve", "--config-dir"])
        .arg(dir)
        .args(flags)
        .args(["--bind-address", &ip.to_string()])
        .args(["--admin-addr", &SocketAddr::new(ip, 9901).to_string()])
        .args(["--dashboard-addr", &SocketAddr::new(ip, 9902).to_string()])
        .args(["--port-map", "80=18080,443=18443"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start edgeplane");
    let server = Server { child, ip };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ready = send(
            client,
            get(server.admin(), &server.admin().to_string(), "/readyz"),
        )
        .await;
        if ready.is_ok_and(|r| r.status == 200) {
            return server;
        }
        assert!(Instant::now() < deadline, "edgeplane did not become ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A Service `name` with port `http` 80 (and `alt` 81) to the echo server `echo`.
pub(crate) fn service(name: &str, echo: &Echo) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n\
         spec: {{ports: [{{name: http, port: 80, targetPort: {port}}}, {{name: alt, port: 81, targetPort: {port}}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: {name}-1, labels: {{kubernetes.io/service-name: {name}}}}}\n\
         addressType: IPv4\nports: [{{name: http, port: {port}}}, {{name: alt, port: {port}}}]\n\
         endpoints: [{{addresses: [\"{ip}\"], conditions: {{ready: true}}}}]\n",
        port = echo.addr.port(),
        ip = echo.addr.ip(),
    )
}

pub(crate) fn secret(name: &str, cert: &TestCert) -> String {
    let indent = |pem: &str| {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}}}\ntype: kubernetes.io/tls\n\
         stringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        indent(&cert.cert_pem),
        indent(&cert.key_pem)
    )
}

const INGRESS: &str = r#"
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: edge
  annotations: {ingressclass.kubernetes.io/is-default-class: "true"}
spec: {controller: edgeplane.dev/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  annotations:
    nginx.ingress.kubernetes.io/mirror-target: "true"
    nginx.ingress.kubernetes.io/ssl-redirect: "false"
spec:
  defaultBackend: {service: {name: fallback, port: {number: 80}}}
  tls: [{hosts: [shop.example.com], secretName: shop-tls}]
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /cart, pathType: Exact, backend: {service: {name: cart, port: {number: 80}}}}
      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {name: alt}}}}
  - host: "*.blog.example.com"
    http:
      paths:
      - {path: /, pathType: ImplementationSpecific, backend: {service: {name: api, port: {number: 80}}}}
"#;

fn pod(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    v["pod"].as_str().unwrap_or("").to_owned()
}

/// The pod answering `GET host path` over plain HTTP, or the status when it is not 200.
async fn reached(client: &TestClient, server: &Server, host: &str, path: &str) -> String {
    match send(client, get(server.http(), host, path)).await {
        Ok(r) if r.status == 200 => pod(&r.body),
        Ok(r) => r.status.as_u16().to_string(),
        Err(e) => format!("error: {e}"),
    }
}

#[tokio::test]
async fn an_ingress_is_served_from_files_by_host_path_and_sni() {
    let fleet = start_fleet(&["cart-pod", "api-pod", "fallback-pod"]).await;
    let cert = self_signed(&["shop.example.com"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let text = format!(
        "{INGRESS}{}{}{}{}",
        service("cart", &fleet[0]),
        service("api", &fleet[1]),
        service("fallback", &fleet[2]),
        secret("shop-tls", &cert)
    );
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;

    let deadline = Instant::now() + Duration::from_secs(20);
    while reached(&client, &server, "shop.example.com", "/cart").await != "cart-pod" {
        assert!(Instant::now() < deadline, "the Ingress was never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cases = [
        ("shop.example.com", "/cart", "cart-pod"),
        // Exact is exact: the rest of the host goes to the default backend.
        ("shop.example.com", "/cart/items", "fallback-pod"),
        // Prefix by segment, the port named through the Service.
        ("shop.example.com", "/api/v1/items", "api-pod"),
        ("shop.example.com", "/apiv1", "fallback-pod"),
        ("shop.example.com", "/", "fallback-pod"),
        // A wildcard host (ImplementationSpecific: a prefix).
        ("a.blog.example.com", "/post/1", "api-pod"),
        // The default backend serves the Ingress's hosts, not every host.
        ("other.test", "/", "404"),
    ];
    for (host, path, want) in cases {
        assert_eq!(
            reached(&client, &server, host, path).await,
            want,
            "{host}{path}"
        );
    }

    // HTTPS: the Secret's certificate is chosen by SNI and verifies for the host.
    let r = get_tls(
        server.https(),
        "shop.example.com",
        &[&cert],
        "shop.example.com",
        "/api/x",
    )
    .await
    .expect("TLS request with the Ingress's certificate");
    assert_eq!(
        (r.status.as_u16(), pod(&r.body)),
        (200, "api-pod".to_owned())
    );
    assert!(
        get_tls(server.https(), "other.test", &[&cert], "other.test", "/")
            .await
            .is_err(),
        "no certificate for a host no tls[] entry names"
    );

    // The implicit Gateway and the Ingress are in the status, with the annotation reported.
    let entries = status_entries(&client, &server).await;
    let gateway = entries
        .iter()
        .find(|e| e["kind"] == "Gateway" && e["namespace"] == "edgeplane:ingress")
        .expect("the implicit Gateway in /debug/status");
    assert_eq!(gateway["name"], "edge");
    let ingress = entries
        .iter()
        .find(|e| e["kind"] == "Ingress" && e["name"] == "shop")
        .expect("the Ingress in /debug/status");
    assert_eq!(ingress["apiVersion"], "networking.k8s.io/v1");
    let text = ingress["status"].to_string();
    assert!(
        text.contains("nginx.ingress.kubernetes.io/mirror-target is not supported yet"),
        "{text}"
    );

    // Metrics name the route by kind.
    let metrics = send(
        &client,
        get(server.admin(), &server.admin().to_string(), "/metrics"),
    )
    .await
    .expect("metrics");
    let metrics = String::from_utf8_lossy(&metrics.body);
    assert!(
        metrics.contains("route=\"Ingress/default/shop\""),
        "{metrics}"
    );
}
