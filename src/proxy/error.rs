//! Why the proxy could not serve a request, and the one place where each reason becomes an HTTP
//! status code, a short text body and a fault class (client, route, backend) for the metrics.

use std::error::Error as StdError;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::proxy::body::{BoxError, ProxyBody};
use crate::request::{HostError, PathError};
use crate::table::ServiceKey;

/// Header of a 503 a circuit breaker caused, naming the limit (`max-requests`, `max-pending`,
/// `max-connections`), or the full basic-auth hashing pool (`basic-auth`): clients and
/// dashboards tell shedding from a backend's own 503.
pub const OVERLOADED: &str = "x-edgeplane-overloaded";

/// Marks an error of the client's request body (a malformed chunk, a reset stream) as it passes
/// through the upstream client, so the failure is blamed on the client, not the backend.
#[derive(Debug, thiserror::Error)]
#[error("client request body: {0}")]
pub struct ClientBodyError(#[source] pub crate::proxy::body::BoxError);

/// Who caused a failed request: the label of `edgeplane_request_errors_total{fault}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The request itself is malformed or refused by policy (4xx, 501).
    Client,
    /// The configuration: no route, no backend, an unresolved backend (404, 421, 500).
    Route,
    /// The backend: no endpoints, connect or exchange failure, timeout (502, 503, 504).
    Upstream,
}

impl Fault {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Route => "route",
            Self::Upstream => "upstream",
        }
    }
}

