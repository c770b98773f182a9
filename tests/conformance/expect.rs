//! Request assertions with the upstream suite's semantics: a request check passes after 3
//! consecutive matching responses within a bounded time. Every wait is bounded. Status
//! assertions are in `status`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, Request};

use crate::harness::{socket_addr, Env};
use crate::support::client::{empty, h1_client, send, Reply, TestClient};
use crate::support::tls::{client_config, connect, Session};

/// Consecutive matching responses a request check needs (upstream: 3).
pub const CONSECUTIVE: usize = 3;
/// Time a request or status check gets to become true.
pub const CONSISTENCY_TIMEOUT: Duration = Duration::from_secs(15);
/// Pause between attempts that did not match.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// A scenario's result: `Err` carries what did not match.
pub type Outcome = Result<(), String>;

/// A request to send to a Gateway.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: Method,
    pub host: Option<String>,
    pub path: String,
    pub port: u16,
    pub headers: Vec<(String, String)>,
}

impl Req {
    /// `GET path` on port 80, `Host` the Gateway's address.
    pub fn get(path: &str) -> Self {
        Self {
            method: Method::GET,
            host: None,
            path: path.to_owned(),
            port: 80,
            headers: vec![],
        }
    }

    pub fn host(mut self, host: &str) -> Self {
        self.host = Some(host.to_owned());
        self
    }

    pub fn method(mut self, method: &str) -> Self {
        self.method = Method::from_bytes(method.as_bytes()).expect("valid method");
        self
    }

    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The HTTP/1.1 request to Gateway address `ip`, sent to the local port the listener port
    /// is mapped to; `Host` names the listener port, as a client of the Gateway would.
    pub fn build(&self, ip: IpAddr) -> Request<crate::support::client::TestBody> {
        let authority = if self.port == 80 {
            ip.to_string()
        } else {
            format!("{ip}:{}", self.port)
        };
        let mut b = Request::builder()
            .method(self.method.clone())
            .uri(format!(
                "http://{}{}",
                socket_addr(ip, self.port),
                self.path
            ))
            .header(
                http::header::HOST,
                self.host.as_deref().unwrap_or(&authority),
            );
        for (n, v) in &self.headers {
            b = b.header(n.as_str(), v.as_str());
        }
        b.body(empty()).expect("valid request")
    }
}

/// What a response must look like.
#[derive(Debug, Clone, Default)]
pub struct Want {
    pub status: u16,
    /// Service whose pod must answer (the echoed `pod` starts with it).
    pub backend: Option<String>,
    pub namespace: Option<String>,
    /// Echoed path; for a backend answer it defaults to the request path.
    pub path: Option<String>,
    pub host: Option<String>,
    /// Protocol the backend saw (`HTTP/1.1`, `HTTP/2.0`).
    pub proto: Option<String>,
    pub headers: Vec<(String, String)>,
    pub absent: Vec<String>,
    pub resp_headers: Vec<(String, String)>,
    pub resp_absent: Vec<String>,
    pub location: Option<String>,
    /// The SNI a TLS backend saw (`tls.serverName` of its answer).
    pub sni: Option<String>,
    /// The client certificate (PEM) a TLS backend saw first.
    pub client_cert: Option<String>,
}

