//! What TrafficPolicies and ProxyConfigs compile to: per-request access controls and limits
//! (on rules and on the virtual hosts of a Gateway listener), per-Service limits, and the
//! settings of a listener socket; and the error pages replacing a backend's error answers.
//! Pure data; the proxy enforces it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use serde::{Serialize, Serializer};

use super::backend_set::ServiceBackend;

/// Request-scoped settings of TrafficPolicies. A rule's own (`RuleFilters::policy`) are merged
/// over its virtual host's (`VirtualHost::policy`, from Gateway and listener targets) one
/// setting at a time: the most specific target that sets a setting decides it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_access: Option<Arc<IpAccess>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<Arc<RateLimit>>,
    /// `concurrencyLimit`: requests of one client address in progress at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_limit: Option<Arc<ConcurrencyLimit>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<Arc<BasicAuth>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt: Option<Arc<JwtAuth>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_request_body: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_response_body: Option<u64>,
    /// `externalAuth`: the authorizer every request must pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_auth: Option<Arc<crate::table::ExternalAuth>>,
    /// `errorPages`: backend answers replaced by another Service's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_pages: Option<Arc<ErrorPages>>,
}

impl RequestPolicy {
    /// `self`'s settings where set, else `fallback`'s: how a rule's policy overrides its host's.
    pub fn over(&self, fallback: &RequestPolicy) -> RequestPolicy {
        RequestPolicy {
            ip_access: self
                .ip_access
                .clone()
                .or_else(|| fallback.ip_access.clone()),
            rate_limit: self
                .rate_limit
                .clone()
                .or_else(|| fallback.rate_limit.clone()),
            concurrency_limit: self
                .concurrency_limit
                .clone()
                .or_else(|| fallback.concurrency_limit.clone()),
            basic_auth: self
                .basic_auth
                .clone()
                .or_else(|| fallback.basic_auth.clone()),
            jwt: self.jwt.clone().or_else(|| fallback.jwt.clone()),
            max_request_body: self.max_request_body.or(fallback.max_request_body),
            max_response_body: self.max_response_body.or(fallback.max_response_body),
            external_auth: self
                .external_auth
                .clone()
                .or_else(|| fallback.external_auth.clone()),
            error_pages: self
                .error_pages
                .clone()
                .or_else(|| fallback.error_pages.clone()),
        }
    }

    /// True when no setting is set.
    pub fn is_empty(&self) -> bool {
        *self == RequestPolicy::default()
    }
}

/// Client address lists. Denied wins over allowed; with a non-empty `allow`, every other
/// address is denied. The client address is the peer's, or the first untrusted hop of
/// `X-Forwarded-For` when the peer is a trusted proxy. On TLS, TCP and UDP sockets the lists
/// are checked against the peer when a connection is accepted or a datagram arrives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IpAccess {
    pub allow: Vec<IpNet>,
    pub deny: Vec<IpNet>,
    /// Set, to the policy's `namespace/name`, when the policy carrying the lists is invalid:
    /// every address is refused until it is fixed (access controls fail closed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refuse_all: Option<String>,
}

impl IpAccess {
    /// The lists of an invalid policy (`namespace/name`): nothing is allowed.
    pub fn refusing_all(policy: String) -> Self {
        Self {
            allow: Vec::new(),
            deny: Vec::new(),
            refuse_all: Some(policy),
        }
    }
}

/// A local token bucket. Buckets are kept by the proxy across tables, keyed by `id` and the
/// request's key value, so a table change does not refill them; a changed rate makes a new id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimit {
    /// `namespace/name` of the policy plus the rate, unique per distinct limit.
    pub id: String,
    /// Tokens added per `per`.
    pub requests: u32,
    #[serde(serialize_with = "super::filters::ser_duration")]
    pub per: Duration,
    /// Bucket size: `requests + burst`.
    pub capacity: u32,
    pub key: RateLimitKey,
}

/// A bound on the requests of one client address in progress at once. The proxy counts them
/// under `id` and the client address, across tables, so a table change does not reset them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrencyLimit {
    /// `namespace/name` of the policy.
    pub id: String,
    /// Requests of one client address allowed at once (at least 1).
    pub per_client: u32,
}

/// What one bucket counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "type", content = "name")]
pub enum RateLimitKey {
    ClientIp,
    Header(String),
    /// One bucket per route (`namespace/name` of the matched route).
    Route,
}

/// HTTP basic authentication.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BasicAuth {
    pub realm: String,
    /// User name to password hash, as in the htpasswd file. Not shown in `/debug/config`.
    #[serde(skip)]
    pub users: BTreeMap<String, PasswordHash>,
    /// What an unknown user is checked against ([`BasicAuth::dummy`]), worked out once here
    /// rather than per request.
    #[serde(skip)]
    dummy: PasswordHash,
}

impl BasicAuth {
    /// A realm and its users, with the dummy hash unknown users are checked against.
    pub fn new(realm: String, users: BTreeMap<String, PasswordHash>) -> Self {
        let dummy = dummy_hash(&users);
        Self {
            realm,
            users,
            dummy,
        }
    }

