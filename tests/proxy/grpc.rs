//! GRPCRoute through the whole path: manifests -> translator -> route table -> proxy, with a
//! tonic client and tonic-served HTTP/2-only backends on loopback. The Services declare no
//! `appProtocol`: a GRPCRoute's backends are reached with h2c regardless.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use edgeplane::provider::manifest::parse_manifests;
use edgeplane::snapshot::Snapshot;
use edgeplane::translate::{translate, TranslateOptions, DEFAULT_CONTROLLER_NAME};
use prost::Message;
use tonic::Code;

use crate::support::client::{get, h1_client, send};
use crate::support::grpc::{
    bidi_lockstep, channel, client_stream, server_stream, start_grpc_backend, tls_channel, unary,
    Msg,
};
use crate::support::mirror::start_recorder;
use crate::support::net::free_addr;
use crate::support::proxy::{start, Running};
use crate::support::tls::self_signed;

/// Bound on each call, so a broken hop fails the test instead of hanging it.
const CALL: Duration = Duration::from_secs(10);

/// A Service `name` without `appProtocol` whose port 80 has the one endpoint `addr`.
fn service(name: &str, addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec:\n  ports: [{{name: p, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: p, port: {port}}}]\nendpoints:\n- addresses: ['{ip}']\n",
        port = addr.port(),
        ip = addr.ip(),
    )
}

/// Translates a Gateway with one HTTP listener on `bind`, `routes` and `services`, checks
/// that every object is accepted, and starts a proxy on the table.
async fn serve(bind: SocketAddr, routes: &str, services: &[String]) -> Running {
    let listener = format!("{{name: http, port: {}, protocol: HTTP}}", bind.port());
    serve_listener(bind, &listener, routes, services).await
}

/// [`serve`] with the Gateway listener written out (and any Secret it needs in `services`).
async fn serve_listener(
    bind: SocketAddr,
    listener: &str,
    routes: &str,
    services: &[String],
) -> Running {
    let manifests = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: edge}}\nspec: {{controllerName: {DEFAULT_CONTROLLER_NAME}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw}}\nspec:\n  gatewayClassName: edge\n  addresses: [{{type: IPAddress}}]\n  listeners:\n  - {listener}\n{routes}{}",
        services.concat(),
    );
    let objects = parse_manifests(std::path::Path::new("grpc.yaml"), &manifests).unwrap();
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
    let grpc_routes = translation
        .status
        .entries
        .iter()
        .filter(|e| e.kind.as_str() == "GRPCRoute")
        .count();
    assert!(grpc_routes > 0, "GRPCRoutes get a status of their own");
    let problems = translation.status.problems();
    assert!(problems.is_empty(), "{problems:#?}");
    start(translation.table).await
}

const STREAMS: &str = r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: streams}
spec:
  parentRefs: [{name: gw}]
  hostnames: [grpc.example.com]
  rules:
  - matches:
    - method: {service: test.Echo, method: Unary}
    - method: {service: test.Echo, method: ServerStream}
    - method: {service: test.Echo, method: ClientStream}
    - method: {service: test.Echo, method: Bidi}
    - method: {service: test.Echo, method: Fail}
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-added, value: by-route}]}
    - type: ResponseHeaderModifier
      responseHeaderModifier: {add: [{name: x-served-by, value: edgeplane}]}
    backendRefs: [{name: streams, port: 80}]
"#;

