//! `ssl-passthrough` through `serve --config-dir`: on the implicit Gateway's HTTPS port, a TLS
//! client whose SNI is the passthrough Ingress's host completes its handshake with the backend
//! (its own certificate, not the Gateway's) and gets the backend's answer, while another SNI on
//! the same port is terminated with the Ingress's `tls[]` certificate and routed as HTTPS;
//! plain HTTP for the passthrough host still follows the Ingress's rules; the status reports
//! the annotations that do not apply to passed-through connections (not the missing `tls[]`
//! Secret of the passthrough host), the stream is counted under
//! `route="Ingress/default/pass"`, and an unmatched HTTPS request under the HTTPS listener.
//! Through an `--ingress-gateway` without a TLS Passthrough listener for the host, its TLS is
//! terminated and the Ingress reports it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use edgeplane::devtools::echo::EchoIdentity;
use edgeplane::devtools::echo_tls::{serve_echo_tls, server_config};
use serde_json::Value;
use tokio::net::TcpListener;

use crate::standalone::{secret, serve, serve_with, service, status_entries};
use crate::support::client::{get, h1_client, send, Reply};
use crate::support::echo::start_fleet;
use crate::support::tls::{client_config, connect, get_tls, peer_leaf, self_signed, TestCert};

const MANIFESTS: &str = r#"
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: edge}
spec: {controller: edgeplane.dev/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: pass
  annotations:
    nginx.ingress.kubernetes.io/ssl-passthrough: "true"
    nginx.ingress.kubernetes.io/ssl-redirect: "false"
    nginx.ingress.kubernetes.io/proxy-body-size: 1m
spec:
  ingressClassName: edge
  tls: [{hosts: [pass.example.com], secretName: never-made}]
  rules:
  - host: pass.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: pass, port: {number: 443}}}}
      - {path: /plain, pathType: Prefix, backend: {service: {name: shop, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  annotations:
    nginx.ingress.kubernetes.io/ssl-redirect: "false"
spec:
  ingressClassName: edge
  tls: [{hosts: [shop.example.com], secretName: shop-tls}]
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: shop, port: {number: 80}}}}
"#;

/// A TLS echo backend (pod `pass-pod`) answering with `cert`.
async fn tls_backend(cert: &TestCert) -> SocketAddr {
    let config =
        server_config(cert.cert_pem.as_bytes(), cert.key_pem.as_bytes(), None).expect("config");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let identity = EchoIdentity {
        pod: "pass-pod".into(),
        namespace: "default".into(),
    };
    tokio::spawn(serve_echo_tls(listener, identity, None, config));
    addr
}

