//! The data-plane model: an immutable, fully resolved route table built by `translate` and read by
//! `proxy` on every request. Pure: no I/O, no tokio, no kube; lookups are hash probes and short scans.

mod backend_set;
mod backend_tls;
mod client_auth;
mod cors;
pub mod explain;
mod ext_auth;
mod filters;
mod grpc;
mod host;
pub mod hostname;
mod l4;
mod matchers;
mod model;
mod path;
mod policy;
mod precedence;
mod resilience;
mod rule_filters;
mod shards;
mod source;
mod tls;
mod x509;

pub use backend_set::{
    BackendSet, BackendTarget, ServiceBackend, ServiceKey, UpstreamProtocol, WeightedBackend,
};
pub use backend_tls::{
    BackendIdentity, BackendTls, BackendTlsEntry, BackendTlsError, SubjectAltName,
};
pub use client_auth::{CaBundle, CaBundleError, ClientValidation, ValidationMode};
pub use cors::{Cors, CorsList, HostPattern, OriginPattern};
pub use ext_auth::{
    AuthBackend, AuthPath, AuthProtocol, ExternalAuth, FailureMode, HeaderSelection,
    DEFAULT_STATUS_ON_ERROR, DEFAULT_TIMEOUT, MAX_AUTH_RESPONSE_BODY,
};
pub use filters::{
    Fraction, HeaderModifier, Mirror, PathModifier, Redirect, RedirectTarget, Scheme, Timeouts,
    UrlRewrite,
};
pub use grpc::{is_grpc, split_path, GrpcMatch};
pub use host::HostIndex;
pub use l4::{L4Route, L4Routes, SniListener, SniRoutes};
pub use matchers::{
    HeaderMatch, PathMatch, QueryMatch, Regex, RequestMatch, RequestView, ValueMatch,
};
pub use model::{Attached, ListenerTable, RouteRef, RouteRule, RouteTable, VirtualHost};
pub use path::PathIndex;
pub use policy::{
    AccessLog, AccessLogFormat, BasicAuth, ConcurrencyLimit, ErrorPages, IpAccess, JwtAuth,
    JwtIssuer, ListenerSettings, PasswordHash, RateLimit, RateLimitKey, RequestPolicy,
    ServiceLimits,
};
pub use resilience::{
    Balance, CookieAttributes, HashOn, RetryPolicy, SameSite, SessionKind, SessionPersistence,
};
pub use rule_filters::RuleFilters;
pub use source::SocketSource;
pub use tls::{Certificate, CertificateError, ServedCertificates, TlsListener, TlsListeners};
