//! External authorization on the request path: after routing chose a rule and the other
//! policy checks passed, each `ExternalAuth` the request is under (the TrafficPolicy's, then
//! the rule's filters) asks its authorizer, over HTTP (`http`) or Envoy's gRPC `Check`
//! (`grpc`, with its messages in `messages`). An allowing answer may set headers on the
//! upstream request; a denial is the client's answer (a 401 becomes a sign-in redirect when
//! one is configured); an authorizer that cannot answer in time denies with the configured
//! status (403 by default, as Envoy's `ext_authz`) unless the check fails open. Counted in
//! `edgeplane_external_auth_total{backend,result}` and timed in
//! `edgeplane_external_auth_duration_seconds{backend}`.

mod grpc;
mod http;
pub mod messages;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use ::http::{Request, Response, StatusCode};
use bytes::{Bytes, BytesMut};
use http_body::Frame;
use http_body_util::{BodyExt, Full};

use crate::metrics::Metrics;
use crate::proxy::body::{ClientBody, ProxyBody, UpstreamBody};
use crate::proxy::error::ProxyError;
use crate::table::{AuthBackend, AuthProtocol, ExternalAuth, ServiceBackend, UpstreamProtocol};

/// Frames of an authorizer's answer read at most (with [`crate::table::MAX_AUTH_RESPONSE_BODY`]
/// bytes and the check's timeout, what bounds reading it).
const MAX_ANSWER_FRAMES: usize = 1024;

/// Frames of the client's body read ahead for the authorizer at most.
const MAX_BODY_FRAMES: usize = 4096;

/// Why an authorizer gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExtAuthError {
    #[error("authorizer backend is invalid: {0}")]
    InvalidBackend(String),
    #[error("authorizer unreachable: {0}")]
    Unreachable(ProxyError),
    #[error("authorizer did not answer within {0:?}")]
    Timeout(Duration),
    #[error("authorizer answer unreadable: {0}")]
    Answer(String),
    #[error("authorizer answered gRPC status {code}: {message}")]
    Grpc { code: i32, message: String },
}

/// An authorizer's decision.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Let the request through with these headers set (`true`: appended) and removed.
    Allow {
        set: Vec<(HeaderName, HeaderValue, bool)>,
        remove: Vec<HeaderName>,
    },
    /// Answer the client with this.
    Deny {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
}

/// A sent exchange's answer, as the transport gives it.
pub(crate) type Exchange<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Response<ProxyBody>, ProxyError>> + Send + 'a>,
>;

/// How a check reaches an authorizer: one of the Service's endpoints through the proxy's
/// upstream pools (with TLS when a BackendTLSPolicy covers the port). Implemented by the
/// routing phase, which holds the pools, so this phase does not depend on them.
pub(crate) trait Transport: Sync {
    /// Sends `req` (origin form, `Host` naming the site) to an endpoint of `service` with
    /// `protocol`.
    fn send<'a>(
        &'a self,
        service: &'a ServiceBackend,
        protocol: UpstreamProtocol,
        req: Request<UpstreamBody>,
    ) -> Exchange<'a>;
}

/// The proxy state a check reads.
pub(crate) struct Authorizer<'a> {
    pub transport: &'a dyn Transport,
    pub metrics: &'a Metrics,
}

/// What a check needs of the client's request besides the request itself.
pub(crate) struct Origin<'a> {
    /// The client's address (forwarded headers of trusted proxies applied) and port.
    pub client: SocketAddr,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// The request's host as it came.
    pub host: &'a str,
}

impl Origin<'_> {
    /// The URL the client asked for, as sign-in redirects and `X-Original-URL` carry it.
    fn url(&self, path_and_query: &str) -> String {
        format!("{}://{}{}", self.scheme, self.host, path_and_query)
    }
}

/// What one exchange with an authorizer needs.
pub(crate) struct Call<'a> {
    pub auth: &'a ExternalAuth,
    pub service: &'a ServiceBackend,
    pub authz: &'a Authorizer<'a>,
    pub origin: &'a Origin<'a>,
    /// The client request's head (its body is left in place).
    pub head: &'a Request<()>,
    /// The body bytes forwarded, and whether they are only its start.
    pub body: Bytes,
    pub partial: bool,
}

/// Runs every check in order. `Ok(None)` lets the request on (with the headers the
/// authorizers set), `Ok(Some(response))` is a denial to send as it is, and `Err` an
/// authorizer failure under a closed failure mode.
pub(crate) async fn authorize<'a>(
    checks: impl IntoIterator<Item = &'a ExternalAuth>,
    authz: &Authorizer<'_>,
    origin: &Origin<'_>,
    req: &mut Request<ClientBody>,
) -> Result<Option<Response<ProxyBody>>, ProxyError> {
    for auth in checks {
        if let Some(denied) = check(auth, authz, origin, req).await? {
            return Ok(Some(denied));
        }
    }
    Ok(None)
}

