//! The conversion webhook of the `edgeplane serve --kubernetes` binary under hostile clients:
//! a silent TCP connection and an idle keep-alive connection are closed by the server, an
//! oversized review is refused with 413 before it is read, reviews beyond the concurrency
//! limit get 429, and connections beyond the cap are closed at once while the admin server,
//! under a low file-descriptor limit, keeps answering. Each limit is counted in
//! `edgeplane_webhook_limited_total`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::harness::*;
use crate::support;
use crate::support::apiserver::ApiServer;
use crate::T;

const HOST: &str = "edgeplane-webhook.edgeplane-system.svc";
const SECRET: &str = "edgeplane-webhook-cert";

/// The binary, its admin and webhook addresses, and the CA its webhook certificate chains to.
struct Binary {
    child: tokio::process::Child,
    admin: SocketAddr,
    webhook: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    roots: rustls::RootCertStore,
    _api: ApiServer,
    _dir: tempfile::TempDir,
}

/// Starts `sh -c 'ulimit -n {fds}; exec edgeplane serve --kubernetes … {extra}'` and waits
/// until its webhook completes a TLS handshake with the certificate the leader issued.
async fn start(extra: &[&str], fds: u32) -> Binary {
    let api = ApiServer::start().await;
    seed(&api, &["gw"], &[]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let admin = support::net::free_addr();
    let webhook = support::net::free_addr();
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {fds} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_edgeplane"))
        .args(["serve", "--kubernetes", "--pod-name", "bin"])
        .args(["--admin-addr", &admin.to_string()])
        .args(["--dashboard-addr", "127.0.0.1:0"])
        .args(["--webhook-addr", &webhook.to_string()])
        .args(["--bind-address", &support::net::loopback_ip().to_string()])
        .args(["--gateway-port-base", &port_base().to_string()])
        .args(["--drain-timeout", "1s"])
        .args(extra)
        .env("POD_NAMESPACE", SYSTEM_NS)
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "edgeplane=warn")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let issued = api
        .wait_until(T, |a| {
            a.object("secrets", SYSTEM_NS, SECRET)
                .is_some_and(|s| s["data"]["ca.crt"].is_string())
        })
        .await;
    assert!(issued, "no webhook certificate issued");
    let secret = api.object("secrets", SYSTEM_NS, SECRET).unwrap();
    let ca: k8s_openapi::ByteString =
        serde_json::from_value(secret["data"]["ca.crt"].clone()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&ca.0) {
        roots.add(c.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots.clone())
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let b = Binary {
        child,
        admin,
        webhook,
        tls: Arc::new(config),
        roots,
        _api: api,
        _dir: dir,
    };
    let deadline = Instant::now() + T;
    while b.connect(b"http/1.1").await.is_err() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    b.connect(b"http/1.1")
        .await
        .expect("webhook serves its certificate");
    b
}

impl Binary {
    /// A TLS connection to the webhook offering only `alpn`.
    async fn connect(&self, alpn: &[u8]) -> Result<TlsStream<TcpStream>, String> {
        let mut config = (*self.tls).clone();
        config.alpn_protocols = vec![alpn.to_vec()];
        self.connect_with(config).await
    }

    /// A TLS connection to the webhook with `config`.
    async fn connect_with(
        &self,
        config: rustls::ClientConfig,
    ) -> Result<TlsStream<TcpStream>, String> {
        let tcp = TcpStream::connect(self.webhook)
            .await
            .map_err(|e| e.to_string())?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        tokio::time::timeout(
            T,
            connector.connect(ServerName::try_from(HOST).unwrap(), tcp),
        )
        .await
        .map_err(|_| "handshake timed out".to_owned())?
        .map_err(|e| e.to_string())
    }

    /// An admin GET: status, or `None` when it does not answer.
    async fn admin(&self, path: &str) -> Option<(u16, String)> {
        let client = support::client::h1_client();
        let r = support::client::send(
            &client,
            support::client::get(self.admin, &self.admin.to_string(), path),
        )
        .await
        .ok()?;
        Some((
            r.status.as_u16(),
            String::from_utf8_lossy(&r.body).into_owned(),
        ))
    }

    /// `edgeplane_webhook_limited_total{reason}` (0 while it has no series).
    async fn limited(&self, reason: &str) -> u64 {
        let page = self
            .admin("/metrics")
            .await
            .map(|r| r.1)
            .unwrap_or_default();
        let series = format!("edgeplane_webhook_limited_total{{reason=\"{reason}\"}} ");
        page.lines()
            .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
            .unwrap_or(0)
    }

    async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(T, self.child.wait()).await;
    }
}

fn review() -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview", "request": {"uid": "u-1",
        "desiredAPIVersion": "edgeplane.dev/v1beta1", "objects": []}}))
    .unwrap()
}

