//! Upstream connection pools: one keep-alive HTTP/1.1 client and one HTTP/2-only (h2c prior
//! knowledge) client, shared by every table so pools survive table swaps; endpoint choice.

use std::net::SocketAddr;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::error::ProxyError;
use crate::table::{ServiceBackend, UpstreamProtocol};

/// Idle pooled connections are closed after this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The pooled clients, keyed internally by endpoint address.
#[derive(Debug, Clone)]
pub struct Upstreams {
    http1: Client<HttpConnector, Incoming>,
    h2c: Client<HttpConnector, Incoming>,
}

impl Upstreams {
    /// Builds both clients with `connect_timeout` on every new TCP connection.
    pub fn new(connect_timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        connector.enforce_http(true);
        let http1 = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(connector.clone());
        let h2c = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .timer(TokioTimer::new())
            .http2_only(true)
            .build(connector);
        Self { http1, h2c }
    }

    /// Sends `req` (absolute URI naming `endpoint`) with the client for `protocol`; the response
    /// body streams.
    pub async fn send(
        &self,
        protocol: UpstreamProtocol,
        endpoint: SocketAddr,
        req: Request<Incoming>,
    ) -> Result<http::Response<Incoming>, ProxyError> {
        let client = match protocol {
            UpstreamProtocol::Http1 => &self.http1,
            UpstreamProtocol::H2c => &self.h2c,
        };
        client
            .request(req)
            .await
            .map_err(|e| ProxyError::from_upstream(endpoint, e))
    }
}

/// Picks one ready endpoint of `service` uniformly at random, or says there is none (503).
pub fn pick_endpoint(service: &ServiceBackend) -> Result<SocketAddr, ProxyError> {
    match service.endpoints.len() {
        0 => Err(ProxyError::NoEndpoints {
            service: service.service.clone(),
        }),
        1 => Ok(service.endpoints[0]),
        n => Ok(service.endpoints[fastrand::usize(..n)]),
    }
}
