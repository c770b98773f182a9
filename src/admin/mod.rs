//! The admin server: health, readiness and Prometheus metrics, for the kubelet and Prometheus.
//! HTTP/1.1 on its own address (loopback by default); never on a request path of the proxy.
//! Every request's `Host` must name this server (a loopback IP, `localhost`, or the IP the
//! connection arrived on), so a web page cannot reach it through DNS rebinding: its requests
//! carry the attacker's host name and get 403. The debug views (the whole configuration and
//! status) are not here: they moved to the dashboard server (`crate::dashboard`), which stays
//! on loopback.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, CONTENT_TYPE, HOST};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::published::Published;
use crate::request::parse_authority;

/// Default address of the admin server.
pub const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:9901";

/// Default address of the dashboard server (`crate::dashboard`), also where `edgeplane
/// status` and `edgeplane routes` look; named here, beside the admin address, so that the
/// admin server's answers can say where the debug views went.
pub const DEFAULT_DASHBOARD_ADDR: &str = "127.0.0.1:9902";

/// Time a client has to send a request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the admin endpoints on `listener` until the task is dropped or the listener fails.
pub async fn serve_admin(listener: TcpListener, published: Arc<Published>) -> std::io::Result<()> {
    let bound = listener.local_addr()?;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and similar: back off instead of spinning.
                tracing::warn!(error = %e, "admin accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let published = published.clone();
        // On a wildcard bind, the address this client reached: what its `Host` may name.
        let local = stream.local_addr().unwrap_or(bound);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let published = published.clone();
                async move {
                    let resp = if host_allowed(req.headers().get(HOST), local) {
                        handle(&req, &published)
                    } else {
                        text(
                            StatusCode::FORBIDDEN,
                            "forbidden: Host does not name the admin server\n",
                        )
                    };
                    Ok::<_, std::convert::Infallible>(resp)
                }
            });
            let conn = http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "admin connection ended");
            }
        });
    }
}

/// The DNS-rebinding guard: the `Host` header must be `localhost`, a loopback IP, or the IP
/// of `local`, the address the connection arrived on (kubelet probes send the pod IP; on a
/// wildcard bind that is the concrete address, never `0.0.0.0`, so no other IP literal
/// passes). A request without `Host` is refused. An IP literal cannot be rebound, so only
/// host names other than `localhost` are at risk.
pub fn host_allowed(host: Option<&HeaderValue>, local: SocketAddr) -> bool {
    let Some(authority) = host.and_then(|h| parse_authority(h.as_bytes()).ok()) else {
        return false;
    };
    let name = authority.host.trim_end_matches('.');
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let Ok(ip) = name.parse::<IpAddr>() else {
        return false;
    };
    ip.is_loopback() || (ip == local.ip() && !ip.is_unspecified())
}

const TEXT: &str = "text/plain; charset=utf-8";
const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What `GET /` lists: every endpoint of the admin server, and where the rest went.
pub const INDEX: &str = "edgeplane admin server\n\
\n\
/metrics   Prometheus metrics\n\
/healthz   liveness: 200 while the process serves\n\
/readyz    readiness: 200 once the first route table is published\n\
\n\
The dashboard, its API and /debug/config, /debug/status are served on the dashboard\n\
address (--dashboard-addr, default 127.0.0.1:9902), over loopback only.\n";

/// Answers one admin request: `/` (the list of endpoints), `/healthz`, `/readyz`,
/// `/metrics`; 404 saying where they moved for `/debug/*`, 404 for any other path, 405 for
/// methods other than GET and HEAD.
pub fn handle<B>(req: &Request<B>, published: &Published) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match req.uri().path() {
        "/" => text(StatusCode::OK, INDEX),
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" if published.is_ready() => text(StatusCode::OK, "ready\n"),
        "/readyz" => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no route table published yet\n",
        ),
        "/metrics" => body(StatusCode::OK, PROMETHEUS, published.metrics().encode()),
        p if p.starts_with("/debug/") => text(
            StatusCode::NOT_FOUND,
            &format!(
                "not found: {p} moved to the dashboard server (--dashboard-addr, default \
                 {DEFAULT_DASHBOARD_ADDR}), e.g. `curl http://{DEFAULT_DASHBOARD_ADDR}{p}`\n"
            ),
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found (GET / lists the endpoints)\n",
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

    fn get(path: &str, p: &Published) -> Response<Full<Bytes>> {
        let req = Request::get(path).body(()).unwrap();
        handle(&req, p)
    }

    #[test]
    fn host_check_against_dns_rebinding() {
        let local: SocketAddr = "127.0.0.1:9901".parse().unwrap();
        let pod: SocketAddr = "10.1.2.3:9901".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:9901".parse().unwrap();
        let ok = |h: &str, a| host_allowed(Some(&HeaderValue::from_str(h).unwrap()), a);
        for h in [
            "localhost",
            "LOCALHOST:9901",
            "127.0.0.1:9901",
            "127.9.9.9",
            "[::1]:9901",
        ] {
            assert!(ok(h, local), "{h}");
        }
        for h in [
            "evil.example",
            "evil.example:9901",
            "10.1.2.3:9901",
            "admin",
            "",
        ] {
            assert!(!ok(h, local), "{h}");
        }
        assert!(ok("10.1.2.3:9901", pod));
        assert!(!ok("10.9.9.9:9901", pod));
        // Never a wildcard: the connection's own address is what an IP literal must name.
        assert!(!ok("10.9.9.9:9901", any));
        assert!(!ok("0.0.0.0:9901", any));
        assert!(ok("127.0.0.1:9901", any));
        assert!(!ok("rebound.example:9901", any));
        assert!(!host_allowed(None, local));
    }

    #[test]
    fn readiness_follows_the_flag() {
        let p = Published::new(Metrics::new());
        assert_eq!(get("/readyz", &p).status(), StatusCode::SERVICE_UNAVAILABLE);
        p.mark_ready();
        assert_eq!(get("/readyz", &p).status(), StatusCode::OK);
        assert_eq!(get("/nope", &p).status(), StatusCode::NOT_FOUND);
        let post = Request::post("/healthz").body(()).unwrap();
        assert_eq!(handle(&post, &p).status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    #[test]
    fn debug_views_moved_and_the_root_lists_the_endpoints() {
        let p = Published::new(Metrics::new());
        for path in ["/debug/config", "/debug/status"] {
            let r = get(path, &p);
            assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
        }
        assert_eq!(get("/", &p).status(), StatusCode::OK);
        for endpoint in ["/metrics", "/healthz", "/readyz", "--dashboard-addr"] {
            assert!(INDEX.contains(endpoint), "{endpoint}");
        }
    }
}