/// A request the proxy answers itself instead of forwarding.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The request names no host: no `Host` header and no `:authority` (RFC 9112 3.2).
    #[error("request has no host")]
    MissingHost,
    /// More than one `Host` header line (RFC 9112 3.2).
    #[error("request has more than one Host header")]
    DuplicateHost,
    /// `Host` or `:authority` is not a valid `host[:port]`.
    #[error("invalid host: {0}")]
    BadHost(HostError),
    /// HTTP/2 `:authority` and `Host` name different sites (RFC 9113 8.3.1).
    #[error(":authority and Host disagree")]
    HostMismatch,
    /// The path breaks the path policy (docs/security.md).
    #[error("path refused: {0}")]
    BadPath(PathError),
    /// Asterisk-form target on a method other than OPTIONS.
    #[error("'*' target is only allowed for OPTIONS")]
    AsteriskForm,
    /// The canonical target could not be turned back into a URI.
    #[error("invalid request target: {0}")]
    BadUri(String),
    /// Contradictory or repeated framing (RFC 9112 6.1, 6.3).
    #[error("invalid message framing: {0}")]
    BadFraming(&'static str),
    /// A transfer coding other than chunked (RFC 9112 6.1: 501).
    #[error("transfer coding {0:?} is not implemented")]
    UnsupportedTransferCoding(String),
    /// The client's request body broke while it was forwarded (malformed chunked encoding,
    /// a reset stream).
    #[error("{0}")]
    ClientBody(String),
    /// The redirect location built from the request is not a valid header value.
    #[error("redirect location is not a valid header value")]
    BadRedirect,
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
    /// The Service is over a circuit-breaker limit: refused at once rather than queued.
    #[error("backend {service} is over its {} limit", limit.as_str())]
    Overloaded {
        service: ServiceKey,
        limit: Overload,
    },
    /// The upstream URI could not be built from the (rewritten) request.
    #[error("cannot build upstream request: {0}")]
    BadUpstreamRequest(String),
    /// TCP connect to the endpoint did not finish within the connect timeout.
    #[error("connect to {addr} timed out")]
    ConnectTimeout { addr: SocketAddr },
    /// TCP connect to the endpoint failed (refused, unreachable).
    #[error("connect to {addr}: {source}")]
    ConnectIo {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The TLS handshake with the endpoint failed (its certificate does not verify against
    /// the BackendTLSPolicy, the backend refused ours, or it does not speak TLS).
    #[error("TLS to {addr} (BackendTLSPolicy {policy}): {error}")]
    UpstreamTls {
        addr: SocketAddr,
        policy: String,
        error: String,
    },
    /// The Service port's BackendTLSPolicy cannot be used: the backend is not reached in
    /// cleartext instead.
    #[error("BackendTLSPolicy {policy} cannot be used: {reason}")]
    BackendTlsUnusable { policy: String, reason: String },
    /// The endpoint accepted the connection but the HTTP handshake or exchange failed.
    #[error("upstream {addr}: {source}")]
    UpstreamHttp {
        addr: SocketAddr,
        #[source]
        source: hyper::Error,
    },
    /// The endpoint accepted the connection but the HTTP/1.1 exchange on a pooled connection
    /// failed.
    #[error("upstream {addr}: {source}")]
    UpstreamH1 {
        addr: SocketAddr,
        #[source]
        source: H1Error,
    },
    /// The client's request body sent nothing for the body idle timeout before the response
    /// head; the upstream exchange was aborted.
    #[error("request body idle for {0:?}")]
    BodyTimeout(std::time::Duration),
    /// The client's request body arrived slower than `--min-body-rate` before the response
    /// head; the upstream exchange was aborted.
    #[error("request body slower than {} bytes/s", .0.bytes_per_second)]
    BodyTooSlow(crate::proxy::body::MinRate),
    /// The request target (path and query) is longer than `--max-request-target`.
    #[error("request target longer than {0} bytes")]
    TargetTooLong(usize),
    /// The client address is not allowed by the TrafficPolicy's `ipAccess` lists.
    #[error("client address {0} is not allowed")]
    IpDenied(std::net::IpAddr),
    /// The TrafficPolicy whose `ipAccess` governs the request is invalid: its access controls
    /// fail closed, every request is refused until it is fixed.
    #[error("TrafficPolicy {0} is invalid: access denied until it is fixed")]
    PolicyInvalid(String),
    /// The request's rate-limit bucket is empty; a token is back after `retry_after`.
    #[error("rate limit exceeded")]
    RateLimited { retry_after: std::time::Duration },
    /// The client address already has the TrafficPolicy's `concurrencyLimit` of requests in
    /// progress.
    #[error("too many requests of this client in progress (limit {0})")]
    ConcurrencyLimited(u32),
    /// Missing or wrong credentials: basic auth or JWT. `challenge` is the
    /// `WWW-Authenticate` value that tells the client what to send.
    #[error("unauthorized: {reason}")]
    Unauthorized {
        challenge: HeaderValue,
        reason: String,
    },
    /// More than one `Authorization` header on a route with basic auth or JWT: one could be
    /// verified while the backend believes the other.
    #[error("request has more than one Authorization header")]
    DuplicateAuthorization,
    /// Every worker and queue place of the basic-auth hashing pool is taken; the password is
    /// not checked and the client may retry after `retry_after`.
    #[error("password checks are saturated")]
    AuthBusy { retry_after: std::time::Duration },
    /// The request head is larger than the listener's `maxRequestHeaderBytes`.
    #[error("request head larger than {0} bytes")]
    HeadersTooLarge(u32),
    /// The request body is larger than the policy's or listener's limit.
    #[error("request body larger than {0} bytes")]
    RequestBodyTooLarge(u64),
    /// The upstream response body is larger than the policy's limit (known from its
    /// `Content-Length` before anything was sent to the client).
    #[error("response body larger than {0} bytes")]
    ResponseBodyTooLarge(u64),
    /// The rule's `timeouts.request` or `timeouts.backendRequest`, or the proxy's upstream
    /// response timeout, passed before the response head arrived.
    #[error("{} timeout of {after:?} exceeded", kind.as_str())]
    Timeout {
        kind: TimeoutKind,
        after: std::time::Duration,
    },
    /// An external authorizer could not answer (down, timed out, a malformed answer) and the
    /// check fails closed: refused with the check's `status` (403 unless configured).
    #[error("external authorization failed: {reason}")]
    ExternalAuth { status: StatusCode, reason: String },
    /// The backend answered a status of the rule's error pages and the error page Service
    /// could not answer: the client gets that failure's status (502, 503 or 504), never the
    /// backend's dropped answer.
    #[error("error page backend {service}: {source}")]
    ErrorPage {
        service: ServiceKey,
        source: Box<ProxyError>,
    },
}

/// Which timeout passed before the response head arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutKind {
    /// The rule's `timeouts.request`, counted from the start of the request.
    Request,
    /// The rule's `timeouts.backendRequest`, counted from the start of the attempt.
    BackendRequest,
    /// The proxy's upstream response timeout (`--upstream-timeout`), per attempt.
    UpstreamResponse,
    /// The rule's `backendSendIdle`: the backend read nothing of the request for that long.
    BackendSendIdle,
}

impl TimeoutKind {
    /// The name in messages: the field of the rule's `timeouts`, or the proxy's own.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::BackendRequest => "backendRequest",
            Self::UpstreamResponse => "upstream response",
            Self::BackendSendIdle => "backend send idle",
        }
    }
}

