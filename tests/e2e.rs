//! End to end through the real binary: `edgeplane serve --config-dir` on a temporary directory,
//! in-process echo backends, real sockets on a loopback address of the test's own.

#[path = "e2e/access_log.rs"]
mod access_log;
#[path = "e2e/admission.rs"]
mod admission;
#[path = "e2e/binds.rs"]
mod binds;
#[path = "e2e/concurrency.rs"]
mod concurrency;
#[path = "e2e/l4_idle.rs"]
mod l4_idle;
#[path = "e2e/limits.rs"]
mod limits;
#[path = "e2e/metrics.rs"]
mod metrics;
#[path = "e2e/policies.rs"]
mod policies;
#[path = "e2e/workers.rs"]
mod workers;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use edgeplane::devtools::echo::{serve_echo, EchoIdentity};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

/// A loopback /24 of the test's own: 127.A.B.0, chosen at random so tests never collide.
fn test_net() -> [u8; 3] {
    [127, fastrand::u8(1..=254), fastrand::u8(1..=254)]
}

fn ip(net: [u8; 3], host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(net[0], net[1], net[2], host))
}

/// Starts echo servers for `pods` on `net.<first..>:3000` and returns their addresses.
async fn echo_fleet(net: [u8; 3], first: u8, pods: &[&str]) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for (i, pod) in pods.iter().enumerate() {
        let addr = SocketAddr::new(ip(net, first + i as u8), 3000);
        let listener = TcpListener::bind(addr).await.expect("bind echo");
        let identity = EchoIdentity {
            pod: (*pod).to_owned(),
            namespace: "default".into(),
        };
        tokio::spawn(serve_echo(listener, identity));
        out.push(addr);
    }
    out
}

const BASE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: edge}
spec: {controllerName: edgeplane.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: edge
  listeners:
  - {name: http, port: 8080, protocol: HTTP}
"#;

/// A Service `name` on port 80 -> targetPort 3000 with an EndpointSlice of `endpoints`.
fn service(name: &str, endpoints: &[SocketAddr]) -> String {
    let addrs: Vec<String> = endpoints
        .iter()
        .map(|a| format!("\"{}\"", a.ip()))
        .collect();
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n\
         spec: {{ports: [{{name: http, port: 80, targetPort: 3000}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: {name}-1, labels: {{kubernetes.io/service-name: {name}}}}}\n\
         addressType: IPv4\nports: [{{name: http, port: 3000}}]\n\
         endpoints: [{{addresses: [{}], conditions: {{ready: true}}}}]\n",
        addrs.join(", ")
    )
}

/// A route `name` sending `path` (PathPrefix) to Service `backend`.
fn route(name: &str, path: &str, backend: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}}}\n\
         spec:\n  parentRefs: [{{name: gw}}]\n  rules:\n\
         \x20 - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]\n\
         \x20   backendRefs: [{{name: {backend}, port: 80}}]\n"
    )
}

/// Writes `text` atomically (temp file + rename), as a deployment tool would.
fn write(dir: &Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).expect("write manifest");
    std::fs::rename(&tmp, dir.join(file)).expect("rename manifest");
}