    /// The hash an unknown user is checked against, so that it costs what a wrong password
    /// costs: bcrypt at the highest cost among the realm's bcrypt hashes when it has any, else
    /// `{SHA}`. Its salt and digest are all zero bits (valid, so the whole cost is paid); no
    /// password matches it, and a match would still be refused.
    pub fn dummy(&self) -> &PasswordHash {
        &self.dummy
    }
}

fn dummy_hash(users: &BTreeMap<String, PasswordHash>) -> PasswordHash {
    let cost = users
        .values()
        .filter_map(|h| match h {
            // Only well-formed hashes count: a malformed one is refused by bcrypt at once, and
            // its digits must not make every unknown user pay a cost no user pays.
            PasswordHash::Bcrypt(h) if h.len() == 60 && h.as_bytes().get(6) == Some(&b'$') => h
                .get(4..6)
                .and_then(|c| c.parse::<u32>().ok())
                .filter(|c| (4..=31).contains(c)),
            PasswordHash::Bcrypt(_) => None,
            PasswordHash::Sha1(_) => None,
        })
        .max();
    match cost {
        Some(cost) => PasswordHash::Bcrypt(format!("$2b${cost:02}${}", ".".repeat(53))),
        None => PasswordHash::Sha1([0; 20]),
    }
}

/// An htpasswd password hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordHash {
    /// `$2a$`, `$2b$`, `$2y$` bcrypt.
    Bcrypt(String),
    /// `{SHA}` + base64 of the SHA-1 digest.
    Sha1([u8; 20]),
}

/// JWT validation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JwtAuth {
    pub providers: Vec<JwtIssuer>,
    /// Requests without a token pass.
    pub optional: bool,
}

/// One accepted issuer with its keys.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JwtIssuer {
    pub name: String,
    pub issuer: String,
    pub audiences: Vec<String>,
    /// The JWKS document (`{"keys": [...]}`), parsed; not shown in `/debug/config`.
    #[serde(skip)]
    pub jwks: serde_json::Value,
    /// (claim, header) pairs copied to the request.
    pub claims_to_headers: Vec<(String, String)>,
}

/// Per-Service settings of TrafficPolicies targeting the Service; what is not set keeps the
/// command line's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceLimits {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pending_requests: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outlier_consecutive_errors: Option<u32>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::table::filters::ser_ms"
    )]
    pub outlier_base_ejection: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outlier_max_ejection_percent: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_budget_percent: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_budget_min: Option<u32>,
}

/// Settings of a listener socket from the ProxyConfig of its (first) Gateway; what is not set
/// keeps the command line's value.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerSettings {
    /// `namespace/name` of the ProxyConfig.
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_log: Option<AccessLog>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_request_header_bytes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_request_body_bytes: Option<u64>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::table::filters::ser_ms"
    )]
    pub handshake_timeout: Option<Duration>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::table::filters::ser_ms"
    )]
    pub header_read_timeout: Option<Duration>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::table::filters::ser_ms"
    )]
    pub body_idle_timeout: Option<Duration>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::table::filters::ser_ms"
    )]
    pub idle_timeout: Option<Duration>,
    /// TCP and TLS streams with no byte either way for this long are closed.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::table::filters::ser_ms"
    )]
    pub tcp_idle_timeout: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http2_max_concurrent_streams: Option<u32>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::table::filters::ser_ms"
    )]
    pub http2_keepalive_interval: Option<Duration>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::table::filters::ser_ms"
    )]
    pub http2_keepalive_timeout: Option<Duration>,
    /// Trusted proxy CIDRs; `None` keeps the command line's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trusted_proxies: Option<Vec<IpNet>>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::table::filters::ser_ms"
    )]
    pub drain: Option<Duration>,
}

/// Access log format and fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessLog {
    pub format: AccessLogFormat,
    /// Field names (camelCase, as in the ProxyConfig), in order; empty for all.
    pub fields: Vec<String>,
}

/// Access log line formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AccessLogFormat {
    Json,
    Text,
    Off,
}

/// Backend answers replaced by another Service's (a TrafficPolicy's `errorPages`, ingress-nginx's
/// `custom-http-errors` with `default-backend`); `proxy::upstream::error_pages` sends the
/// error request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorPages {
    /// The backend statuses replaced, sorted (400 to 599).
    pub codes: Vec<u16>,
    /// The Service port asked for the page, resolved like a backendRef (it follows the
    /// EndpointSlices).
    #[serde(serialize_with = "ser_error_page_service")]
    pub backend: Arc<ServiceBackend>,
    /// `namespace/name` of the policy it comes from.
    pub source: String,
}

impl ErrorPages {
    /// Whether a backend answer of `status` is replaced.
    pub fn intercepts(&self, status: u16) -> bool {
        self.codes.binary_search(&status).is_ok()
    }
}

fn ser_error_page_service<S: Serializer>(b: &Arc<ServiceBackend>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&b.service)
}