impl ProxyError {
    /// Reclassifies an upstream failure caused by the client's own request body as a client
    /// fault: the backend is not to blame when the client sends a malformed chunk.
    pub fn blame_client_body(self) -> Self {
        let client = match &self {
            Self::UpstreamHttp { source, .. } => client_body_in(source),
            Self::UpstreamH1 { source, .. } => client_body_in(source),
            _ => None,
        };
        match client {
            Some(message) => Self::ClientBody(message),
            None => self,
        }
    }

    /// The single mapping from failure to status code.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MissingHost
            | Self::DuplicateHost
            | Self::BadHost(_)
            | Self::HostMismatch
            | Self::BadPath(_)
            | Self::AsteriskForm
            | Self::BadUri(_)
            | Self::BadFraming(_)
            | Self::ClientBody(_)
            | Self::DuplicateAuthorization
            | Self::BadRedirect => StatusCode::BAD_REQUEST,
            Self::UnsupportedTransferCoding(_) => StatusCode::NOT_IMPLEMENTED,
            Self::NoListener(_) | Self::NoRoute => StatusCode::NOT_FOUND,
            Self::Misdirected => StatusCode::MISDIRECTED_REQUEST,
            Self::InvalidBackend { .. } | Self::NoBackend | Self::BadUpstreamRequest(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            Self::NoEndpoints { .. } | Self::Overloaded { .. } | Self::AuthBusy { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::ConnectIo { .. }
            | Self::UpstreamHttp { .. }
            | Self::UpstreamH1 { .. }
            | Self::UpstreamTls { .. }
            | Self::BackendTlsUnusable { .. } => StatusCode::BAD_GATEWAY,
            Self::ConnectTimeout { .. } | Self::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            Self::BodyTimeout(_) | Self::BodyTooSlow(_) => StatusCode::REQUEST_TIMEOUT,
            Self::TargetTooLong(_) => StatusCode::URI_TOO_LONG,
            Self::IpDenied(_) | Self::PolicyInvalid(_) => StatusCode::FORBIDDEN,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::ConcurrencyLimited(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            Self::RequestBodyTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::HeadersTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::ResponseBodyTooLarge(_) => StatusCode::BAD_GATEWAY,
            Self::ExternalAuth { status, .. } => *status,
            Self::ErrorPage { source, .. } => source.status(),
        }
    }

    /// Who is to blame, for the metrics: derived from the status class so the two never
    /// disagree, except the proxy's own saturated password checks: a 503 no backend caused,
    /// blamed on the route whose policy needs them, and a client over its concurrency limit: a
    /// 503 the client caused.
    pub fn fault(&self) -> Fault {
        if matches!(self, Self::AuthBusy { .. }) {
            return Fault::Route;
        }
        if matches!(self, Self::ConcurrencyLimited(_)) {
            return Fault::Client;
        }
        // The authorizer is an upstream, whatever status its failure is answered with.
        if matches!(self, Self::ExternalAuth { .. } | Self::ErrorPage { .. }) {
            return Fault::Upstream;
        }
        let status = self.status();
        if status.is_client_error()
            && status != StatusCode::NOT_FOUND
            && status != StatusCode::MISDIRECTED_REQUEST
            || status == StatusCode::NOT_IMPLEMENTED
        {
            Fault::Client
        } else if matches!(status.as_u16(), 502..=504) {
            Fault::Upstream
        } else {
            Fault::Route
        }
    }

    /// A response with the status code and a one-line text body naming the reason class; a
    /// client over its concurrency limit is told so (its 503 is not the backend's).
    pub fn to_response(&self) -> Response<ProxyBody> {
        let status = self.status();
        let reason = status.canonical_reason().unwrap_or("error");
        let text = match self {
            Self::ConcurrencyLimited(_) => format!("{} {reason}: {self}\n", status.as_u16()),
            Self::ErrorPage { service, .. } => format!(
                "{} {reason}: the error page backend {service} did not answer\n",
                status.as_u16()
            ),
            _ => format!("{} {reason}\n", status.as_u16()),
        };
        let mut resp = Response::new(
            Full::new(Bytes::from(text))
                .map_err(|never| match never {})
                .boxed_unsync(),
        );
        *resp.status_mut() = status;
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        match self {
            Self::Overloaded { limit, .. } => {
                resp.headers_mut()
                    .insert(OVERLOADED, HeaderValue::from_static(limit.as_str()));
            }
            Self::RateLimited { retry_after } => {
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, retry_after_value(*retry_after));
            }
            Self::AuthBusy { retry_after } => {
                resp.headers_mut()
                    .insert(OVERLOADED, HeaderValue::from_static("basic-auth"));
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, retry_after_value(*retry_after));
            }
            Self::Unauthorized { challenge, .. } => {
                resp.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, challenge.clone());
            }
            _ => {}
        }
        resp
    }
}