#[tokio::test]
async fn unary_and_every_streaming_mode_pass_through_without_buffering() {
    let backend = start_grpc_backend("streams").await;
    let bind = free_addr();
    let _p = serve(bind, STREAMS, &[service("streams", backend.addr)]).await;
    let ch = channel(bind, "grpc.example.com").await;

    let r = tokio::time::timeout(CALL, unary(&ch, "/test.Echo/Unary", "hi", &[("x-a", "1")]))
        .await
        .expect("unary call finished")
        .expect("unary call succeeded");
    assert_eq!(
        r.metadata().get("x-served-by").map(|v| v.to_str().unwrap()),
        Some("edgeplane"),
        "response header modifier"
    );
    let m = r.into_inner();
    assert_eq!((m.text.as_str(), m.backend.as_str()), ("hi", "streams"));
    assert_eq!(m.headers.get("x-a").map(String::as_str), Some("1"));
    assert_eq!(
        m.headers.get("x-added").map(String::as_str),
        Some("by-route"),
        "request header modifier"
    );
    assert_eq!(
        m.headers.get("content-type").map(String::as_str),
        Some("application/grpc")
    );

    let texts = tokio::time::timeout(CALL, server_stream(&ch, 4))
        .await
        .expect("server stream finished")
        .expect("server stream succeeded");
    assert_eq!(texts, ["0", "1", "2", "3"]);

    let joined = tokio::time::timeout(CALL, client_stream(&ch, &["a", "b", "c"]))
        .await
        .expect("client stream finished")
        .expect("client stream succeeded");
    assert_eq!(joined.text, "a+b+c");

    // Each message waits for the reply to the previous one: a hop that held messages back
    // until the request ended would never see the second one.
    let replies = tokio::time::timeout(CALL, bidi_lockstep(&ch, &["x", "y", "z", "w"]))
        .await
        .expect("bidi exchange finished")
        .expect("bidi exchange succeeded");
    assert_eq!(replies, ["x", "y", "z", "w"]);
}

#[tokio::test]
async fn status_and_trailers_pass_through_and_unrouted_calls_are_unimplemented() {
    let backend = start_grpc_backend("streams").await;
    let bind = free_addr();
    let _p = serve(bind, STREAMS, &[service("streams", backend.addr)]).await;
    let ch = channel(bind, "grpc.example.com").await;

    let status = tokio::time::timeout(CALL, unary(&ch, "/test.Echo/Fail", "", &[]))
        .await
        .expect("call finished")
        .expect_err("the backend fails the call");
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert_eq!(status.message(), "refused on purpose");
    assert_eq!(
        status
            .metadata()
            .get("x-detail")
            .map(|v| v.to_str().unwrap()),
        Some("why-not"),
        "custom trailer"
    );

    // A method no rule matches, on a host with GRPCRoutes and on a host without any route:
    // the proxy answers UNIMPLEMENTED itself (the backend would say "not a test method").
    for host in ["grpc.example.com", "elsewhere.example.com"] {
        let ch = channel(bind, host).await;
        let status = tokio::time::timeout(CALL, unary(&ch, "/test.Echo/Other", "", &[]))
            .await
            .expect("call finished")
            .expect_err("no route");
        assert_eq!(status.code(), Code::Unimplemented, "{host}");
        assert_eq!(status.message(), "no route for this method", "{host}");
    }

    // A plain HTTP request to a gRPC method's path is no gRPC call: not routed, 404.
    let r = send(
        &h1_client(),
        get(bind, "grpc.example.com", "/test.Echo/Unary"),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 404);
}

const SPLIT: &str = r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: split}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches:
    - method: {service: test.Echo, method: Unary}
      headers: [{name: x-version, value: v2}]
    backendRefs: [{name: v2, port: 80}]
  - matches:
    - method: {service: test.Echo}
      headers: [{name: x-version, value: v3}]
    backendRefs: [{name: never, port: 80}]
  - matches:
    - method: {service: test.Echo, method: Unary}
    backendRefs:
    - {name: a, port: 80, weight: 1}
    - {name: b, port: 80, weight: 1}
    - {name: never, port: 80, weight: 0}
"#;