/// A complete `POST /convert` of `body` over HTTP/1.1, keep-alive.
fn post(body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST /convert HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// Reads one HTTP/1.1 response (head and `Content-Length` body); its status.
async fn read_response<S: AsyncReadExt + Unpin>(s: &mut S) -> Option<u16> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let fut = async {
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while buf.len() < end + 4 + len {
                    let n = s.read(&mut chunk).await.ok()?;
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                return head.get(9..12)?.parse().ok();
            }
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(T, fut).await.ok().flatten()
}

/// Whether the server closes `s` (end of stream or reset) within [`T`] while the client
/// sends nothing.
async fn closed_by_server<S: AsyncReadExt + Unpin>(s: &mut S) -> bool {
    let mut chunk = [0u8; 1024];
    let fut = async {
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(T, fut).await.is_ok()
}

/// Silent connections (no ClientHello), idle keep-alive connections over HTTP/1.1 and HTTP/2
/// are closed by the server on its timers; oversized reviews get 413 without being read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_webhook_closes_silent_and_idle_connections_and_refuses_big_reviews() {
    let b = start(
        &[
            "--webhook-handshake-timeout=500ms",
            "--webhook-idle-timeout=1s",
        ],
        1024,
    )
    .await;

    // No ClientHello at all: closed after the handshake timeout.
    let mut silent = TcpStream::connect(b.webhook).await.unwrap();
    assert!(
        closed_by_server(&mut silent).await,
        "silent connection kept"
    );
    // TLS done, but no request: the protocol-detection phase has the same deadline.
    let mut mute = b.connect(b"http/1.1").await.unwrap();
    assert!(
        closed_by_server(&mut mute).await,
        "mute TLS connection kept"
    );
    assert!(b.limited("handshake_timeout").await >= 2);

    // One review answered, then the keep-alive connection left idle: closed.
    let mut tls = b.connect(b"http/1.1").await.unwrap();
    tls.write_all(&post(&review())).await.unwrap();
    assert_eq!(read_response(&mut tls).await, Some(200));
    assert!(closed_by_server(&mut tls).await, "idle HTTP/1.1 kept");
    // HTTP/2 likewise (GOAWAY, then the connection ends).
    let h2 = b.connect(b"h2").await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(h2))
            .await
            .unwrap();
    let conn = tokio::spawn(conn);
    let req = hyper::Request::post(format!("https://{HOST}/convert"))
        .body(Full::new(Bytes::from(review())))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let _ = resp.into_body().collect().await;
    assert!(
        tokio::time::timeout(T, conn).await.is_ok(),
        "idle HTTP/2 kept"
    );
    assert!(b.limited("idle_timeout").await >= 2);

    // A declared length over 3 MiB: 413 at once, nothing of the body sent.
    let mut tls = b.connect(b"http/1.1").await.unwrap();
    let head = format!(
        "POST /convert HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {}\r\n\r\n",
        20 << 20
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    assert_eq!(read_response(&mut tls).await, Some(413));
    // A chunk announced as 20 MiB: refused once 3 MiB + 1 byte of it have arrived, while
    // the client has still 17 MiB to send.
    let mut tls = b.connect(b"http/1.1").await.unwrap();
    let head = format!(
        "POST /convert HTTP/1.1\r\nHost: {HOST}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        20 << 20
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&vec![b'0'; (3 << 20) + 1]).await.unwrap();
    assert_eq!(read_response(&mut tls).await, Some(413));
    assert!(b.limited("body_size").await >= 2);
    assert_eq!(b.admin("/healthz").await.map(|r| r.0), Some(200));
    b.stop().await;
}

/// One review holding the only review permit: another gets 429 until it is done. Connections
/// beyond `--webhook-max-connections` are closed at once, and under `ulimit -n 128` a flood of
/// 200 webhook connections leaves the admin server answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_webhook_bounds_reviews_and_connections() {
    let b = start(
        &[
            "--webhook-max-reviews=1",
            "--webhook-max-connections=3",
            // Only the cap closes the flood below, not a timer.
            "--webhook-handshake-timeout=1h",
        ],
        128,
    )
    .await;
    // A review whose body is still on its way holds the permit.
    let body = review();
    let request = post(&body);
    let (head, rest) = request.split_at(request.len() - 10);
    let mut slow = b.connect(b"http/1.1").await.unwrap();
    slow.write_all(head).await.unwrap();
    let mut other = b.connect(b"http/1.1").await.unwrap();
    let mut refused = None;
    for _ in 0..20 {
        other.write_all(&post(&review())).await.unwrap();
        refused = read_response(&mut other).await;
        if refused == Some(429) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(refused, Some(429), "a second review was converted");
    assert!(b.limited("busy").await >= 1);
    slow.write_all(rest).await.unwrap();
    assert_eq!(read_response(&mut slow).await, Some(200));
    other.write_all(&post(&review())).await.unwrap();
    assert_eq!(read_response(&mut other).await, Some(200));

    // Two connections open (`slow`, `other`); one more fits, the rest are closed at once.
    let third = TcpStream::connect(b.webhook).await.unwrap();
    let mut flood = Vec::new();
    for _ in 0..200 {
        if let Ok(s) = TcpStream::connect(b.webhook).await {
            flood.push(s);
        }
    }
    assert!(!flood.is_empty());
    for s in &mut flood {
        assert!(closed_by_server(s).await, "a connection over the cap kept");
    }
    assert!(b.limited("connections").await >= flood.len() as u64);
    assert_eq!(b.admin("/healthz").await.map(|r| r.0), Some(200));
    // The ones within the cap still work.
    other.write_all(&post(&review())).await.unwrap();
    assert_eq!(read_response(&mut other).await, Some(200));
    drop(third);
    b.stop().await;
}

/// With `--webhook-client-ca`, a review without a client certificate is not answered; one
/// with a certificate from that CA is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_webhook_requires_a_client_certificate_from_its_client_ca() {
    let ca = support::tls::TestCa::new("api-server-clients");
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("client-ca.pem");
    std::fs::write(&bundle, &ca.cert_pem).unwrap();
    let flag = format!("--webhook-client-ca={}", bundle.display());
    // `start` waits for a TLS handshake, which TLS 1.3 completes before the server has
    // checked the client's certificate.
    let b = start(&[flag.as_str()], 1024).await;
    let mut anonymous = b.connect(b"http/1.1").await.unwrap();
    let _ = anonymous.write_all(&post(&review())).await;
    assert_eq!(
        read_response(&mut anonymous).await,
        None,
        "answered without a certificate"
    );
    let identity = ca.issue("kube-apiserver");
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(b.roots.clone())
    .with_client_auth_cert(identity.chain, identity.key)
    .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut known = b.connect_with(config).await.unwrap();
    known.write_all(&post(&review())).await.unwrap();
    assert_eq!(read_response(&mut known).await, Some(200));
    b.stop().await;
}

