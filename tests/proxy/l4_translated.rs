//! TLSRoutes, TCPRoutes and UDPRoutes through the whole path: manifests -> translator -> route
//! table -> proxy. One Gateway carries a TLS port shared by a Terminate and a Passthrough
//! listener, and a TCP and a UDP listener on one port number.

use std::net::SocketAddr;

use edgeplane::provider::manifest::parse_manifests;
use edgeplane::snapshot::Snapshot;
use edgeplane::translate::{translate, TranslateOptions, DEFAULT_CONTROLLER_NAME};
use tokio::net::UdpSocket;

use crate::l4::{ask, free_udp_addr, greeting_and_echo, tcp_echo, tls_echo, udp_echo};
use crate::support::proxy::start;
use crate::support::tls::{client_config, connect, self_signed};

/// A Service `name` whose port 80 has the one endpoint `addr` (`protocol` TCP or UDP).
fn service(name: &str, protocol: &str, addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec:\n  ports: [{{name: p, port: 80, protocol: {protocol}}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: p, port: {port}, protocol: {protocol}}}]\nendpoints:\n- addresses: ['{ip}']\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

/// Every condition whose status is False, except `Conflicted`.
fn problems(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            if let (Some(ty), Some(status)) = (map.get("type"), map.get("status")) {
                if status == "False" && ty != "Conflicted" {
                    out.push(v.to_string());
                }
            }
            map.values().for_each(|c| problems(c, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|c| problems(c, out)),
        _ => {}
    }
}

#[tokio::test]
async fn manifests_drive_tls_tcp_and_udp_routes() {
    let listener_cert = self_signed(&["t.example.com"]);
    let backend_cert = self_signed(&["p.example.com"]);
    let (plain, _t1) = tcp_echo("plain").await;
    let (secure, _t2) = tls_echo("secure", &backend_cert).await;
    let (datagrams, _t3) = udp_echo("dgram").await;
    let shared = free_udp_addr();
    // The TCP listener takes the UDP listener's port number on the same IP.
    let tcp = shared;
    let tls = std::net::TcpListener::bind((shared.ip(), 0))
        .and_then(|l| l.local_addr())
        .unwrap();
    let quoted = |pem: &str| serde_json::to_string(pem).unwrap();
    let manifests = format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: edge}}
spec: {{controllerName: {DEFAULT_CONTROLLER_NAME}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw}}
spec:
  gatewayClassName: edge
  addresses: [{{type: IPAddress, value: '{ip}'}}]
  listeners:
  - {{name: terminate, port: {tls_port}, protocol: TLS, hostname: t.example.com, tls: {{mode: Terminate, certificateRefs: [{{name: cert}}]}}}}
  - {{name: passthrough, port: {tls_port}, protocol: TLS, hostname: p.example.com, tls: {{mode: Passthrough}}}}
  - {{name: tcp, port: {l4_port}, protocol: TCP}}
  - {{name: udp, port: {l4_port}, protocol: UDP}}
---
apiVersion: v1
kind: Secret
metadata: {{name: cert}}
type: kubernetes.io/tls
stringData: {{tls.crt: {crt}, tls.key: {key}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: terminated}}
spec:
  parentRefs: [{{name: gw, sectionName: terminate}}]
  hostnames: [t.example.com]
  rules: [{{backendRefs: [{{name: plain, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: passed}}
spec:
  parentRefs: [{{name: gw, sectionName: passthrough}}]
  hostnames: [p.example.com]
  rules: [{{backendRefs: [{{name: secure, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {{name: stream}}
spec:
  parentRefs: [{{name: gw, port: {l4_port}, sectionName: tcp}}]
  rules: [{{backendRefs: [{{name: plain, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {{name: datagrams}}
spec:
  parentRefs: [{{name: gw, sectionName: udp}}]
  rules: [{{backendRefs: [{{name: dgram, port: 80}}]}}]
{}{}{}"#,
        service("plain", "TCP", plain),
        service("secure", "TCP", secure),
        service("dgram", "UDP", datagrams),
        ip = tls.ip(),
        tls_port = tls.port(),
        l4_port = tcp.port(),
        crt = quoted(&listener_cert.cert_pem),
        key = quoted(&listener_cert.key_pem),
    );
    let objects = parse_manifests(std::path::Path::new("l4.yaml"), &manifests).unwrap();
    let options = TranslateOptions {
        ingress: Default::default(),
        controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: tls.ip(),
        now: jiff::Timestamp::now(),
        generation: 1,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    };
    let translation = translate(&Snapshot::from_objects(objects), &options);
    let mut found = Vec::new();
    for e in &translation.status.entries {
        problems(&e.status.to_json(), &mut found);
    }
    assert!(found.is_empty(), "{found:#?}");
    let gateway = translation
        .status
        .entries
        .iter()
        .find(|e| e.kind.as_str() == "Gateway")
        .unwrap()
        .status
        .to_json()
        .into_owned();
    let attached: Vec<i64> = gateway["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["attachedRoutes"].as_i64().unwrap())
        .collect();
    assert_eq!(attached, vec![1, 1, 1, 1]);
    let proxy = start(translation.table).await;

    // Terminate: the client verifies the listener's certificate; the backend gets plaintext.
    let s = connect(tls, "t.example.com", client_config(&[&listener_cert], &[]))
        .await
        .unwrap();
    assert_eq!(greeting_and_echo(s, "terminated").await, "plain");
    // Passthrough on the same port: the client verifies the backend's own certificate.
    let s = connect(tls, "p.example.com", client_config(&[&backend_cert], &[]))
        .await
        .unwrap();
    assert_eq!(greeting_and_echo(s, "passed").await, "secure");
    // TCP and UDP on one port number.
    let s = tokio::net::TcpStream::connect(tcp).await.unwrap();
    assert_eq!(greeting_and_echo(s, "stream").await, "plain");
    let client = UdpSocket::bind((shared.ip(), 0)).await.unwrap();
    let mut reply = None;
    for _ in 0..5 {
        reply = ask(&client, shared, "hello").await;
        if reply.is_some() {
            break;
        }
    }
    assert_eq!(reply.as_deref(), Some("dgram:hello"));
    assert!(proxy.proxy.bound_udp().contains(&shared));
}
