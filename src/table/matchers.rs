//! Request matchers of HTTPRoute rules (path, method, headers, query parameters), compiled once
//! at table build time so that a request only compares strings and runs prepared regexes.

use http::{HeaderMap, HeaderName, Method};
use serde::{Serialize, Serializer};

use super::grpc::GrpcMatch;

/// The parts of a request that routing reads, borrowed from the request.
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    /// Lower-case host without port (see `request::Authority::routing_name`).
    pub host: &'a str,
    /// Path without the query string.
    pub path: &'a str,
    /// Raw query string without `?`, if any.
    pub query: Option<&'a str>,
    pub method: &'a Method,
    pub headers: &'a HeaderMap,
}

/// All conditions of one `matches[]` entry; every condition must hold.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestMatch {
    pub path: PathMatch,
    /// Boxed, and the conditions below as boxed slices: every rule of every route carries a
    /// match, kept as long as the route, and most matches have none of them.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_method")]
    pub method: Option<Box<Method>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub headers: Box<[HeaderMatch]>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub query: Box<[QueryMatch]>,
    /// Set on every match of a GRPCRoute: the request must be a gRPC call to this service and
    /// method (the path condition only narrows the index lookup). Boxed: every rule carries
    /// a match, few are gRPC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc: Option<Box<GrpcMatch>>,
}

fn ser_method<S: Serializer>(m: &Option<Box<Method>>, s: S) -> Result<S::Ok, S::Error> {
    match m {
        Some(m) => s.serialize_str(m.as_str()),
        None => s.serialize_none(),
    }
}

impl RequestMatch {
    /// Matches every request (the spec's default: `PathPrefix /`).
    pub fn any() -> Self {
        Self {
            path: PathMatch::Prefix("/".into()),
            method: None,
            headers: Box::default(),
            query: Box::default(),
            grpc: None,
        }
    }

    /// True when the request satisfies every condition.
    pub fn matches(&self, req: &RequestView<'_>) -> bool {
        self.path.matches(req.path)
            && self.method.as_deref().is_none_or(|m| m == req.method)
            && self.headers.iter().all(|h| h.matches(req.headers))
            && self.query.iter().all(|q| q.matches(req.query))
            && self
                .grpc
                .as_ref()
                .is_none_or(|g| g.matches(req.path, req.headers))
    }
}

/// A path condition.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", content = "value")]
pub enum PathMatch {
    /// The whole path, byte for byte.
    Exact(String),
    /// Segment-aware prefix, stored without a trailing slash (except `/` itself): `/foo` matches
    /// `/foo`, `/foo/` and `/foo/bar` but not `/foobar`.
    Prefix(String),
    /// Full match of the whole path.
    RegularExpression(Regex),
}

impl PathMatch {
    /// A prefix match with the trailing slash trimmed, as the index keys it.
    pub fn prefix(value: &str) -> Self {
        let trimmed = value.trim_end_matches('/');
        Self::Prefix(if trimmed.is_empty() {
            "/".into()
        } else {
            trimmed.into()
        })
    }

    /// Precedence class: exact before regular expression before prefix.
    pub(crate) fn rank(&self) -> u8 {
        match self {
            Self::Exact(_) => 0,
            Self::RegularExpression(_) => 1,
            Self::Prefix(_) => 2,
        }
    }

    /// Number of characters, the tie-break within a class (longer wins).
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Exact(v) | Self::Prefix(v) => v.len(),
            Self::RegularExpression(r) => r.as_str().len(),
        }
    }

    /// True when `path` satisfies this condition.
    pub fn matches(&self, path: &str) -> bool {
        match self {
            Self::Exact(v) => path == v,
            Self::Prefix(p) => prefix_matches(p, path),
            Self::RegularExpression(r) => r.is_full_match(path),
        }
    }
}

/// Segment-aware prefix test; `prefix` has no trailing slash unless it is `/`.
pub(crate) fn prefix_matches(prefix: &str, path: &str) -> bool {
    if prefix == "/" {
        return path.starts_with('/');
    }
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// A value condition on a header or query parameter.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", content = "value")]
pub enum ValueMatch {
    Exact(String),
    RegularExpression(Regex),
}

impl ValueMatch {
    pub(crate) fn matches(&self, value: &[u8]) -> bool {
        match self {
            Self::Exact(v) => v.as_bytes() == value,
            Self::RegularExpression(r) => {
                std::str::from_utf8(value).is_ok_and(|v| r.is_full_match(v))
            }
        }
    }
}

/// A header condition; names compare case-insensitively, any of a repeated header's values may match.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderMatch {
    #[serde(serialize_with = "ser_header_name")]
    pub name: HeaderName,
    pub value: ValueMatch,
}

fn ser_header_name<S: Serializer>(n: &HeaderName, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(n.as_str())
}