impl Want {
    /// 200 from a pod of Service `backend` (namespace from the base's naming).
    pub fn ok(backend: &str) -> Self {
        let namespace = if backend.starts_with("app-") {
            crate::APP
        } else if backend.starts_with("web-") {
            crate::WEB
        } else {
            crate::INFRA
        };
        Self {
            status: 200,
            backend: Some(backend.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..Self::default()
        }
    }

    /// Just a status code, no backend.
    pub fn status(status: u16) -> Self {
        Self {
            status,
            ..Self::default()
        }
    }

    /// A redirect with its full `Location`.
    pub fn redirect(status: u16, location: &str) -> Self {
        Self {
            status,
            location: Some(location.to_owned()),
            ..Self::default()
        }
    }

    pub fn path(mut self, path: &str) -> Self {
        self.path = Some(path.to_owned());
        self
    }

    pub fn host(mut self, host: &str) -> Self {
        self.host = Some(host.to_owned());
        self
    }

    /// The TLS backend saw SNI `sni`.
    pub fn sni(mut self, sni: &str) -> Self {
        self.sni = Some(sni.to_owned());
        self
    }

    /// The TLS backend saw the client certificate `pem`.
    pub fn client_cert(mut self, pem: &str) -> Self {
        self.client_cert = Some(pem.to_owned());
        self
    }

    pub fn proto(mut self, proto: &str) -> Self {
        self.proto = Some(proto.to_owned());
        self
    }

    /// The backend received header `name` with exactly `value` (comma-joined when repeated).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The backend did not receive header `name`.
    pub fn absent(mut self, name: &str) -> Self {
        self.absent.push(name.to_owned());
        self
    }

    pub fn resp_header(mut self, name: &str, value: &str) -> Self {
        self.resp_headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn resp_absent(mut self, name: &str) -> Self {
        self.resp_absent.push(name.to_owned());
        self
    }

    /// Compares a reply with this expectation; `Err` says what differs.
    pub fn matches(&self, req: &Req, r: &Reply) -> Outcome {
        let body = || {
            String::from_utf8_lossy(&r.body)
                .chars()
                .take(400)
                .collect::<String>()
        };
        if r.status.as_u16() != self.status {
            return Err(format!(
                "status {} (want {}): {}",
                r.status.as_u16(),
                self.status,
                body()
            ));
        }
        if let Some(backend) = &self.backend {
            let pod = r.pod().unwrap_or_default();
            if !pod.starts_with(&format!("{backend}-")) {
                return Err(format!(
                    "answered by pod {pod:?}, want {backend}: {}",
                    body()
                ));
            }
            let path = self.path.as_deref().unwrap_or(&req.path);
            if r.field("path").as_deref() != Some(path) {
                return Err(format!("echoed path {:?}, want {path:?}", r.field("path")));
            }
        } else if let Some(path) = &self.path {
            if r.field("path").as_deref() != Some(path.as_str()) {
                return Err(format!("echoed path {:?}, want {path:?}", r.field("path")));
            }
        }
        if let Some(ns) = &self.namespace {
            if r.field("namespace").as_deref() != Some(ns.as_str()) {
                return Err(format!("namespace {:?}, want {ns}", r.field("namespace")));
            }
        }
        if let Some(host) = &self.host {
            if r.field("host").as_deref() != Some(host.as_str()) {
                return Err(format!("echoed host {:?}, want {host}", r.field("host")));
            }
        }
        if let Some(sni) = &self.sni {
            let got = &r.json()["tls"]["serverName"];
            if got != sni.as_str() {
                return Err(format!("backend saw SNI {got}, want {sni:?}"));
            }
        }
        if let Some(pem) = &self.client_cert {
            let got = &r.json()["tls"]["peerCertificates"][0];
            if got != pem.as_str() {
                return Err(format!(
                    "backend saw client certificate {got}, want {pem:?}"
                ));
            }
        }
        if let Some(proto) = &self.proto {
            if r.field("proto").as_deref() != Some(proto.as_str()) {
                return Err(format!("backend saw {:?}, want {proto}", r.field("proto")));
            }
        }
        for (n, v) in &self.headers {
            let got = r.echoed_header(n).join(",");
            if got != *v {
                return Err(format!("backend saw {n}: {got:?}, want {v:?}"));
            }
        }
        for n in &self.absent {
            let got = r.echoed_header(n);
            if !got.is_empty() {
                return Err(format!("backend saw {n}: {got:?}, want it absent"));
            }
        }
        for (n, v) in &self.resp_headers {
            let got: Vec<_> = r
                .headers
                .get_all(n.as_str())
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect();
            if got.join(",") != *v {
                return Err(format!("response {n}: {got:?}, want {v:?}"));
            }
        }
        for n in &self.resp_absent {
            if let Some(v) = r.header(n) {
                return Err(format!("response has {n}: {v:?}, want it absent"));
            }
        }
        if let Some(loc) = &self.location {
            if r.header("location").as_deref() != Some(loc.as_str()) {
                return Err(format!("location {:?}, want {loc:?}", r.header("location")));
            }
        }
        Ok(())
    }
}

/// Sends `req` to `ip` until [`CONSECUTIVE`] replies in a row match `want`, within
/// [`CONSISTENCY_TIMEOUT`].
pub async fn check(ip: IpAddr, req: &Req, want: &Want) -> Outcome {
    let client = h1_client();
    let deadline = Instant::now() + CONSISTENCY_TIMEOUT;
    let mut streak = 0;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let last = match send(&client, req.build(ip)).await {
            Ok(reply) => want.matches(req, &reply),
            Err(e) => Err(format!("request failed: {e}")),
        };
        match last {
            Ok(()) => {
                streak += 1;
                if streak == CONSECUTIVE {
                    return Ok(());
                }
                continue;
            }
            Err(e) if Instant::now() > deadline => {
                return Err(format!(
                    "{} {}{} (host {:?}): {e} (after {attempts} attempts)",
                    req.method,
                    ip,
                    req.path,
                    req.host.as_deref().unwrap_or("-")
                ));
            }
            Err(_) => streak = 0,
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// [`check`] over TLS: each attempt opens a connection to `ip` on the request's (mapped) port with
/// `sni`, trusting only the scenario's certificate, and speaks HTTP/2 when `h2` (through ALPN),
/// else HTTP/1.1.
pub async fn check_tls(
    env: &Env,
    ip: IpAddr,
    sni: &str,
    h2: bool,
    req: &Req,
    want: &Want,
) -> Outcome {
    let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
    check_tls_config(ip, sni, client_config(&[&env.cert], alpn), req, want).await
}

/// [`check_tls`] with a client configuration of the caller's (a client certificate).
pub async fn check_tls_config(
    ip: IpAddr,
    sni: &str,
    config: Arc<rustls::ClientConfig>,
    req: &Req,
    want: &Want,
) -> Outcome {
    let addr = socket_addr(ip, req.port);
    let host = req.host.clone().unwrap_or_else(|| ip.to_string());
    let deadline = Instant::now() + CONSISTENCY_TIMEOUT;
    let mut streak = 0;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let reply = async {
            let stream = connect(addr, sni, config.clone()).await?;
            Session::start(stream).await?.get(&host, &req.path).await
        }
        .await;
        let last = match reply {
            Ok(reply) => want.matches(req, &reply),
            Err(e) => Err(format!("request failed: {e}")),
        };
        match last {
            Ok(()) => {
                streak += 1;
                if streak == CONSECUTIVE {
                    return Ok(());
                }
                continue;
            }
            Err(e) if Instant::now() > deadline => {
                return Err(format!(
                    "https {addr}{} (SNI {sni}, host {host}): {e} (after {attempts} attempts)",
                    req.path
                ));
            }
            Err(_) => streak = 0,
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// [`check`] for each pair in turn.
pub async fn check_all(ip: IpAddr, cases: &[(Req, Want)]) -> Outcome {
    for (req, want) in cases {
        check(ip, req, want).await?;
    }
    Ok(())
}

/// Sends `n` requests (`concurrency` at a time) and counts the answering pods by Service
/// (the pod name without its `-<n>` suffix); failures count under `status <code>`.
pub async fn distribution(ip: IpAddr, req: &Req, n: usize) -> BTreeMap<String, usize> {
    let client = h1_client();
    let mut counts = BTreeMap::new();
    let concurrency = 10;
    let mut sent = 0;
    while sent < n {
        let batch = concurrency.min(n - sent);
        let futs = (0..batch).map(|_| one(&client, req.build(ip)));
        for key in futures_util::future::join_all(futs).await {
            *counts.entry(key).or_insert(0) += 1;
        }
        sent += batch;
    }
    counts
}

async fn one(client: &TestClient, req: Request<crate::support::client::TestBody>) -> String {
    match send(client, req).await {
        Ok(r) if r.status == 200 => {
            let pod = r.pod().unwrap_or_default();
            match pod.rsplit_once('-') {
                Some((svc, _)) => svc.to_owned(),
                None => pod,
            }
        }
        Ok(r) => format!("status {}", r.status.as_u16()),
        Err(e) => format!("error {e}"),
    }
}

/// A GET on the admin server.
pub async fn admin_get(admin: SocketAddr, path: &str) -> Result<Reply, String> {
    let req = Request::get(format!("http://{admin}{path}"))
        .body(empty())
        .expect("valid request");
    send(&h1_client(), req).await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, StatusCode, Version};

    fn reply(status: u16, body: serde_json::Value, headers: &[(&str, &str)]) -> Reply {
        let mut map = HeaderMap::new();
        for (n, v) in headers {
            map.append(
                http::HeaderName::from_bytes(n.as_bytes()).expect("name"),
                v.parse().expect("value"),
            );
        }
        Reply {
            status: StatusCode::from_u16(status).expect("status"),
            version: Version::HTTP_11,
            headers: map,
            body: body.to_string().into(),
        }
    }

    fn echo(pod: &str, path: &str) -> serde_json::Value {
        serde_json::json!({
            "pod": pod, "path": path, "host": "h.test", "proto": "HTTP/1.1",
            "namespace": "gateway-conformance-infra",
            "headers": {"X-Stage": ["a", "b"]},
        })
    }

    /// Every field of an expectation can reject a reply.
    #[test]
    fn expectations_reject_what_differs() {
        let req = Req::get("/p");
        let good = reply(200, echo("infra-backend-v1-0", "/p"), &[("x-r", "1")]);
        let want = Want::ok("infra-backend-v1")
            .host("h.test")
            .proto("HTTP/1.1")
            .header("X-Stage", "a,b")
            .absent("X-Other")
            .resp_header("x-r", "1")
            .resp_absent("x-none");
        assert_eq!(want.matches(&req, &good), Ok(()));
        let rejects = [
            Want::ok("infra-backend-v2"),
            Want::ok("infra-backend-v1").path("/q"),
            Want::ok("infra-backend-v1").host("other.test"),
            Want::ok("infra-backend-v1").proto("HTTP/2.0"),
            Want::ok("infra-backend-v1").header("X-Stage", "a"),
            Want::ok("infra-backend-v1").absent("X-Stage"),
            Want::ok("infra-backend-v1").resp_header("x-r", "2"),
            Want::ok("infra-backend-v1").resp_absent("x-r"),
            Want::ok("app-backend-v1"),
            Want::status(404),
            Want::redirect(200, "http://x/"),
        ];
        for w in rejects {
            assert!(w.matches(&req, &good).is_err(), "{w:?} accepted {good:?}");
        }
        // A pod whose name merely starts with the Service name plus more is not that Service.
        let v10 = reply(200, echo("infra-backend-v10-0", "/p"), &[]);
        assert!(Want::ok("infra-backend-v1").matches(&req, &v10).is_err());
        let redirect = reply(
            302,
            serde_json::Value::Null,
            &[("location", "http://a.test/x")],
        );
        assert_eq!(
            Want::redirect(302, "http://a.test/x").matches(&req, &redirect),
            Ok(())
        );
        assert!(Want::redirect(302, "http://a.test/y")
            .matches(&req, &redirect)
            .is_err());
    }
}
