//! The own kinds end to end through the real binary in standalone mode: a TrafficPolicy
//! written at v1beta1 and one written at the deprecated v1alpha1 (converted on read) reach the
//! proxy, their status is reported per ancestor, and an unusable ProxyConfig is reported on the
//! Gateway that references it while the rest keeps serving.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use super::{admin_get, echo_fleet, route, serve, service, test_net, write, BASE};

/// One request with extra headers on a new connection: status, `Retry-After`,
/// `WWW-Authenticate`.
async fn send(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, Option<String>, Option<String>) {
    let stream = TcpStream::connect(addr).await.expect("connect proxy");
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut req = hyper::Request::get(path).header("host", "example.com");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = sender
        .send_request(req.body(Full::new(Bytes::new())).expect("request"))
        .await
        .expect("response");
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (retry_after, challenge) = (header("retry-after"), header("www-authenticate"));
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    (status, retry_after, challenge)
}

/// The `/debug/status` entry of `kind` `name`.
async fn entry(admin: SocketAddr, kind: &str, name: &str) -> Option<Value> {
    let (_, body) = admin_get(admin, "/debug/status").await.ok()?;
    let all: Value = serde_json::from_str(&body).ok()?;
    all.as_array()?
        .iter()
        .find(|e| e["kind"] == kind && e["name"] == name)
        .cloned()
}

/// The first condition `type` of any ancestor of a policy entry, or of a Gateway entry.
fn condition(entry: &Value, type_: &str) -> Option<Value> {
    let ancestors = entry["status"]["ancestors"].as_array();
    let lists = ancestors
        .into_iter()
        .flatten()
        .map(|a| &a["conditions"])
        .chain(std::iter::once(&entry["status"]["conditions"]));
    lists
        .filter_map(Value::as_array)
        .flatten()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// Polls until `kind` `name` has condition `type_` with `reason`.
pub(super) async fn wait_reason(
    admin: SocketAddr,
    kind: &str,
    name: &str,
    type_: &str,
    reason: &str,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(e) = entry(admin, kind, name).await {
            if condition(&e, type_).is_some_and(|c| c["reason"] == reason) {
                return e;
            }
            assert!(Instant::now() < deadline, "{kind} {name}: {e:#}");
        }
        assert!(Instant::now() < deadline, "no status for {kind} {name}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const POLICIES: &str = r#"
---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {name: hourly}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: limited}]
  rateLimit: {requests: 3, unit: Hour}
---
apiVersion: edgeplane.dev/v1alpha1
kind: TrafficPolicy
metadata: {name: members}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: HTTPRoute, name: private}
  basicAuthSecret: members
  realm: team
---
apiVersion: v1
kind: Secret
metadata: {name: members}
stringData:
  .htpasswd: "alice:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n"
---
apiVersion: edgeplane.dev/v1beta1
kind: TrafficPolicy
metadata: {name: orphan}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: missing}]
  ipAccess: {deny: [0.0.0.0/0]}
"#;

#[tokio::test]
async fn policies_from_files_limit_and_authenticate_and_report_status() {
    let net = test_net();
    let app = echo_fleet(net, 10, &["app-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "base.yaml",
        &format!(
            "{BASE}{}{}{}{}{POLICIES}",
            service("app", &app),
            route("limited", "/limited", "app"),
            route("private", "/private", "app"),
            route("open", "/open", "app"),
        ),
    );
    let server = serve(dir.path(), net).await;
    // The status and table views are on the dashboard server.
    let admin = server.dashboard;
    wait_reason(admin, "TrafficPolicy", "hourly", "Accepted", "Accepted").await;
    wait_reason(admin, "TrafficPolicy", "members", "Accepted", "Accepted").await;
    wait_reason(
        admin,
        "TrafficPolicy",
        "orphan",
        "Accepted",
        "TargetNotFound",
    )
    .await;

    // Three requests an hour: the fourth is refused, with the wait until the next token.
    for i in 0..3 {
        let (status, _, _) = send(server.proxy, "/limited", &[]).await;
        assert_eq!(status, 200, "request {i} within the limit");
    }
    let (status, retry_after, _) = send(server.proxy, "/limited", &[]).await;
    assert_eq!(status, 429);
    let wait: u64 = retry_after.expect("Retry-After").parse().expect("seconds");
    assert!((1..=1200).contains(&wait), "Retry-After {wait}");
    // Other routes are not limited by it.
    for _ in 0..5 {
        assert_eq!(send(server.proxy, "/open", &[]).await.0, 200);
    }

    // Basic auth from the v1alpha1 policy: no or wrong credentials get 401 with the realm.
    let (status, _, challenge) = send(server.proxy, "/private", &[]).await;
    assert_eq!(status, 401);
    assert_eq!(challenge.as_deref(), Some("Basic realm=\"team\""));
    let wrong = [("authorization", "Basic YWxpY2U6d3Jvbmc=")]; // alice:wrong
    assert_eq!(send(server.proxy, "/private", &wrong).await.0, 401);
    let right = [("authorization", "Basic YWxpY2U6c2VjcmV0")]; // alice:secret
    assert_eq!(send(server.proxy, "/private", &right).await.0, 200);

    // A Gateway whose ProxyConfig does not exist is not accepted, and says which it misses;
    // pointed at an existing one, it serves again with that ProxyConfig's settings.
    write(
        dir.path(),
        "config.yaml",
        "apiVersion: edgeplane.dev/v1beta1\nkind: ProxyConfig\nmetadata: {name: tuned}\n\
         spec: {clientTimeouts: {idle: 10s}, trustedProxies: [10.0.0.0/8]}\n",
    );
    let with_ref = |name: &str| {
        let gateway = BASE.replace(
            "spec:\n  gatewayClassName: edge\n",
            &format!(
                "spec:\n  gatewayClassName: edge\n  infrastructure:\n    parametersRef: \
                 {{group: edgeplane.dev, kind: ProxyConfig, name: {name}}}\n"
            ),
        );
        assert_ne!(gateway, BASE, "the Gateway must get a parametersRef");
        format!(
            "{gateway}{}{}{}{}{POLICIES}",
            service("app", &app),
            route("limited", "/limited", "app"),
            route("private", "/private", "app"),
            route("open", "/open", "app"),
        )
    };
    write(dir.path(), "base.yaml", &with_ref("absent"));
    let gw = wait_reason(admin, "Gateway", "gw", "Accepted", "InvalidParameters").await;
    let message = condition(&gw, "Accepted").expect("Accepted")["message"].clone();
    assert!(
        message.as_str().unwrap_or("").contains("absent"),
        "{message}"
    );

    write(dir.path(), "base.yaml", &with_ref("tuned"));
    wait_reason(admin, "Gateway", "gw", "Programmed", "Programmed").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while send_ok(server.proxy, "/open").await != Some(200) {
        assert!(Instant::now() < deadline, "/open never served again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, config) = admin_get(admin, "/debug/config").await.expect("config");
    assert!(config.contains("\"default/tuned\""), "{config}");
}

/// The status of a plain request, `None` while the socket is not (yet) bound.
async fn send_ok(addr: SocketAddr, path: &str) -> Option<u16> {
    let stream = TcpStream::connect(addr).await.ok()?;
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await.ok()?;
    tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header("host", "example.com")
        .body(Full::new(Bytes::new()))
        .ok()?;
    let resp = sender.send_request(req).await.ok()?;
    Some(resp.status().as_u16())
}
