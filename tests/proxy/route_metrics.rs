//! Per-route metrics through the whole path: manifests -> translator -> table published with
//! its label handles -> proxy on real sockets. Traffic through an HTTPRoute (a backend, a
//! redirect, an unmatched host), a GRPCRoute, a TCPRoute, a TLSRoute (passthrough) and a
//! UDPRoute, then the series read back with their label sets; a table without the HTTPRoute
//! takes its series out of the exposition.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use edgeplane::provider::manifest::parse_manifests;
use edgeplane::snapshot::Snapshot;
use edgeplane::table::RouteTable;
use edgeplane::translate::{translate, TranslateOptions, DEFAULT_CONTROLLER_NAME};
use http::{Method, StatusCode};
use tokio::net::UdpSocket;

use crate::l4::{ask, free_udp_addr, greeting_and_echo, tcp_echo, tls_echo, udp_echo};
use crate::support::client::{full, get_h1, H2c};
use crate::support::echo::start_echo;
use crate::support::proxy::{metric_sum, start};
use crate::support::tls::{client_config, connect, self_signed};

/// A Service `name` whose port 80 has the one endpoint `addr` (`protocol` TCP or UDP).
fn service(name: &str, protocol: &str, addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec:\n  ports: [{{name: p, port: 80, protocol: {protocol}}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: p, port: {port}, protocol: {protocol}}}]\nendpoints:\n- addresses: ['{ip}']\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

/// The ports of the Gateway's listeners, on one loopback IP.
struct Ports {
    http: SocketAddr,
    /// TCP and UDP share the port number.
    l4: SocketAddr,
    tls: SocketAddr,
}

const WEB_ROUTE: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  hostnames: [web.example, www.web.example]
  rules:
  - name: main
    matches: [{path: {type: PathPrefix, value: /}}, {path: {type: PathPrefix, value: /api}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /old}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplaceFullPath, replaceFullPath: /new}}}]
"#;

