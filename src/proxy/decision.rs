//! The access log's `decision` field: what the proxy did with a request, as one stable word a
//! log query can group by. `proxied` and `answered` for requests served; for the ones the proxy
//! refused or could not serve, a word per [`ProxyError`] kind, among them the TrafficPolicy's
//! decisions (`ip_denied`, `rate_limited`, `unauthorized`, ...).

use crate::proxy::error::ProxyError;

/// The request went to a backend and its answer was passed on.
pub const PROXIED: &str = "proxied";
/// The rule answered without a backend (a redirect, a CORS preflight, `OPTIONS *`).
pub const ANSWERED: &str = "answered";
/// The backend's answer was one of the rule's error statuses; the error page Service's
/// answer went to the client instead.
pub const ERROR_PAGE: &str = "error_page";
/// The client went away (closed its connection, reset its stream) before the response head was
/// ready; the request was cancelled, its upstream exchange with it.
pub const CLIENT_CLOSED: &str = "client_closed";
/// An external authorizer denied the request: its answer went to the client.
pub const EXT_AUTH_DENIED: &str = "ext_auth_denied";

impl ProxyError {
    /// The request's `decision` when the proxy answered with this error.
    pub fn decision(&self) -> &'static str {
        match self {
            Self::MissingHost => "missing_host",
            Self::DuplicateHost => "duplicate_host",
            Self::BadHost(_) => "bad_host",
            Self::HostMismatch => "host_mismatch",
            Self::BadPath(_) => "bad_path",
            Self::AsteriskForm | Self::BadUri(_) => "bad_target",
            Self::BadFraming(_) => "bad_framing",
            Self::UnsupportedTransferCoding(_) => "unsupported_transfer_coding",
            Self::ClientBody(_) => "client_body_error",
            Self::BadRedirect => "bad_redirect",
            Self::NoListener(_) => "no_listener",
            Self::Misdirected => "misdirected",
            Self::NoRoute => "no_route",
            Self::InvalidBackend { .. } => "invalid_backend",
            Self::NoBackend => "no_backend",
            Self::NoEndpoints { .. } => "no_endpoints",
            Self::Overloaded { .. } => "overloaded",
            Self::BadUpstreamRequest(_) => "bad_upstream_request",
            Self::ConnectTimeout { .. } => "connect_timeout",
            Self::ConnectIo { .. } => "connect_failed",
            Self::UpstreamTls { .. } => "upstream_tls_failed",
            Self::BackendTlsUnusable { .. } => "backend_tls_unusable",
            Self::UpstreamHttp { .. } | Self::UpstreamH1 { .. } => "upstream_failed",
            Self::BodyTimeout(_) => "body_timeout",
            Self::BodyTooSlow(_) => "body_too_slow",
            Self::TargetTooLong(_) => "target_too_long",
            Self::IpDenied(_) => "ip_denied",
            Self::PolicyInvalid(_) => "policy_invalid",
            Self::RateLimited { .. } => "rate_limited",
            Self::ConcurrencyLimited(_) => "concurrency_limited",
            Self::Unauthorized { .. } => "unauthorized",
            Self::DuplicateAuthorization => "duplicate_authorization",
            Self::AuthBusy { .. } => "auth_busy",
            Self::HeadersTooLarge(_) => "headers_too_large",
            Self::RequestBodyTooLarge(_) => "body_too_large",
            Self::ResponseBodyTooLarge(_) => "response_too_large",
            Self::Timeout { .. } => "timeout",
            Self::ExternalAuth { .. } => "ext_auth_failed",
            Self::ErrorPage { .. } => "error_page_failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn policy_refusals_have_their_own_words() {
        let denied = ProxyError::IpDenied("192.0.2.1".parse().unwrap());
        assert_eq!(denied.decision(), "ip_denied");
        let limited = ProxyError::RateLimited {
            retry_after: Duration::from_secs(1),
        };
        assert_eq!(limited.decision(), "rate_limited");
        let busy = ProxyError::ConcurrencyLimited(2);
        assert_eq!(busy.decision(), "concurrency_limited");
        // A 503 the client caused, not the backend.
        assert_eq!(busy.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(busy.fault(), crate::proxy::error::Fault::Client);
        assert_eq!(ProxyError::NoRoute.decision(), "no_route");
    }
}
