//! The `CORS` filter in compiled form: origin patterns parsed once, header values joined once,
//! and the pure functions that give the CORS response headers of a preflight or of an actual
//! cross-origin request. The proxy only copies the headers these return.

use http::header::{
    ACCESS_CONTROL_ALLOW_CREDENTIALS, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE,
    ACCESS_CONTROL_REQUEST_HEADERS, ACCESS_CONTROL_REQUEST_METHOD, ORIGIN,
};
use http::{HeaderMap, HeaderValue, Method};
use serde::{Serialize, Serializer};

/// One `allowOrigins` entry: `*`, or `scheme://host[:port]` where the host may be `*` or start
/// with `*.` (a greedy match of any labels to the left).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OriginPattern {
    /// `*`: every origin.
    Any,
    Origin {
        scheme: String,
        host: HostPattern,
        /// The explicit port, else the scheme's default (80 or 443).
        port: u16,
    },
}

/// The host part of an origin pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// `*`: any host.
    Any,
    /// `*.example.com`, stored as `.example.com`: any host ending with it.
    Suffix(String),
    /// A lower-cased host name or address.
    Exact(String),
}

/// Splits `scheme://host[:port]` into its lower-cased parts, defaulting the port per scheme.
fn split_origin(origin: &str) -> Option<(String, &str, u16)> {
    let (scheme, rest) = origin.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    if rest.is_empty() || rest.contains('/') {
        return None;
    }
    // A bracketed IPv6 host keeps its colons.
    let (host, port) = match rest.rfind(':') {
        Some(i) if !rest[i..].contains(']') => (&rest[..i], rest[i + 1..].parse().ok()?),
        _ => (rest, default_port),
    };
    (!host.is_empty()).then_some((scheme, host, port))
}

impl OriginPattern {
    /// Parses an `allowOrigins` entry; `None` when it is not a valid pattern.
    pub fn parse(pattern: &str) -> Option<Self> {
        if pattern == "*" {
            return Some(Self::Any);
        }
        let (scheme, host, port) = split_origin(pattern)?;
        let host = host.to_ascii_lowercase();
        let host = if host == "*" {
            HostPattern::Any
        } else if let Some(suffix) = host.strip_prefix('*') {
            if !suffix.starts_with('.') || suffix.contains('*') {
                return None;
            }
            HostPattern::Suffix(suffix.to_owned())
        } else if host.contains('*') {
            return None;
        } else {
            HostPattern::Exact(host)
        };
        Some(Self::Origin { scheme, host, port })
    }

    /// Whether the request's `Origin` value is allowed by this pattern.
    pub fn matches(&self, origin: &str) -> bool {
        let Self::Origin { scheme, host, port } = self else {
            return true;
        };
        let Some((o_scheme, o_host, o_port)) = split_origin(origin) else {
            return false;
        };
        if o_scheme != *scheme || o_port != *port {
            return false;
        }
        let o_host = o_host.to_ascii_lowercase();
        match host {
            HostPattern::Any => true,
            HostPattern::Suffix(s) => o_host.len() > s.len() && o_host.ends_with(s.as_str()),
            HostPattern::Exact(h) => o_host == *h,
        }
    }
}

impl std::fmt::Display for OriginPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Any => f.write_str("*"),
            Self::Origin { scheme, host, port } => {
                let host = match host {
                    HostPattern::Any => "*".to_owned(),
                    HostPattern::Suffix(s) => format!("*{s}"),
                    HostPattern::Exact(h) => h.clone(),
                };
                write!(f, "{scheme}://{host}:{port}")
            }
        }
    }
}

impl Serialize for OriginPattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `allowMethods`, `allowHeaders` or `exposeHeaders`: the wildcard, or the names joined with
/// `", "` once, at build time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorsList {
    Any,
    List(HeaderValue),
}

impl CorsList {
    /// `None` for an empty list; `Err` when a name cannot be a header value.
    pub fn new(items: &[String]) -> Result<Option<Self>, http::header::InvalidHeaderValue> {
        if items.is_empty() {
            return Ok(None);
        }
        if items.iter().any(|i| i == "*") {
            return Ok(Some(Self::Any));
        }
        HeaderValue::from_str(&items.join(", ")).map(|v| Some(Self::List(v)))
    }
}

impl Serialize for CorsList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Any => s.serialize_str("*"),
            Self::List(v) => s.serialize_str(&String::from_utf8_lossy(v.as_bytes())),
        }
    }
}

