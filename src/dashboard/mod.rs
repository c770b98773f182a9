//! The dashboard server: the read-only live page at `/` (assets embedded in the binary), its
//! JSON API under `/api/` and the debug views `/debug/config` and `/debug/status`, on their own
//! address (`--dashboard-addr`, loopback by default), apart from the admin port that Prometheus
//! and the kubelet reach. Like the admin server it checks `Host` against DNS rebinding, and it
//! answers only connections that arrived over loopback: the views hold the whole configuration.

pub mod conditions;
mod overview;
pub mod trace;
mod traffic;
pub mod tree;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE, HOST};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpListener;

use crate::admin::host_allowed;
use crate::proxy::Proxy;
use crate::published::Published;

pub use traffic::{Traffic, TrafficRow};

pub use crate::admin::DEFAULT_DASHBOARD_ADDR;

/// Time a client has to send a request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What the dashboard reads: the publication, the proxy (for ejected endpoints) and the
/// traffic sampler that turns the metrics' counters into rates.
pub struct Dashboard {
    published: Arc<Published>,
    proxy: Option<Arc<Proxy>>,
    traffic: traffic::Sampler,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("proxy", &self.proxy.is_some())
            .finish_non_exhaustive()
    }
}

impl Dashboard {
    /// A dashboard over `published`; with `proxy`, endpoints ejected by outlier detection are
    /// marked as such.
    pub fn new(published: Arc<Published>, proxy: Option<Arc<Proxy>>) -> Arc<Self> {
        Arc::new(Self {
            published,
            proxy,
            traffic: traffic::Sampler::default(),
        })
    }

    fn ejected(&self) -> Vec<SocketAddr> {
        self.proxy
            .as_ref()
            .map(|p| p.ejected_endpoints())
            .unwrap_or_default()
    }

    /// [`Dashboard::answer`], with `/api/trace` (a response streamed as traced requests
    /// happen) among the paths.
    pub fn respond<B>(
        &self,
        req: &Request<B>,
        local: SocketAddr,
    ) -> Response<BoxBody<Bytes, std::convert::Infallible>> {
        if let Some(refused) = self.refusal(req, local) {
            return refused.map(BodyExt::boxed);
        }
        let ("/api/trace", Some(proxy)) = (req.uri().path(), self.proxy.as_ref()) else {
            return self.handle(req).map(BodyExt::boxed);
        };
        if req.method() != Method::GET {
            return self.handle(req).map(BodyExt::boxed);
        }
        match trace::TraceQuery::parse(req.uri().query()) {
            Ok(query) => trace::stream(&proxy.tap(), query),
            Err(e) => text(StatusCode::BAD_REQUEST, &format!("{e}\n")).map(BodyExt::boxed),
        }
    }

    /// 403 unless the request arrived over loopback and its `Host` names this server.
    fn refusal<B>(&self, req: &Request<B>, local: SocketAddr) -> Option<Response<Full<Bytes>>> {
        if !local.ip().is_loopback() {
            return Some(text(
                StatusCode::FORBIDDEN,
                "forbidden: the dashboard answers only over loopback \
                 (connect to 127.0.0.1; in a cluster, kubectl port-forward)\n",
            ));
        }
        if !host_allowed(req.headers().get(HOST), local) {
            return Some(text(
                StatusCode::FORBIDDEN,
                "forbidden: Host does not name the dashboard server\n",
            ));
        }
        None
    }

    /// Answers a request that arrived on the address `local`: 403 unless that address is a
    /// loopback one and the `Host` names this server, else [`Dashboard::handle`].
    pub fn answer<B>(&self, req: &Request<B>, local: SocketAddr) -> Response<Full<Bytes>> {
        self.refusal(req, local).unwrap_or_else(|| self.handle(req))
    }

    /// Answers one request: the page and its assets, `/api/overview`, `/api/traffic`,
    /// `/api/routes`, `/debug/config`, `/debug/status`; 404 for other paths, 405 for methods
    /// other than GET and HEAD.
    pub fn handle<B>(&self, req: &Request<B>) -> Response<Full<Bytes>> {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let path = req.uri().path();
        if let Some(asset) = find_asset(path) {
            return body(StatusCode::OK, asset.content_type, asset.bytes);
        }
        match path {
            "/api/overview" => {
                let table = self.published.table();
                let status = self.published.status();
                json(&overview::build(
                    &table,
                    &status,
                    &self.published,
                    &self.ejected(),
                ))
            }
            "/api/traffic" => json(&self.traffic.sample(self.published.metrics())),
            "/api/routes" => json(&tree::build(&self.published.table(), &self.ejected())),
            "/debug/config" => json(&*self.published.table()),
            "/debug/status" => json(&*self.published.status()),
            _ => text(StatusCode::NOT_FOUND, "not found\n"),
        }
    }
}

