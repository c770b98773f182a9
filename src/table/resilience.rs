//! How the proxy keeps answering while backends fail: a rule's retry policy and session
//! persistence (from HTTPRoute `retry` and `sessionPersistence`), and a Service's load-balancing
//! policy. Plain data, compiled at table build time; the state they act on (in-flight counts,
//! ejections, budgets) lives in the proxy, keyed by endpoint and Service, shared across tables.

use std::time::Duration;

use serde::Serialize;

/// `rules[].retry`: which responses are retried, how often and after how long.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// Response status codes that are retried (any 5xx the route lists, and 400-599 in general).
    pub codes: Vec<u16>,
    /// Retries after the first attempt (`retry.attempts`): at most `1 + attempts` tries.
    pub attempts: u32,
    /// Minimum wait before a retry (`retry.backoff`); doubles with each retry.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::filters::ser_ms"
    )]
    pub backoff: Option<Duration>,
    /// The retries' time budget (an Ingress's `proxy-next-upstream-timeout`): no retry starts
    /// later than this after the first attempt began. Gateway API's `retry` has no such field.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::filters::ser_ms"
    )]
    pub within: Option<Duration>,
}

impl RetryPolicy {
    /// Whether a response with `status` is to be retried under this policy.
    pub fn retries_status(&self, status: u16) -> bool {
        self.codes.contains(&status)
    }
}

/// `rules[].sessionPersistence`: a client carrying the session token stays on the endpoint that
/// served it while that endpoint is ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionPersistence {
    /// Cookie or header name carrying the session token.
    pub name: String,
    pub kind: SessionKind,
    /// `cookieConfig.lifetimeType`: a `Permanent` cookie carries `Max-Age`.
    pub permanent: bool,
    /// The session ends this long after it started, however busy it is.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::filters::ser_ms"
    )]
    pub absolute_timeout: Option<Duration>,
    /// The session ends after this long without a request.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::filters::ser_ms"
    )]
    pub idle_timeout: Option<Duration>,
    /// The cookie's attributes besides its lifetime (an Ingress's `session-cookie-path`,
    /// `-samesite`, `-secure`; Gateway API's `sessionPersistence` has no such fields).
    #[serde(skip_serializing_if = "CookieAttributes::is_default")]
    pub cookie: CookieAttributes,
}

/// Attributes of a session cookie: `Path` (`/` unless set), `SameSite`, `Secure`. Every
/// session cookie is `HttpOnly`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CookieAttributes {
    /// `Path`; `/` when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_site: Option<SameSite>,
    /// `Secure`: browsers send the cookie over HTTPS only.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub secure: bool,
}

impl CookieAttributes {
    /// True for the attributes a Gateway API session cookie has (`Path=/`, nothing else).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// A cookie's `SameSite` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SameSite {
    None,
    Lax,
    Strict,
}

impl SameSite {
    /// The attribute's value as a `Set-Cookie` header spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::Lax => "Lax",
            Self::Strict => "Strict",
        }
    }
}

/// Where the session token travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SessionKind {
    Cookie,
    Header,
}

/// How a request picks among a Service's endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Balance {
    /// Power of two choices: of two random endpoints, the one with fewer requests in flight.
    #[default]
    LeastRequest,
    /// Each endpoint in turn.
    RoundRobin,
    /// A hash of the request's key picks a point on a ring of endpoints: a key keeps its endpoint,
    /// and adding or removing one endpoint moves about 1/N of the keys.
    ConsistentHash { on: HashOn },
}

impl Balance {
    /// True for the default, which `/debug/config` leaves out.
    pub fn is_default(&self) -> bool {
        *self == Self::LeastRequest
    }
}

/// What a consistent hash is computed over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "source", content = "name", rename_all = "camelCase")]
pub enum HashOn {
    /// The value of a request header (lower-case name).
    Header(String),
    /// The value of a request cookie.
    Cookie(String),
    /// The value of a query parameter, as sent (not percent-decoded).
    Query(String),
    /// The client's IP address.
    SourceIp,
    /// The request path as forwarded (not percent-decoded), without the query: nginx's `$uri`.
    Path,
    /// The request path and query as forwarded (not percent-decoded): nginx's `$request_uri`.
    PathAndQuery,
}