/// The compiled `CORS` filter.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cors {
    pub allow_origins: Vec<OriginPattern>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_methods: Option<CorsList>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_headers: Option<CorsList>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expose_headers: Option<CorsList>,
    /// `Access-Control-Max-Age` in seconds (the spec's default is 5).
    pub max_age: u32,
    pub allow_credentials: bool,
}

impl Cors {
    /// A CORS preflight: `OPTIONS` with `Origin` and `Access-Control-Request-Method`.
    pub fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
        method == Method::OPTIONS
            && headers.contains_key(ORIGIN)
            && headers.contains_key(ACCESS_CONTROL_REQUEST_METHOD)
    }

    /// The `Origin` of the request when the filter allows it.
    fn allowed_origin<'h>(&self, req: &'h HeaderMap) -> Option<&'h HeaderValue> {
        let origin = req.get(ORIGIN)?;
        let text = origin.to_str().ok()?;
        self.allow_origins
            .iter()
            .any(|p| p.matches(text))
            .then_some(origin)
    }

    /// `Access-Control-Allow-Origin` and `-Allow-Credentials`, shared by both answers.
    fn origin_headers(&self, origin: &HeaderValue, out: &mut HeaderMap) {
        let any = self.allow_origins.contains(&OriginPattern::Any);
        let value = if any && !self.allow_credentials {
            HeaderValue::from_static("*")
        } else {
            origin.clone()
        };
        out.insert(ACCESS_CONTROL_ALLOW_ORIGIN, value);
        if self.allow_credentials {
            out.insert(
                ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
    }

    /// The value for a list: the wildcard is echoed back as the request's own value when
    /// credentials are allowed (the spec forbids `*` then), else sent as `*`.
    fn list_value(&self, list: &CorsList, requested: Option<&HeaderValue>) -> Option<HeaderValue> {
        match list {
            CorsList::List(v) => Some(v.clone()),
            CorsList::Any if self.allow_credentials => requested.cloned(),
            CorsList::Any => Some(HeaderValue::from_static("*")),
        }
    }

    /// Headers of the proxy's own answer to a preflight; empty when the origin is not allowed.
    pub fn preflight_headers(&self, req: &HeaderMap) -> HeaderMap {
        let mut out = HeaderMap::new();
        let Some(origin) = self.allowed_origin(req) else {
            return out;
        };
        self.origin_headers(origin, &mut out);
        let method = req.get(ACCESS_CONTROL_REQUEST_METHOD);
        if let (Some(list), Some(_)) = (&self.allow_methods, method) {
            if let Some(v) = self.list_value(list, method) {
                out.insert(ACCESS_CONTROL_ALLOW_METHODS, v);
            }
        }
        let headers = req.get(ACCESS_CONTROL_REQUEST_HEADERS);
        if let (Some(list), Some(_)) = (&self.allow_headers, headers) {
            if let Some(v) = self.list_value(list, headers) {
                out.insert(ACCESS_CONTROL_ALLOW_HEADERS, v);
            }
        }
        self.expose(&mut out);
        out.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from(self.max_age));
        out
    }

    /// Headers added to the backend's response to a cross-origin request; empty when the
    /// request has no `Origin` or it is not allowed.
    pub fn response_headers(&self, req: &HeaderMap) -> HeaderMap {
        let mut out = HeaderMap::new();
        if let Some(origin) = self.allowed_origin(req) {
            self.origin_headers(origin, &mut out);
            self.expose(&mut out);
        }
        out
    }

    fn expose(&self, out: &mut HeaderMap) {
        match &self.expose_headers {
            Some(CorsList::List(v)) => {
                out.insert(ACCESS_CONTROL_EXPOSE_HEADERS, v.clone());
            }
            Some(CorsList::Any) if !self.allow_credentials => {
                out.insert(ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("*"));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(p: &str) -> OriginPattern {
        OriginPattern::parse(p).unwrap()
    }

    #[test]
    fn origin_patterns() {
        assert!(pattern("https://www.foo.com").matches("https://www.foo.com"));
        assert!(pattern("https://www.foo.com").matches("https://WWW.foo.com:443"));
        assert!(!pattern("https://www.foo.com").matches("http://www.foo.com"));
        assert!(!pattern("https://www.foo.com").matches("https://www.foo.com:8443"));
        let wild = pattern("https://*.bar.com");
        assert!(wild.matches("https://www.bar.com"));
        assert!(wild.matches("https://a.b.bar.com"));
        assert!(!wild.matches("https://bar.com"));
        assert!(!wild.matches("https://foobar.com"));
        assert!(pattern("http://*:8080").matches("http://x.y:8080"));
        assert!(pattern("*").matches("null"));
        assert!(OriginPattern::parse("ftp://x").is_none());
        assert!(OriginPattern::parse("https://a.*.com").is_none());
        assert!(OriginPattern::parse("https://x.com/path").is_none());
    }

    fn cors(credentials: bool, methods: &[&str], headers: &[&str]) -> Cors {
        let list = |v: &[&str]| CorsList::new(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        Cors {
            allow_origins: vec![pattern("https://www.foo.com"), pattern("https://*.bar.com")],
            allow_methods: list(methods).unwrap(),
            allow_headers: list(headers).unwrap(),
            expose_headers: list(&["x-header-3", "x-header-4"]).unwrap(),
            max_age: 3600,
            allow_credentials: credentials,
        }
    }

    fn req(origin: &str, method: &str, headers: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ORIGIN, HeaderValue::from_str(origin).unwrap());
        h.insert(
            ACCESS_CONTROL_REQUEST_METHOD,
            HeaderValue::from_str(method).unwrap(),
        );
        if let Some(v) = headers {
            h.insert(
                ACCESS_CONTROL_REQUEST_HEADERS,
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn preflight_lists_and_credentials() {
        let c = cors(true, &["GET", "OPTIONS"], &["x-header-1", "x-header-2"]);
        let out = c.preflight_headers(&req("https://api.bar.com", "GET", Some("x-header-1")));
        assert_eq!(out[ACCESS_CONTROL_ALLOW_ORIGIN], "https://api.bar.com");
        assert_eq!(out[ACCESS_CONTROL_ALLOW_METHODS], "GET, OPTIONS");
        assert_eq!(out[ACCESS_CONTROL_ALLOW_HEADERS], "x-header-1, x-header-2");
        assert_eq!(out[ACCESS_CONTROL_EXPOSE_HEADERS], "x-header-3, x-header-4");
        assert_eq!(out[ACCESS_CONTROL_MAX_AGE], "3600");
        assert_eq!(out[ACCESS_CONTROL_ALLOW_CREDENTIALS], "true");
        // No request headers asked for: no Allow-Headers.
        let out = c.preflight_headers(&req("https://www.foo.com", "GET", None));
        assert!(!out.contains_key(ACCESS_CONTROL_ALLOW_HEADERS));
        assert!(c
            .preflight_headers(&req("https://evil.com", "GET", None))
            .is_empty());
    }

    #[test]
    fn wildcards_are_echoed_with_credentials() {
        let mut c = cors(true, &["*"], &["*"]);
        c.allow_origins = vec![OriginPattern::Any];
        let out = c.preflight_headers(&req("https://x.org", "PATCH", Some("x-a, x-b")));
        assert_eq!(out[ACCESS_CONTROL_ALLOW_ORIGIN], "https://x.org");
        assert_eq!(out[ACCESS_CONTROL_ALLOW_METHODS], "PATCH");
        assert_eq!(out[ACCESS_CONTROL_ALLOW_HEADERS], "x-a, x-b");
        c.allow_credentials = false;
        let out = c.preflight_headers(&req("https://x.org", "PATCH", Some("x-a")));
        assert_eq!(out[ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert_eq!(out[ACCESS_CONTROL_ALLOW_METHODS], "*");
        assert_eq!(out[ACCESS_CONTROL_ALLOW_HEADERS], "*");
        assert!(!out.contains_key(ACCESS_CONTROL_ALLOW_CREDENTIALS));
    }

    #[test]
    fn actual_requests_get_origin_and_expose_only() {
        let c = cors(false, &["GET"], &[]);
        let mut h = HeaderMap::new();
        h.insert(ORIGIN, HeaderValue::from_static("https://www.foo.com"));
        let out = c.response_headers(&h);
        assert_eq!(out[ACCESS_CONTROL_ALLOW_ORIGIN], "https://www.foo.com");
        assert_eq!(out[ACCESS_CONTROL_EXPOSE_HEADERS], "x-header-3, x-header-4");
        assert!(!out.contains_key(ACCESS_CONTROL_ALLOW_METHODS));
        assert!(!out.contains_key(ACCESS_CONTROL_MAX_AGE));
        assert!(c.response_headers(&HeaderMap::new()).is_empty());
    }
}