/// The `edgeplane serve` process of one test, killed when dropped.
struct Server {
    child: Child,
    proxy: SocketAddr,
    admin: SocketAddr,
    /// The dashboard server: `/debug/*`.
    dashboard: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn serve(dir: &Path, net: [u8; 3]) -> Server {
    serve_with(dir, net, &[], Stdio::inherit()).await
}

/// `serve` with extra flags, its log going to `stderr`.
async fn serve_with(dir: &Path, net: [u8; 3], extra: &[&str], stderr: Stdio) -> Server {
    serve_env(dir, net, extra, stderr, &[]).await
}

/// [`serve_with`] with extra environment variables.
async fn serve_env(
    dir: &Path,
    net: [u8; 3],
    extra: &[&str],
    stderr: Stdio,
    env: &[(&str, &str)],
) -> Server {
    let bind = ip(net, 1);
    let admin = SocketAddr::new(bind, 9901);
    let dashboard = SocketAddr::new(bind, 9902);
    let child = Command::new(env!("CARGO_BIN_EXE_edgeplane"))
        .args(["serve", "--config-dir"])
        .arg(dir)
        .args([
            "--bind-address",
            &bind.to_string(),
            "--admin-addr",
            &admin.to_string(),
            "--dashboard-addr",
            &dashboard.to_string(),
        ])
        .args(if extra.contains(&"--drain-timeout") {
            &[][..]
        } else {
            &["--drain-timeout", "10s"][..]
        })
        .args(extra)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start edgeplane");
    let server = Server {
        child,
        proxy: SocketAddr::new(bind, 8080),
        admin,
        dashboard,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok((200, _)) = admin_get(admin, "/readyz").await {
            return server;
        }
        assert!(Instant::now() < deadline, "edgeplane did not become ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> std::io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(conn);
        Ok(Self { sender })
    }

    async fn get(&mut self, path: &str) -> Result<(u16, String), hyper::Error> {
        self.get_for("example.com", path).await
    }

    async fn get_for(&mut self, host: &str, path: &str) -> Result<(u16, String), hyper::Error> {
        let req = hyper::Request::get(path)
            .header("host", host)
            .body(Full::new(Bytes::new()))
            .expect("valid request");
        self.sender.ready().await?;
        let resp = self.sender.send_request(req).await?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}

async fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut conn = Conn::open(addr).await?;
    conn.get(path).await.map_err(std::io::Error::other)
}

/// A request to the admin server, whose `Host` must name it (DNS rebinding guard).
async fn admin_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut conn = Conn::open(addr).await?;
    conn.get_for(&addr.to_string(), path)
        .await
        .map_err(std::io::Error::other)
}

fn pod(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    v["pod"].as_str().unwrap_or("").to_owned()
}

#[tokio::test]
async fn live_reconfiguration_loses_no_request() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a", "v1-b"]).await;
    let v2 = echo_fleet(net, 20, &["v2-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let services = format!("{}{}", service("v1", &v1), service("v2", &v2));
    write(dir.path(), "base.yaml", &format!("{BASE}{services}"));
    write(dir.path(), "routes.yaml", &route("old", "/old", "v1"));
    let server = serve(dir.path(), net).await;

    let mut conn = Conn::open(server.proxy).await.expect("connect");
    let (status, body) = conn.get("/old/x").await.expect("first request");
    assert_eq!(status, 200, "{body}");
    assert!(pod(&body).starts_with("v1-"), "{body}");

    // Keep sending on the same connection while the route set changes; every request must succeed
    // and the new route must come up within a bounded time.
    let mut new_served_after = None;
    let started = Instant::now();
    for i in 0..400 {
        if i == 20 {
            let both = format!(
                "{}{}",
                route("old", "/old", "v1"),
                route("new", "/new", "v2")
            );
            write(dir.path(), "routes.yaml", &both);
        }
        let (status, body) = conn
            .get("/old/x")
            .await
            .expect("request on the kept-alive connection");
        assert_eq!(status, 200, "request {i} failed: {body}");
        if i >= 20 && new_served_after.is_none() {
            let (s, b) = conn.get("/new/y").await.expect("request to the new route");
            if s == 200 {
                assert_eq!(pod(&b), "v2-a", "{b}");
                new_served_after = Some(started.elapsed());
            } else {
                assert_eq!(s, 404, "before the change lands the path is unmatched: {b}");
            }
        }
        if new_served_after.is_some() && i > 60 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(new_served_after.is_some(), "the new route was never served");
}

#[tokio::test]
async fn error_statuses_and_bad_files() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let routes = [
        route("ok", "/ok", "v1"),
        route("missing", "/missing", "nope"),
        route("empty", "/empty", "empty"),
    ]
    .concat();
    // A Service without endpoints: its slice lists none.
    let empty = "---\napiVersion: v1\nkind: Service\nmetadata: {name: empty}\n\
                 spec: {ports: [{name: http, port: 80, targetPort: 3000}]}\n";
    write(
        dir.path(),
        "all.yaml",
        &format!("{BASE}{}{empty}{routes}", service("v1", &v1)),
    );
    let server = serve(dir.path(), net).await;

    assert_eq!(get(server.proxy, "/ok").await.expect("ok").0, 200);
    assert_eq!(get(server.proxy, "/missing").await.expect("missing").0, 500);
    assert_eq!(get(server.proxy, "/empty").await.expect("empty").0, 503);
    assert_eq!(
        get(server.proxy, "/nothing").await.expect("unmatched").0,
        404
    );

    let (_, status_before) = admin_get(server.dashboard, "/debug/status")
        .await
        .expect("status");
    assert!(status_before.contains("BackendNotFound"), "{status_before}");

    // A broken file: reported, and the last good table keeps serving.
    write(
        dir.path(),
        "broken.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: [oops\n",
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        get(server.proxy, "/ok").await.expect("still serving").0,
        200
    );
    let (_, metrics) = admin_get(server.admin, "/metrics").await.expect("metrics");
    assert!(
        metrics.contains("edgeplane_config_errors_total"),
        "{metrics}"
    );
    let (_, status_after) = admin_get(server.dashboard, "/debug/status")
        .await
        .expect("status");
    assert_eq!(status_before, status_after);

    // Fixing the file is picked up.
    std::fs::remove_file(dir.path().join("broken.yaml")).expect("remove broken file");
    write(dir.path(), "fix.yaml", &route("fixed", "/fixed", "v1"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(server.proxy, "/fixed").await.expect("fixed").0 != 200 {
        assert!(Instant::now() < deadline, "fixed route never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn sigterm_finishes_in_flight_requests() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "all.yaml",
        &format!("{BASE}{}{}", service("v1", &v1), route("r", "/", "v1")),
    );
    let mut server = serve(dir.path(), net).await;

    // A request whose body is still arriving when SIGTERM lands.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(4);
    let body = StreamBody::new(tokio_stream_from(rx));
    let stream = TcpStream::connect(server.proxy).await.expect("connect");
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let req = hyper::Request::post("/upload")
        .header("host", "example.com")
        .body(body)
        .expect("valid request");
    let in_flight = tokio::spawn(async move { sender.send_request(req).await });
    tx.send(Ok(Frame::data(Bytes::from_static(b"first part "))))
        .await
        .expect("send");
    tokio::time::sleep(Duration::from_millis(200)).await;

    let pid = server.child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(killed.success());
    tokio::time::sleep(Duration::from_millis(300)).await;

    // New connections are refused once the listener is closed...
    assert!(
        TcpStream::connect(server.proxy).await.is_err(),
        "still accepting after SIGTERM"
    );
    // ...while the in-flight request completes.
    tx.send(Ok(Frame::data(Bytes::from_static(b"second part"))))
        .await
        .expect("send");
    drop(tx);
    let resp = in_flight
        .await
        .expect("join")
        .expect("in-flight request completes");
    assert_eq!(resp.status(), 200);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body).expect("echo json");
    assert_eq!(v["bodyLength"], 22, "{v}");

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "edgeplane did not exit after draining"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Adapts an mpsc receiver to a `Stream` for `StreamBody`.
fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