impl HeaderMatch {
    pub(crate) fn matches(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(&self.name)
            .iter()
            .any(|v| self.value.matches(v.as_bytes()))
    }
}

/// A query parameter condition; names compare exactly, any of a repeated parameter's values may match.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryMatch {
    pub name: String,
    pub value: ValueMatch,
}

impl QueryMatch {
    pub(crate) fn matches(&self, query: Option<&str>) -> bool {
        let Some(query) = query else { return false };
        query.split('&').any(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            name == self.name && self.value.matches(value.as_bytes())
        })
    }
}

/// A compiled regular expression that always matches the whole input; serializes as its source.
#[derive(Debug, Clone)]
pub struct Regex {
    source: String,
    full: regex::Regex,
}

/// Compiled size allowed for one route's regular expression (the regex crate's default is
/// 10 MiB): a pattern whose program is larger (`(a{100}){100}`-style repetition) is refused at
/// translation with a status condition instead of costing memory and match time per request.
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;

/// Lazy-DFA cache allowed per compiled expression (the default is 2 MiB).
const REGEX_DFA_LIMIT: usize = 1024 * 1024;

impl Regex {
    /// Compiles `source` anchored at both ends, within `REGEX_SIZE_LIMIT`. Matching time is
    /// linear in the input, which the proxy bounds (`--max-request-target`).
    pub fn new(source: &str) -> Result<Self, regex::Error> {
        let full = regex::RegexBuilder::new(&format!("^(?:{source})$"))
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_DFA_LIMIT)
            .build()?;
        Ok(Self {
            source: source.to_owned(),
            full,
        })
    }

    /// The pattern as written in the route.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// True when the pattern matches all of `s`.
    pub fn is_full_match(&self, s: &str) -> bool {
        self.full.is_match(s)
    }

    /// `template` with each `$1`..`$9` replaced by that capture of the pattern's match of `s`
    /// (empty when the group did not take part, or when the pattern does not match).
    pub fn expand(&self, s: &str, template: &str) -> String {
        let caps = self.full.captures(s);
        expand_captures(template, |n| {
            caps.as_ref().and_then(|c| c.get(n)).map(|m| m.as_str())
        })
    }
}

/// `template` with `$1`..`$9` replaced by `group(n)` (nginx's captures: one digit, so `$10` is
/// `$1` then `0`); any other `$` stays as it is.
pub fn expand_captures<'s>(template: &str, group: impl Fn(usize) -> Option<&'s str>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match after.as_bytes().first() {
            Some(d @ b'1'..=b'9') => {
                out.push_str(group(usize::from(d - b'0')).unwrap_or(""));
                rest = &after[1..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

impl Serialize for Regex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_patterns_are_refused() {
        assert!(Regex::new("/v[0-9]+/[a-z]{1,64}").is_ok());
        let err = Regex::new("((a|b|c){50}){50}").unwrap_err();
        assert!(matches!(err, regex::Error::CompiledTooBig(_)), "{err}");
    }

    #[test]
    fn prefix_is_segment_aware() {
        let p = PathMatch::prefix("/foo/");
        assert!(p.matches("/foo"));
        assert!(p.matches("/foo/"));
        assert!(p.matches("/foo/bar"));
        assert!(!p.matches("/foobar"));
        assert!(!p.matches("/fo"));
        assert!(PathMatch::prefix("/").matches("/anything"));
    }

    #[test]
    fn captures_expand_into_the_template_one_digit_at_a_time() {
        let r = Regex::new("(?i)(?:/api(/|$)(.*)).*").unwrap();
        assert_eq!(r.expand("/API/items/1", "/v2/$2"), "/v2/items/1");
        assert_eq!(r.expand("/api", "/v2/$2"), "/v2/");
        assert_eq!(r.expand("/api/x", "/$2$10$3$"), "/x/0$");
        assert_eq!(r.expand("/other", "/$1"), "/");
        assert_eq!(expand_captures("/a$b", |_| Some("z")), "/a$b");
    }

    #[test]
    fn regex_matches_whole_path_only() {
        let p = PathMatch::RegularExpression(Regex::new("/v[0-9]+").unwrap());
        assert!(p.matches("/v12"));
        assert!(!p.matches("/v12/x"));
    }

    #[test]
    fn query_and_header_values() {
        let q = QueryMatch {
            name: "a".into(),
            value: ValueMatch::Exact("1".into()),
        };
        assert!(q.matches(Some("b=2&a=1")));
        assert!(!q.matches(Some("a=12")));
        assert!(!q.matches(None));
        let mut headers = HeaderMap::new();
        headers.append("x-v", "one".parse().unwrap());
        headers.append("x-v", "two".parse().unwrap());
        let h = HeaderMatch {
            name: HeaderName::from_static("x-v"),
            value: ValueMatch::RegularExpression(Regex::new("t.o").unwrap()),
        };
        assert!(h.matches(&headers));
    }
}