#[tokio::test]
async fn header_matches_and_weights_choose_backends() {
    let v2 = start_grpc_backend("v2").await;
    let a = start_grpc_backend("a").await;
    let b = start_grpc_backend("b").await;
    let never = start_grpc_backend("never").await;
    let bind = free_addr();
    let services = [
        service("v2", v2.addr),
        service("a", a.addr),
        service("b", b.addr),
        service("never", never.addr),
    ];
    let _p = serve(bind, SPLIT, &services).await;
    let ch = channel(bind, "any.example.com").await;

    // Same service and method: the rule with the header match wins.
    let r = tokio::time::timeout(
        CALL,
        unary(&ch, "/test.Echo/Unary", "", &[("x-version", "v2")]),
    )
    .await
    .expect("call finished")
    .expect("routed");
    assert_eq!(r.into_inner().backend, "v2");
    // Method characters come before header matches in the GRPCRoute precedence: the
    // service-only rule matching `x-version: v3` loses to the exact method without headers.
    let mut seen = BTreeSet::new();
    for i in 0..60 {
        let version = if i % 2 == 0 { "v3" } else { "v1" };
        let r = tokio::time::timeout(
            CALL,
            unary(&ch, "/test.Echo/Unary", "", &[("x-version", version)]),
        )
        .await
        .expect("call finished")
        .expect("routed");
        seen.insert(r.into_inner().backend);
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["a", "b"],
        "both weighted backends answer, the zero-weight one never"
    );
    // The service-only rule serves the other methods of the service when the header matches.
    let status = tokio::time::timeout(
        CALL,
        unary(&ch, "/test.Echo/Other", "", &[("x-version", "v3")]),
    )
    .await
    .expect("call finished")
    .expect_err("the backend does not implement Other");
    assert_eq!(
        (status.code(), status.message()),
        (Code::Unimplemented, "not a test method"),
        "answered by the backend, not the proxy"
    );
}

#[tokio::test]
async fn https_listeners_serve_grpc_over_alpn_h2() {
    let backend = start_grpc_backend("secure").await;
    let cert = self_signed(&["secure.example.com"]);
    let bind = free_addr();
    let secret = format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: cert}}\ntype: kubernetes.io/tls\nstringData: {{tls.crt: {}, tls.key: {}}}\n",
        serde_json::to_string(&cert.cert_pem).unwrap(),
        serde_json::to_string(&cert.key_pem).unwrap(),
    );
    let listener = format!(
        "{{name: https, port: {}, protocol: HTTPS, tls: {{certificateRefs: [{{name: cert}}]}}}}",
        bind.port()
    );
    let route = "---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: secure}
spec:
  parentRefs: [{name: gw}]
  hostnames: [secure.example.com]
  rules: [{backendRefs: [{name: secure, port: 80}]}]
";
    let services = [service("secure", backend.addr), secret];
    let _p = serve_listener(bind, &listener, route, &services).await;
    let ch = tls_channel(bind, "secure.example.com", &cert)
        .await
        .expect("TLS channel with ALPN h2");
    let r = tokio::time::timeout(CALL, unary(&ch, "/test.Echo/Unary", "over tls", &[]))
        .await
        .expect("call finished")
        .expect("routed over TLS");
    let m = r.into_inner();
    assert_eq!(
        (m.text.as_str(), m.backend.as_str()),
        ("over tls", "secure")
    );
    let streamed = tokio::time::timeout(CALL, bidi_lockstep(&ch, &["a", "b"]))
        .await
        .expect("bidi finished")
        .expect("bidi over TLS");
    assert_eq!(streamed, ["a", "b"]);
}

const MIRRORED: &str = r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: mirrored}
spec:
  parentRefs: [{name: gw}]
  rules:
  - filters:
    - type: RequestMirror
      requestMirror: {backendRef: {name: shadow, port: 80}}
    backendRefs: [{name: main, port: 80}]
"#;

#[tokio::test]
async fn request_mirror_copies_calls_over_h2c() {
    let main = start_grpc_backend("main").await;
    let (shadow, mut rec) = start_recorder("shadow").await;
    let bind = free_addr();
    let services = [service("main", main.addr), service("shadow", shadow.addr)];
    let _p = serve(bind, MIRRORED, &services).await;
    let ch = channel(bind, "m.example.com").await;
    let r = tokio::time::timeout(CALL, unary(&ch, "/test.Echo/Unary", "copied", &[]))
        .await
        .expect("call finished")
        .expect("the main backend answers");
    assert_eq!(r.into_inner().backend, "main");
    let copy = rec.next(CALL).await.expect("the mirror got a copy");
    assert_eq!(copy.path, "/test.Echo/Unary");
    assert_eq!(copy.headers["content-type"], "application/grpc");
    assert!(
        copy.headers.get("host").is_none(),
        "the copy went over HTTP/2 (:authority, no Host) though the Service names no appProtocol"
    );
    assert_eq!(copy.host, "m.example.com");
    let message = Msg::decode(copy.body.get(5..).unwrap_or_default()).expect("one gRPC frame");
    assert_eq!(message.text, "copied");
}