/// Service `pass` port 443 to the TLS backend at `addr`.
fn tls_service(addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: pass}}\n\
         spec: {{ports: [{{name: https, port: 443, targetPort: {port}}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: pass-1, labels: {{kubernetes.io/service-name: pass}}}}\n\
         addressType: IPv4\nports: [{{name: https, port: {port}}}]\n\
         endpoints: [{{addresses: [\"{ip}\"], conditions: {{ready: true}}}}]\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

fn pod(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    v["pod"].as_str().unwrap_or("").to_owned()
}

/// GET `/x` of `pass.example.com` over TLS to `https`, trusting only `trusted`, until it
/// answers (bounded: 20 s); `what` says what did not happen otherwise.
async fn until_tls(https: SocketAddr, trusted: &TestCert, what: &str) -> Reply {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let host = "pass.example.com";
        match get_tls(https, host, &[trusted], host, "/x").await {
            Ok(r) => return r,
            Err(e) => assert!(Instant::now() < deadline, "{what}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn passthrough_sni_reaches_the_backend_and_other_names_are_terminated() {
    let backend_cert = self_signed(&["pass.example.com"]);
    let gateway_cert = self_signed(&["shop.example.com"]);
    let backend = tls_backend(&backend_cert).await;
    let fleet = start_fleet(&["shop-pod"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let text = format!(
        "{MANIFESTS}{}{}{}",
        tls_service(backend),
        service("shop", &fleet[0]),
        secret("shop-tls", &gateway_cert)
    );
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;

    // The passthrough host: the handshake is the backend's (trusting only its certificate
    // verifies), and the answer is the backend's.
    let reply = until_tls(server.https(), &backend_cert, "never passed through").await;
    assert_eq!(
        (reply.status.as_u16(), pod(&reply.body)),
        (200, "pass-pod".to_owned())
    );
    let config = client_config(&[&backend_cert], &[b"http/1.1"]);
    let stream = connect(server.https(), "pass.example.com", config)
        .await
        .expect("handshake with the backend");
    assert_eq!(peer_leaf(&stream), Some(backend_cert.der.clone()));
    drop(stream);
    assert!(
        get_tls(
            server.https(),
            "pass.example.com",
            &[&gateway_cert],
            "pass.example.com",
            "/"
        )
        .await
        .is_err(),
        "the Gateway's certificate is never presented for the passthrough host"
    );

    // Another SNI on the same port: terminated with the Ingress's certificate, routed as HTTPS.
    let config = client_config(&[&gateway_cert], &[b"http/1.1"]);
    let stream = connect(server.https(), "shop.example.com", config)
        .await
        .expect("handshake with the Gateway");
    assert_eq!(peer_leaf(&stream), Some(gateway_cert.der.clone()));
    drop(stream);
    let r = get_tls(
        server.https(),
        "shop.example.com",
        &[&gateway_cert],
        "shop.example.com",
        "/cart",
    )
    .await
    .expect("HTTPS through the Gateway");
    assert_eq!((r.status.as_u16(), pod(&r.body)), (200, "shop-pod".into()));

    // Plain HTTP for the passthrough host follows the Ingress's rules.
    let r = send(&client, get(server.http(), "pass.example.com", "/plain/a"))
        .await
        .expect("plain HTTP");
    assert_eq!((r.status.as_u16(), pod(&r.body)), (200, "shop-pod".into()));

    // The status: the passthrough listener counts the Ingress; an HTTP annotation is reported.
    let entries = status_entries(&client, &server).await;
    let gateway = entries
        .iter()
        .find(|e| e["kind"] == "Gateway" && e["namespace"] == "edgeplane:ingress")
        .expect("the implicit Gateway");
    let listeners = gateway["status"]["listeners"]
        .as_array()
        .expect("listeners");
    let passthrough = listeners
        .iter()
        .find(|l| l["name"] == "passthrough-0")
        .expect("the passthrough listener");
    assert_eq!(passthrough["attachedRoutes"], 1, "{passthrough}");
    let programmed = passthrough["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Programmed" && c["status"] == "True");
    assert!(programmed, "{passthrough}");
    let ingress = entries
        .iter()
        .find(|e| e["kind"] == "Ingress" && e["name"] == "pass")
        .expect("the Ingress");
    let text = ingress["status"].to_string();
    assert!(
        text.contains("proxy-body-size is not applied to TLS connections passed through"),
        "{text}"
    );
    // Its tls[] Secret would never be used: a missing one is not reported.
    assert!(!text.contains("never-made"), "{text}");

    // The passed-through streams are counted under the Ingress.
    let metrics = send(
        &client,
        get(server.admin(), &server.admin().to_string(), "/metrics"),
    )
    .await
    .expect("metrics");
    let metrics = String::from_utf8_lossy(&metrics.body);
    let counted = metrics.lines().any(|l| {
        l.starts_with("edgeplane_l4_connections_total")
            && l.contains("route=\"Ingress/default/pass\"")
            && l.contains("listener=\"passthrough-0\"")
    });
    assert!(counted, "{metrics}");

    // An HTTPS request no route matches is counted under the socket's one HTTPS listener:
    // the passthrough listeners beside it serve no HTTP request.
    let r = get_tls(
        server.https(),
        "shop.example.com",
        &[&gateway_cert],
        "elsewhere.example.com",
        "/",
    )
    .await
    .expect("HTTPS for an unknown host");
    assert_eq!(
        r.status.as_u16(),
        421,
        "a host the certificate was not chosen for"
    );
    let metrics = send(
        &client,
        get(server.admin(), &server.admin().to_string(), "/metrics"),
    )
    .await
    .expect("metrics");
    let metrics = String::from_utf8_lossy(&metrics.body);
    let unmatched = metrics.lines().find(|l| {
        l.starts_with("edgeplane_requests_total")
            && l.contains("route=\"\"")
            && l.contains("code=\"421\"")
    });
    let unmatched = unmatched.unwrap_or_else(|| panic!("no unmatched series: {metrics}"));
    assert!(
        unmatched.contains("gateway=\"edgeplane:ingress/edge\"")
            && !unmatched.contains("listener=\"\""),
        "{unmatched}"
    );
}

#[tokio::test]
async fn an_ingress_gateway_without_a_passthrough_listener_terminates_and_reports_it() {
    let gateway_cert = self_signed(&["pass.example.com"]);
    let fleet = start_fleet(&["pass-pod"]).await;
    let gateway = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ours}
spec: {controllerName: edgeplane.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: shared}
spec:
  gatewayClassName: ours
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - name: https
    port: 443
    protocol: HTTPS
    hostname: pass.example.com
    tls: {certificateRefs: [{name: gateway-tls}]}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: edge}
spec: {controller: edgeplane.dev/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: pass
  annotations:
    nginx.ingress.kubernetes.io/ssl-passthrough: "true"
spec:
  ingressClassName: edge
  rules:
  - host: pass.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: pass, port: {number: 80}}}}
"#;
    let dir = tempfile::tempdir().expect("temp dir");
    let text = format!(
        "{gateway}{}{}",
        service("pass", &fleet[0]),
        secret("gateway-tls", &gateway_cert)
    );
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let flags = ["--ingress-gateway", "default/shared"];
    let server = serve_with(dir.path(), &client, &flags).await;

    // Not passed through: the Gateway's HTTPS listener terminates it and routes the Ingress.
    let reply = until_tls(server.https(), &gateway_cert, "never served").await;
    assert_eq!(
        (reply.status.as_u16(), pod(&reply.body)),
        (200, "pass-pod".to_owned())
    );

    let entries = status_entries(&client, &server).await;
    let ingress = entries
        .iter()
        .find(|e| e["kind"] == "Ingress" && e["name"] == "pass")
        .expect("the Ingress");
    let text = ingress["status"].to_string();
    assert!(
        text.contains(
            "host pass.example.com is not passed through: Gateway default/shared has no TLS \
             listener in Passthrough mode for it"
        ),
        "{text}"
    );
}