/// `VmRSS` and `VmHWM` (peak) of a process, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A review of one v1beta1 object whose spec holds a list of zeros, `size` bytes in all.
fn zeros_review(size: usize) -> Vec<u8> {
    let head = br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"edgeplane.dev/v1alpha1","objects":[{"apiVersion":"edgeplane.dev/v1beta1","kind":"ProxyConfig","metadata":{"name":"p"},"spec":{"zeros":[0"#;
    let tail = b"]}}]}}";
    let mut body = head.to_vec();
    while body.len() + 2 + tail.len() <= size {
        body.extend_from_slice(b",0");
    }
    body.extend_from_slice(tail);
    body
}

/// The memory figure of `benches/webhook-memory.sh` (not a test: nothing is asserted on it):
/// the binary's resident memory before and after a review of zeros at the value limit, four
/// of them at once, then a 3 MiB review of zeros (refused: too many values) and a 15 MiB one
/// (refused: too large).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by benches/webhook-memory.sh"]
async fn webhook_memory_figure() {
    let b = start(&[], 1024).await;
    let pid = b.child.id().expect("running");
    let before = memory_kib(pid);
    let send = |body: Vec<u8>| {
        let b = &b;
        async move {
            let mut tls = b.connect(b"http/1.1").await.unwrap();
            tls.write_all(&post(&body)).await.ok()?;
            read_response(&mut tls).await
        }
    };
    // The most values a review may hold: the worst case that is converted.
    let most = zeros_review(2 * (edgeplane::kinds::crd::review::MAX_VALUES - 100));
    let status = send(most.clone()).await;
    let one = memory_kib(pid);
    let all = futures_util::future::join_all((0..4).map(|_| send(most.clone()))).await;
    let four = memory_kib(pid);
    let big = send(zeros_review((3 << 20) - 1024)).await;
    let refused = send(zeros_review(15 << 20)).await;
    let after = memory_kib(pid);
    println!(
        "webhook memory (KiB, rss/peak): before {}/{}; one review of {} bytes at the value \
         limit ({status:?}) {}/{}; four at once ({all:?}) {}/{}; then a 3 MiB review of \
         zeros ({big:?}) and a 15 MiB one ({refused:?}) {}/{}",
        before.0,
        before.1,
        most.len(),
        one.0,
        one.1,
        four.0,
        four.1,
        after.0,
        after.1
    );
    b.stop().await;
}
