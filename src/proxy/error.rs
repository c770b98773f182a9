//! Why the proxy could not serve a request, and the one place where each reason becomes an HTTP
//! status code and a short text body.

use std::error::Error as StdError;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use super::ProxyBody;
use crate::table::ServiceKey;

/// A request the proxy answers itself instead of forwarding.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The socket's listener is gone from the live table (it is draining).
    #[error("no listener at {0}")]
    NoListener(SocketAddr),
    /// The request's host belongs to another HTTPS listener of the socket than the one the
    /// TLS handshake chose by SNI (a reused connection for another site).
    #[error("host belongs to another listener than the TLS server name")]
    Misdirected,
    /// No virtual host or no rule accepts the request.
    #[error("no route matched")]
    NoRoute,
    /// The picked backendRef could not be resolved by the translator.
    #[error("backend reference is invalid: {reason}")]
    InvalidBackend { reason: String },
    /// The rule has no backend that can take traffic (none listed, or all weights 0).
    #[error("no backend can take traffic")]
    NoBackend,
    /// The Service is resolved but has no ready endpoints.
    #[error("backend {service} has no ready endpoints")]
    NoEndpoints { service: ServiceKey },
    /// The upstream URI could not be built from the (rewritten) request.
    #[error("cannot build upstream request: {0}")]
    BadUpstreamRequest(String),
    /// TCP connect to the endpoint failed (refused, unreachable).
    #[error("connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// TCP connect to the endpoint did not finish within the connect timeout.
    #[error("connect to {addr} timed out")]
    ConnectTimeout { addr: SocketAddr },
    /// The endpoint accepted the connection but the exchange failed.
    #[error("upstream {addr}: {source}")]
    Upstream {
        addr: SocketAddr,
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// TCP connect to an h2c endpoint failed.
    #[error("connect to {addr}: {source}")]
    ConnectIo {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The HTTP/2 handshake or exchange with an h2c endpoint failed.
    #[error("upstream {addr}: {source}")]
    UpstreamH2 {
        addr: SocketAddr,
        #[source]
        source: hyper::Error,
    },
    /// The client's request body sent nothing for the body idle timeout before the response
    /// head; the upstream exchange was aborted.
    #[error("request body idle for {0:?}")]
    BodyTimeout(std::time::Duration),
    /// The rule's `timeouts.request` or `timeouts.backendRequest`, or the proxy's upstream
    /// response timeout, passed before the response head arrived.
    #[error("{which} timeout of {after:?} exceeded")]
    Timeout {
        which: &'static str,
        after: std::time::Duration,
    },
}

impl ProxyError {
    /// Classifies a client error from talking to `addr`.
    pub fn from_upstream(addr: SocketAddr, source: hyper_util::client::legacy::Error) -> Self {
        if source.is_connect() {
            if is_timeout(&source) {
                Self::ConnectTimeout { addr }
            } else {
                Self::Connect { addr, source }
            }
        } else {
            Self::Upstream { addr, source }
        }
    }

    /// The single mapping from failure to status code.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NoListener(_) | Self::NoRoute => StatusCode::NOT_FOUND,
            Self::Misdirected => StatusCode::MISDIRECTED_REQUEST,
            Self::InvalidBackend { .. } | Self::NoBackend | Self::BadUpstreamRequest(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            Self::NoEndpoints { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Connect { .. }
            | Self::Upstream { .. }
            | Self::ConnectIo { .. }
            | Self::UpstreamH2 { .. } => StatusCode::BAD_GATEWAY,
            Self::ConnectTimeout { .. } | Self::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
        }
    }

    /// A response with the status code and a one-line text body naming the reason class.
    pub fn to_response(&self) -> Response<ProxyBody> {
        let status = self.status();
        let text = format!(
            "{} {}\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("error")
        );
        let mut resp = Response::new(
            Full::new(Bytes::from(text))
                .map_err(|never| match never {})
                .boxed(),
        );
        *resp.status_mut() = status;
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        resp
    }
}

/// True when an I/O error somewhere in the chain says the operation timed out.
fn is_timeout(err: &(dyn StdError + 'static)) -> bool {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    let mut depth = 0;
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::TimedOut {
                return true;
            }
        }
        depth += 1;
        if depth > 16 {
            break;
        }
        cur = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        let key = ServiceKey {
            namespace: "ns".into(),
            name: "svc".into(),
            port: 80,
        };
        assert_eq!(ProxyError::NoRoute.status(), 404);
        assert_eq!(ProxyError::NoBackend.status(), 500);
        assert_eq!(
            ProxyError::InvalidBackend { reason: "x".into() }.status(),
            500
        );
        assert_eq!(ProxyError::NoEndpoints { service: key }.status(), 503);
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(ProxyError::ConnectTimeout { addr }.status(), 504);
        let timeout = ProxyError::Timeout {
            which: "request",
            after: std::time::Duration::from_millis(500),
        };
        assert_eq!(timeout.status(), 504);
        let body = ProxyError::BodyTimeout(std::time::Duration::from_secs(1));
        assert_eq!(body.status(), 408);
    }

    #[test]
    fn timeout_is_found_in_the_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::new(std::io::ErrorKind::TimedOut, "slow"));
        assert!(is_timeout(&e));
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "no",
        ));
        assert!(!is_timeout(&e));
    }
}