/// One check: reads the body ahead when it is forwarded, asks within the timeout, counts the
/// result and applies the verdict.
async fn check(
    auth: &ExternalAuth,
    authz: &Authorizer<'_>,
    origin: &Origin<'_>,
    req: &mut Request<ClientBody>,
) -> Result<Option<Response<ProxyBody>>, ProxyError> {
    let (body, partial) = match auth.forward_body {
        0 => (Bytes::new(), false),
        max => read_ahead(req.body_mut(), max).await?,
    };
    let mut head = Request::new(());
    *head.method_mut() = req.method().clone();
    *head.uri_mut() = req.uri().clone();
    *head.version_mut() = req.version();
    *head.headers_mut() = req.headers().clone();
    let label = auth.backend.label();
    let start = Instant::now();
    let asked = match &auth.backend {
        AuthBackend::Invalid { reason } => Err(ExtAuthError::InvalidBackend(reason.clone())),
        AuthBackend::Service(service) => {
            let call = Call {
                auth,
                service,
                authz,
                origin,
                head: &head,
                body,
                partial,
            };
            let exchange = async {
                match auth.protocol {
                    AuthProtocol::Http => http::check(&call).await,
                    AuthProtocol::Grpc => grpc::check(&call).await,
                }
            };
            match tokio::time::timeout(auth.timeout, exchange).await {
                Ok(answer) => answer,
                Err(_) => Err(ExtAuthError::Timeout(auth.timeout)),
            }
        }
    };
    let result = match &asked {
        Ok(Verdict::Allow { .. }) => "allowed",
        Ok(Verdict::Deny { .. }) => "denied",
        Err(ExtAuthError::Timeout(_)) => "timeout",
        Err(_) => "error",
    };
    let families = &authz.metrics.backend;
    families
        .external_auth
        .with_label_values(&[&label, result])
        .inc();
    families
        .external_auth_duration
        .with_label_values(&[&label])
        .observe(start.elapsed().as_secs_f64());
    match asked {
        Ok(Verdict::Allow { set, remove }) => {
            let headers = req.headers_mut();
            for name in remove {
                headers.remove(name);
            }
            let mut replaced: Vec<HeaderName> = Vec::new();
            for (name, value, append) in set {
                if append || replaced.contains(&name) {
                    headers.append(name, value);
                } else {
                    headers.insert(name.clone(), value);
                    replaced.push(name);
                }
            }
            Ok(None)
        }
        Ok(Verdict::Deny {
            status,
            headers,
            body,
        }) => Ok(Some(denial(auth, origin, &head, status, headers, body))),
        Err(error) if auth.failure.allow => {
            tracing::debug!(source = %auth.source, %error, "external authorization failed open");
            Ok(None)
        }
        Err(error) => Err(ProxyError::ExternalAuth {
            status: StatusCode::from_u16(auth.failure.status).unwrap_or(StatusCode::FORBIDDEN),
            reason: error.to_string(),
        }),
    }
}

/// The client's answer to a denial: the authorizer's, or for a 401 with a sign-in URL a 302
/// to it carrying the original URL as `rd`.
fn denial(
    auth: &ExternalAuth,
    origin: &Origin<'_>,
    head: &Request<()>,
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
) -> Response<ProxyBody> {
    let path = head.uri().path_and_query().map_or("/", |p| p.as_str());
    let signin = auth
        .signin
        .as_deref()
        .filter(|_| status == StatusCode::UNAUTHORIZED)
        .and_then(|url| {
            let rd: String = form_urlencoded::byte_serialize(origin.url(path).as_bytes()).collect();
            let sep = if url.contains('?') { '&' } else { '?' };
            HeaderValue::from_str(&format!("{url}{sep}rd={rd}")).ok()
        });
    if let Some(location) = signin {
        let mut resp = Response::new(full(Bytes::new()));
        *resp.status_mut() = StatusCode::FOUND;
        resp.headers_mut().insert(header::LOCATION, location);
        return resp;
    }
    let mut resp = Response::new(full(body));
    *resp.status_mut() = status;
    let out = resp.headers_mut();
    for (name, value) in &headers {
        if !is_connection_header(name) && name != header::CONTENT_LENGTH {
            out.append(name.clone(), value.clone());
        }
    }
    resp
}

/// A complete body.
pub(crate) fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// Headers about one connection or the message's framing: never copied between messages.
pub(crate) fn is_connection_header(name: &HeaderName) -> bool {
    [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::TE,
        header::TRAILER,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
    ]
    .contains(name)
        || name == "keep-alive"
        || name == "proxy-connection"
}

/// Reads up to `max` bytes of the client's body for the authorizer and puts what it read back
/// in front of the body for the backend. Returns the bytes and whether the body goes on past
/// them.
async fn read_ahead(body: &mut ClientBody, max: u64) -> Result<(Bytes, bool), ProxyError> {
    use http_body::Body as _;
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let mut read: Vec<Frame<Bytes>> = Vec::new();
    let mut collected = BytesMut::new();
    let mut ended = body.is_end_stream();
    let mut cut = false;
    while !ended && collected.len() < max && read.len() < MAX_BODY_FRAMES {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    let room = max - collected.len();
                    cut |= data.len() > room;
                    collected.extend_from_slice(&data[..data.len().min(room)]);
                }
                read.push(frame);
                ended = body.is_end_stream();
            }
            Some(Err(e)) => return Err(ProxyError::ClientBody(e.to_string())),
            None => ended = true,
        }
    }
    let partial = cut || !ended;
    body.replay(read);
    Ok((collected.freeze(), partial))
}