/// Which limit refused a request: the value of the `x-edgeplane-overloaded` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overload {
    MaxRequests,
    MaxPending,
    MaxConnections,
}

impl Overload {
    /// The header value and metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxRequests => "max-requests",
            Self::MaxPending => "max-pending",
            Self::MaxConnections => "max-connections",
        }
    }
}

/// Why an exchange with a backend failed.
#[derive(Debug, thiserror::Error)]
pub enum H1Error {
    #[error("connection: {0}")]
    Io(#[source] std::io::Error),
    #[error("connection closed before the response head")]
    ClosedBeforeHead,
    #[error("connection closed before the end of the response body")]
    IncompleteBody,
    #[error("malformed response head: {0}")]
    Head(#[source] httparse::Error),
    #[error("response head larger than {0} bytes")]
    HeadTooLarge(usize),
    #[error("invalid response status {0}")]
    Status(u16),
    #[error("invalid response header")]
    Header,
    #[error("invalid or conflicting Content-Length in the response")]
    ContentLength,
    #[error("malformed chunked response body")]
    Chunk,
    /// The client's request body failed while it was being sent (its error is the source).
    #[error("request body: {0}")]
    RequestBody(#[source] BoxError),
    /// The backend read nothing of the request for this long while some was left to write.
    #[error("the backend read nothing of the request for {0:?}")]
    SendIdle(std::time::Duration),
}

/// A listener the proxy could not bind.
#[derive(Debug)]
pub struct ListenerError {
    pub addr: SocketAddr,
    pub error: std::io::Error,
}

impl std::fmt::Display for ListenerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot listen on {}: {}", self.addr, self.error)
    }
}

impl std::error::Error for ListenerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// `Retry-After` in whole seconds, rounded up, never 0 (RFC 9110 10.2.3 allows no fractions).
fn retry_after_value(after: std::time::Duration) -> HeaderValue {
    let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    HeaderValue::from(secs.max(1))
}

/// The message of a [`ClientBodyError`] somewhere in the chain of `err`.
fn client_body_in(err: &(dyn StdError + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    for _ in 0..16 {
        let e = cur?;
        if let Some(c) = e.downcast_ref::<ClientBodyError>() {
            return Some(c.to_string());
        }
        cur = e.source();
    }
    None
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
