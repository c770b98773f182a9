//! Assertions with the upstream suite's semantics: a request check passes after 3 consecutive
//! matching responses within a bounded time; status checks poll `/debug/status` until the
//! expected conditions hold or time runs out. Every wait is bounded.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use edgeplane::status::StatusReport;
use http::{Method, Request};
use serde_json::Value;

use crate::harness::Env;
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

    /// The HTTP/1.1 request to Gateway address `ip`.
    pub fn build(&self, ip: IpAddr) -> Request<crate::support::client::TestBody> {
        let authority = if self.port == 80 {
            ip.to_string()
        } else {
            format!("{ip}:{}", self.port)
        };
        let mut b = Request::builder()
            .method(self.method.clone())
            .uri(format!("http://{ip}:{}{}", self.port, self.path))
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

/// [`check`] over TLS: each attempt opens a connection to `ip` on the request's port with
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
    let config = client_config(&[&env.cert], alpn);
    let addr = SocketAddr::new(ip, req.port);
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

/// The translator's status of every object, from `/debug/status`.
pub async fn status(env: &Env) -> Result<StatusReport, String> {
    let r = admin_get(env.admin, "/debug/status").await?;
    serde_json::from_slice(&r.body).map_err(|e| format!("/debug/status: {e}"))
}

/// Polls `/debug/status` until `f` accepts it, within [`CONSISTENCY_TIMEOUT`].
pub async fn wait_status<F>(env: &Env, what: &str, f: F) -> Outcome
where
    F: Fn(&Report) -> Outcome,
{
    let deadline = Instant::now() + CONSISTENCY_TIMEOUT;
    loop {
        let last = match status(env).await {
            Ok(s) => f(&Report(s)),
            Err(e) => Err(e),
        };
        match last {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(format!("{what}: {e}")),
            Err(_) => tokio::time::sleep(RETRY_PAUSE).await,
        }
    }
}

/// A status report with lookups that explain what is missing.
pub struct Report(pub StatusReport);

impl Report {
    fn object(&self, kind: &str, ns: Option<&str>, name: &str) -> Result<&Value, String> {
        self.0
            .get(kind, ns, name)
            .and_then(|o| o.status.as_json())
            .ok_or_else(|| format!("no status for {kind} {}/{name}", ns.unwrap_or("")))
    }

    pub fn class(&self, name: &str) -> Result<&Value, String> {
        self.object("GatewayClass", None, name)
    }

    pub fn gateway(&self, ns: &str, name: &str) -> Result<&Value, String> {
        self.object("Gateway", Some(ns), name)
    }

    pub fn route(&self, ns: &str, name: &str) -> Result<&Value, String> {
        self.object("HTTPRoute", Some(ns), name)
    }

    /// The route's `parents[]` entry for Gateway `gw` (and `section`, when given).
    pub fn parent(
        &self,
        ns: &str,
        route: &str,
        gw: &str,
        section: Option<&str>,
    ) -> Result<&Value, String> {
        let status = self.route(ns, route)?;
        status["parents"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| {
                p["parentRef"]["name"] == gw
                    && section.is_none_or(|s| p["parentRef"]["sectionName"] == s)
            })
            .ok_or_else(|| {
                format!("HTTPRoute {ns}/{route} has no parent {gw} {section:?}: {status}")
            })
    }

    /// Listener `name` of a Gateway's status.
    pub fn listener(&self, ns: &str, gw: &str, name: &str) -> Result<&Value, String> {
        let status = self.gateway(ns, gw)?;
        status["listeners"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|l| l["name"] == name)
            .ok_or_else(|| format!("Gateway {ns}/{gw} has no listener {name}: {status}"))
    }
}

/// Condition `kind` in `holder["conditions"]` has `status` and (unless empty) `reason`.
pub fn cond(holder: &Value, kind: &str, status: &str, reason: &str) -> Outcome {
    let c = holder["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind)
        .ok_or_else(|| format!("no {kind} condition in {}", holder["conditions"]))?;
    if c["status"] != status || (!reason.is_empty() && c["reason"] != reason) {
        return Err(format!(
            "{kind} is {}/{}, want {status}/{reason}: {}",
            c["status"], c["reason"], c["message"]
        ));
    }
    Ok(())
}

/// Every condition in `holder` has `observedGeneration` = `generation`.
pub fn observed(holder: &Value, generation: i64) -> Outcome {
    for c in holder["conditions"].as_array().into_iter().flatten() {
        if c["observedGeneration"] != generation {
            return Err(format!(
                "{} observedGeneration {}, want {generation}",
                c["type"], c["observedGeneration"]
            ));
        }
    }
    Ok(())
}

/// Gateway accepted and programmed, every listener accepted, programmed and resolved.
pub fn gateway_ready(r: &Report, ns: &str, name: &str) -> Outcome {
    let g = r.gateway(ns, name)?;
    cond(g, "Accepted", "True", "")?;
    cond(g, "Programmed", "True", "")?;
    for l in g["listeners"].as_array().into_iter().flatten() {
        cond(l, "Accepted", "True", "")?;
        cond(l, "Programmed", "True", "")?;
        cond(l, "ResolvedRefs", "True", "")?;
    }
    Ok(())
}

/// Route accepted with resolved refs by each of `gateways` (in `gateway-conformance-infra`).
pub fn route_ready(r: &Report, ns: &str, route: &str, gateways: &[&str]) -> Outcome {
    for gw in gateways {
        let p = r.parent(ns, route, gw, None)?;
        cond(p, "Accepted", "True", "Accepted")?;
        cond(p, "ResolvedRefs", "True", "ResolvedRefs")?;
    }
    Ok(())
}

/// Waits for the route to be accepted by its Gateways and the Gateways to be ready.
pub async fn accepted(env: &Env, ns: &str, route: &str, gateways: &[&str]) -> Outcome {
    wait_status(env, &format!("HTTPRoute {ns}/{route} accepted"), |r| {
        for gw in gateways {
            gateway_ready(r, crate::INFRA, gw)?;
        }
        route_ready(r, ns, route, gateways)
    })
    .await
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

    #[test]
    fn conditions_and_generations_are_checked() {
        let holder = serde_json::json!({"conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": 2},
        ]});
        assert_eq!(cond(&holder, "Accepted", "True", "Accepted"), Ok(()));
        assert_eq!(cond(&holder, "Accepted", "True", ""), Ok(()));
        assert!(cond(&holder, "Accepted", "False", "").is_err());
        assert!(cond(&holder, "Accepted", "True", "Other").is_err());
        assert!(cond(&holder, "Programmed", "True", "").is_err());
        assert_eq!(observed(&holder, 2), Ok(()));
        assert!(observed(&holder, 1).is_err());
    }
}