/// Serves the dashboard on `listener` until the task is dropped or the listener fails.
pub async fn serve_dashboard(
    listener: TcpListener,
    dashboard: Arc<Dashboard>,
) -> std::io::Result<()> {
    let bound = listener.local_addr()?;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "dashboard accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let dashboard = dashboard.clone();
        let local = stream.local_addr().unwrap_or(bound);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let dashboard = dashboard.clone();
                async move { Ok::<_, std::convert::Infallible>(dashboard.respond(&req, local)) }
            });
            let conn = http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "dashboard connection ended");
            }
        });
    }
}

/// One file of the page, compiled into the binary: no CDN, nothing built or fetched at run
/// time.
struct Asset {
    content_type: &'static str,
    bytes: &'static [u8],
}

const INDEX: Asset = Asset {
    content_type: "text/html; charset=utf-8",
    bytes: include_bytes!("assets/index.html"),
};
const SCRIPT: Asset = Asset {
    content_type: "text/javascript; charset=utf-8",
    bytes: include_bytes!("assets/app.js"),
};
const STYLE: Asset = Asset {
    content_type: "text/css; charset=utf-8",
    bytes: include_bytes!("assets/app.css"),
};

/// The asset served at `path`, if any.
fn find_asset(path: &str) -> Option<Asset> {
    match path {
        "/" | "/index.html" => Some(INDEX),
        "/app.js" => Some(SCRIPT),
        "/app.css" => Some(STYLE),
        _ => None,
    }
}

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

fn json<T: Serialize>(value: &T) -> Response<Full<Bytes>> {
    match serde_json::to_vec_pretty(value) {
        Ok(mut v) => {
            v.push(b'\n');
            let mut r = body(StatusCode::OK, JSON, v);
            r.headers_mut()
                .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot encode: {e}\n"),
        ),
    }
}

fn text(status: StatusCode, s: &str) -> Response<Full<Bytes>> {
    body(status, TEXT, s.to_owned())
}

fn body(
    status: StatusCode,
    content_type: &'static str,
    b: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(b.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    fn get(d: &Dashboard, path: &str) -> Response<Full<Bytes>> {
        d.handle(&Request::get(path).body(()).unwrap())
    }

    #[test]
    fn serves_the_page_the_api_and_the_debug_views() {
        let d = Dashboard::new(Published::new(Metrics::new()), None);
        for (path, kind) in [
            ("/", "text/html"),
            ("/app.js", "text/javascript"),
            ("/app.css", "text/css"),
            ("/api/overview", JSON),
            ("/api/traffic", JSON),
            ("/api/routes", JSON),
            ("/debug/config", JSON),
            ("/debug/status", JSON),
        ] {
            let r = get(&d, path);
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            let ct = r.headers()[CONTENT_TYPE].to_str().unwrap();
            assert!(ct.starts_with(kind), "{path}: {ct}");
        }
        assert_eq!(get(&d, "/nope").status(), StatusCode::NOT_FOUND);
        let post = Request::post("/api/overview").body(()).unwrap();
        assert_eq!(d.handle(&post).status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    #[test]
    fn only_loopback_connections_naming_the_server_are_answered() {
        let d = Dashboard::new(Published::new(Metrics::new()), None);
        let req = |host: &str| {
            Request::get("/debug/config")
                .header(HOST, host)
                .body(())
                .unwrap()
        };
        let loopback: SocketAddr = "127.0.0.1:9902".parse().unwrap();
        let pod: SocketAddr = "10.1.2.3:9902".parse().unwrap();
        assert_eq!(
            d.answer(&req("127.0.0.1:9902"), loopback).status(),
            StatusCode::OK
        );
        assert_eq!(
            d.answer(&req("localhost:9902"), loopback).status(),
            StatusCode::OK
        );
        let r = d.answer(&req("10.1.2.3:9902"), pod);
        assert_eq!(
            r.status(),
            StatusCode::FORBIDDEN,
            "a pod IP is never answered"
        );
        let r = d.answer(&req("evil.example:9902"), loopback);
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "DNS rebinding");
    }
}