/// The manifests, with the HTTPRoute `web` or without it.
fn manifests(ports: &Ports, backends: &[String], with_web: bool) -> String {
    format!(
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
  - {{name: http, port: {http}, protocol: HTTP}}
  - {{name: tcp, port: {l4}, protocol: TCP}}
  - {{name: udp, port: {l4}, protocol: UDP}}
  - {{name: passthrough, port: {tls}, protocol: TLS, hostname: p.example.com, tls: {{mode: Passthrough}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: rpc}}
spec:
  parentRefs: [{{name: gw, sectionName: http}}]
  hostnames: [rpc.example]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {{name: stream}}
spec:
  parentRefs: [{{name: gw, sectionName: tcp}}]
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
kind: UDPRoute
metadata: {{name: datagrams}}
spec:
  parentRefs: [{{name: gw, sectionName: udp}}]
  rules: [{{backendRefs: [{{name: dgram, port: 80}}]}}]
{web}{backends}"#,
        ip = ports.http.ip(),
        http = ports.http.port(),
        l4 = ports.l4.port(),
        tls = ports.tls.port(),
        web = if with_web { WEB_ROUTE } else { "" },
        backends = backends.concat(),
    )
}

fn table(text: &str, bind: std::net::IpAddr, generation: u64) -> RouteTable {
    let objects = parse_manifests(std::path::Path::new("m.yaml"), text).unwrap();
    let options = TranslateOptions {
        ingress: Default::default(),
        controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: bind,
        now: jiff::Timestamp::now(),
        generation,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    };
    translate(&Snapshot::from_objects(objects), &options).table
}

/// A free TCP port on `ip`.
fn free_port(ip: std::net::IpAddr) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

#[tokio::test]
async fn each_route_kind_is_counted_with_its_labels_and_a_removed_route_leaves() {
    let web = start_echo("web").await;
    let backend_cert = self_signed(&["p.example.com"]);
    let (plain, _t1) = tcp_echo("plain").await;
    let (secure, _t2) = tls_echo("secure", &backend_cert).await;
    let (datagrams, _t3) = udp_echo("dgram").await;
    let l4 = free_udp_addr();
    let ip = l4.ip();
    let ports = Ports {
        http: SocketAddr::new(ip, free_port(ip)),
        l4,
        tls: SocketAddr::new(ip, free_port(ip)),
    };
    let backends = [
        service("web", "TCP", web.addr),
        service("plain", "TCP", plain),
        service("secure", "TCP", secure),
        service("dgram", "UDP", datagrams),
    ];
    let p = start(table(&manifests(&ports, &backends, true), ip, 1)).await;

    // Before any request: the route's backendRefs, its backends and the L4 routes at 0.
    let m = p.metrics.encode();
    let web_main = [
        r#"gateway="default/gw""#,
        r#"listener="http""#,
        r#"route="HTTPRoute/default/web""#,
        r#"rule="main""#,
        r#"backend="default/web:80""#,
    ];
    assert_eq!(
        metric_sum(&m, "edgeplane_route_backends", &web_main),
        1.0,
        "{m}"
    );
    let web_redirect = [
        r#"route="HTTPRoute/default/web""#,
        r#"rule="1""#,
        r#"backend="""#,
    ];
    assert_eq!(
        metric_sum(&m, "edgeplane_route_backends", &web_redirect),
        1.0,
        "{m}"
    );
    assert!(
        m.contains(r#"edgeplane_upstream_timeouts_total{backend="default/web:80"} 0"#),
        "{m}"
    );
    assert!(
        m.contains(r#"edgeplane_l4_connections_total{gateway="default/gw",listener="tcp",route="TCPRoute/default/stream"} 0"#),
        "{m}"
    );
    assert_eq!(metric_sum(&m, "edgeplane_requests_total", &[]), 0.0, "{m}");

    // HTTP: a backend, a redirect, a host no route has.
    let r = get_h1(ports.http, "web.example", "/x").await;
    assert_eq!(r.status, StatusCode::OK);
    let r = get_h1(ports.http, "web.example", "/old/page").await;
    assert_eq!(r.status, StatusCode::FOUND);
    let r = get_h1(ports.http, "nowhere.example", "/").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // gRPC over h2c.
    let mut h2 = H2c::connect(ports.http).await.unwrap();
    let call = H2c::request(
        Method::POST,
        "rpc.example",
        "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo",
    )
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(full(Bytes::from_static(&[0, 0, 0, 0, 0])))
    .unwrap();
    assert_eq!(h2.send(call).await.unwrap().status, StatusCode::OK);
    // TCP: greeting `plain\n` and the echo of `stream`.
    let s = tokio::net::TcpStream::connect(ports.l4).await.unwrap();
    assert_eq!(greeting_and_echo(s, "stream").await, "plain");
    // TLS passthrough.
    let s = connect(
        ports.tls,
        "p.example.com",
        client_config(&[&backend_cert], &[]),
    )
    .await
    .unwrap();
    assert_eq!(greeting_and_echo(s, "passed").await, "secure");
    // UDP: `hello` out, `dgram:hello` back.
    let client = UdpSocket::bind((ip, 0)).await.unwrap();
    let mut reply = None;
    for _ in 0..5 {
        reply = ask(&client, ports.l4, "hello").await;
        if reply.is_some() {
            break;
        }
    }
    assert_eq!(reply.as_deref(), Some("dgram:hello"));

    let m = p.metrics.encode();
    let count = |labels: &[&str]| metric_sum(&m, "edgeplane_requests_total", labels);
    let ok = [&web_main[..], &[r#"method="GET""#, r#"code="200""#]].concat();
    assert_eq!(count(&ok), 1.0, "{m}");
    assert_eq!(
        metric_sum(&m, "edgeplane_request_duration_seconds_count", &ok),
        1.0,
        "{m}"
    );
    let redirected = [
        r#"gateway="default/gw""#,
        r#"listener="http""#,
        r#"route="HTTPRoute/default/web""#,
        r#"rule="1""#,
        r#"backend="""#,
        r#"method="GET""#,
        r#"code="302""#,
    ];
    assert_eq!(count(&redirected), 1.0, "{m}");
    let unmatched = [
        r#"gateway="default/gw""#,
        r#"listener="http""#,
        r#"route="""#,
        r#"rule="""#,
        r#"backend="""#,
        r#"code="404""#,
    ];
    assert_eq!(count(&unmatched), 1.0, "{m}");
    let grpc = [
        r#"listener="http""#,
        r#"route="GRPCRoute/default/rpc""#,
        r#"rule="0""#,
        r#"backend="default/web:80""#,
        r#"method="POST""#,
        r#"code="200""#,
    ];
    assert_eq!(count(&grpc), 1.0, "{m}");
    assert_eq!(count(&[]), 4.0, "every request once: {m}");
    // The backend's own series: two exchanges (HTTP/1.1 and gRPC), a body each way.
    let web_backend = [r#"backend="default/web:80""#];
    assert_eq!(
        metric_sum(
            &m,
            "edgeplane_upstream_first_byte_seconds_count",
            &web_backend
        ),
        2.0,
        "{m}"
    );
    assert!(metric_sum(&m, "edgeplane_upstream_connect_seconds_count", &web_backend) >= 1.0);
    assert!(metric_sum(&m, "edgeplane_upstream_request_bytes_total", &web_backend) >= 5.0);
    assert!(metric_sum(&m, "edgeplane_upstream_response_bytes_total", &web_backend) > 0.0);
    // L4 routes: streams and sessions, bytes each way as they passed.
    let tcp = [r#"listener="tcp""#, r#"route="TCPRoute/default/stream""#];
    let bytes = |labels: &[&str], direction: &str| {
        let d = format!(r#"direction="{direction}""#);
        metric_sum(
            &m,
            "edgeplane_l4_bytes_total",
            &[labels, &[d.as_str()]].concat(),
        )
    };
    assert_eq!(
        metric_sum(&m, "edgeplane_l4_connections_total", &tcp),
        1.0,
        "{m}"
    );
    assert_eq!(bytes(&tcp, "received"), 6.0, "`stream`: {m}");
    assert_eq!(bytes(&tcp, "sent"), 12.0, "`plain\\n` and `stream`: {m}");
    let udp = [r#"listener="udp""#, r#"route="UDPRoute/default/datagrams""#];
    assert_eq!(
        metric_sum(&m, "edgeplane_l4_connections_total", &udp),
        1.0,
        "{m}"
    );
    assert_eq!(bytes(&udp, "received"), 5.0, "{m}");
    assert_eq!(bytes(&udp, "sent"), 11.0, "{m}");
    let tls = [
        r#"listener="passthrough""#,
        r#"route="TLSRoute/default/passed""#,
    ];
    assert_eq!(
        metric_sum(&m, "edgeplane_l4_connections_total", &tls),
        1.0,
        "{m}"
    );
    assert!(
        bytes(&tls, "received") > 6.0,
        "the ClientHello and more: {m}"
    );
    // A stream's length is observed once it ends (the client closed it above).
    let mut ended = 0.0;
    for _ in 0..100 {
        let m = p.metrics.encode();
        ended = metric_sum(&m, "edgeplane_l4_connection_duration_seconds_count", &tcp);
        if ended == 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ended, 1.0);

    // The HTTPRoute leaves the configuration: its series leave /metrics, the rest stay.
    p.publish(table(&manifests(&ports, &backends, false), ip, 2))
        .await;
    let m = p.metrics.encode();
    assert!(!m.contains("HTTPRoute/default/web"), "{m}");
    assert_eq!(
        metric_sum(&m, "edgeplane_requests_total", &grpc),
        1.0,
        "{m}"
    );
    assert!(
        m.contains(r#"backend="default/web:80""#),
        "GRPCRoute still uses it: {m}"
    );
    assert_eq!(
        metric_sum(&m, "edgeplane_l4_connections_total", &tcp),
        1.0,
        "{m}"
    );
}
