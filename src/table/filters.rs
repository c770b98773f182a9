//! HTTPRoute filters in compiled form, with the pure functions that apply them: header edits,
//! path rewrites and redirect locations (`redirect`). The proxy calls these; it computes nothing
//! itself.

mod redirect;

use std::sync::Arc;
use std::time::Duration;

use http::uri::{InvalidUri, PathAndQuery};
use http::{HeaderMap, HeaderName, HeaderValue};
use serde::{Serialize, Serializer};

use super::backend_set::ServiceBackend;
use super::matchers::PathMatch;

pub use redirect::{Redirect, RedirectTarget, Scheme};

/// `RequestHeaderModifier` / `ResponseHeaderModifier`: set, then add, then remove.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderModifier {
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "ser_pairs")]
    pub set: Vec<(HeaderName, HeaderValue)>,
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "ser_pairs")]
    pub add: Vec<(HeaderName, HeaderValue)>,
    /// Added (after `add`) to responses of status 2xx and 3xx only: an Ingress's nginx
    /// `add_header` without `always`. Empty for every Gateway API filter.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "ser_pairs")]
    pub add_on_success: Vec<(HeaderName, HeaderValue)>,
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "ser_names")]
    pub remove: Vec<HeaderName>,
}

fn ser_pairs<S: Serializer>(pairs: &[(HeaderName, HeaderValue)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(
        pairs
            .iter()
            .map(|(n, v)| (n.as_str(), String::from_utf8_lossy(v.as_bytes()))),
    )
}

fn ser_names<S: Serializer>(names: &[HeaderName], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(names.iter().map(HeaderName::as_str))
}

impl HeaderModifier {
    /// Applies the edits in spec order: `set` replaces, `add` appends, `remove` deletes.
    pub fn apply(&self, headers: &mut HeaderMap) {
        for (name, value) in &self.set {
            headers.insert(name.clone(), value.clone());
        }
        for (name, value) in &self.add {
            headers.append(name.clone(), value.clone());
        }
        for name in &self.remove {
            headers.remove(name);
        }
    }

    /// [`HeaderModifier::apply`] on a response of `status`, with `add_on_success` appended
    /// when the status is 2xx or 3xx (before `remove`, which names other headers).
    pub fn apply_to_response(&self, status: http::StatusCode, headers: &mut HeaderMap) {
        if self.add_on_success.is_empty() {
            self.apply(headers);
            return;
        }
        for (name, value) in &self.set {
            headers.insert(name.clone(), value.clone());
        }
        let success = status.is_success() || status.is_redirection();
        let on_success = self.add_on_success.iter().filter(|_| success);
        for (name, value) in self.add.iter().chain(on_success) {
            headers.append(name.clone(), value.clone());
        }
        for name in &self.remove {
            headers.remove(name);
        }
    }

    /// Moves the `add` entries named in `names` to `add_on_success`.
    pub fn add_on_success_only(&mut self, names: &[String]) {
        let (moved, kept) = std::mem::take(&mut self.add)
            .into_iter()
            .partition(|(n, _)| names.iter().any(|w| n.as_str().eq_ignore_ascii_case(w)));
        self.add = kept;
        self.add_on_success.extend::<Vec<_>>(moved);
    }
}

/// How a redirect or rewrite changes the path.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", content = "value")]
pub enum PathModifier {
    ReplaceFullPath(String),
    /// Replaces the part matched by the rule's `PathPrefix` (only valid with one).
    ReplacePrefixMatch(String),
    /// Replaces the whole path with a template whose `$1`..`$9` are the captures of the rule's
    /// `RegularExpression` path (an Ingress's `rewrite-target`, as nginx's `rewrite`).
    ReplaceCaptures(String),
}

impl PathModifier {
    /// The new path for `path` (no query), given the prefix the rule matched.
    pub fn apply(&self, matched: &PathMatch, path: &str) -> String {
        match self {
            Self::ReplaceFullPath(p) => p.clone(),
            Self::ReplacePrefixMatch(replacement) => {
                let PathMatch::Prefix(prefix) = matched else {
                    return path.to_owned();
                };
                // The spec's table: the matched prefix (stored without its trailing slash) is cut,
                // the rest keeps its leading slash, the replacement loses its trailing one.
                let rest = if prefix == "/" {
                    path
                } else {
                    path.get(prefix.len()..).unwrap_or("")
                };
                let out = format!("{}{rest}", replacement.trim_end_matches('/'));
                if out.is_empty() {
                    "/".to_owned()
                } else {
                    out
                }
            }
            Self::ReplaceCaptures(template) => match matched {
                PathMatch::RegularExpression(r) => r.expand(path, template),
                _ => super::matchers::expand_captures(template, |_| None),
            },
        }
    }
}

/// `URLRewrite`: hostname and path of the request sent upstream.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UrlRewrite {
    /// The `Host` sent upstream, a validated name compiled into its header form.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_value")]
    pub hostname: Option<HeaderValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathModifier>,
}

impl UrlRewrite {
    /// Applies the rewrite to a request's target and host, as the proxy sends them upstream:
    /// `target` is the canonical path (the one the rule `matched`) with the query as sent, and
    /// `host` the validated request host. The path is replaced as configured and the query kept;
    /// the host becomes the configured hostname when there is one. Fails only when the new
    /// target is not a valid path-and-query, which validated configuration never produces.
    pub fn apply(
        &self,
        matched: &PathMatch,
        target: PathAndQuery,
        host: Option<HeaderValue>,
    ) -> Result<(PathAndQuery, Option<HeaderValue>), InvalidUri> {
        let host = self.hostname.clone().or(host);
        let Some(modifier) = &self.path else {
            return Ok((target, host));
        };
        let path = modifier.apply(matched, target.path());
        let full = match target.query() {
            Some(q) => format!("{path}?{q}"),
            None => path,
        };
        Ok((PathAndQuery::try_from(full)?, host))
    }
}

fn ser_value<S: Serializer>(value: &Option<HeaderValue>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => s.serialize_str(&String::from_utf8_lossy(v.as_bytes())),
        None => s.serialize_none(),
    }
}

/// `RequestMirror`: a resolved Service that gets a copy of a share of the requests; its
/// responses are discarded.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mirror {
    #[serde(serialize_with = "ser_service")]
    pub backend: Arc<ServiceBackend>,
    /// The share of requests mirrored (`percent` or `fraction`); `None` mirrors every request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fraction: Option<Fraction>,
}

fn ser_service<S: Serializer>(b: &Arc<ServiceBackend>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&b.service)
}

/// `numerator / denominator` of the requests (`percent: 20` is `20 / 100`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fraction {
    pub numerator: u32,
    pub denominator: u32,
}

impl Mirror {
    /// Whether this request is mirrored, given a uniform random number.
    pub fn sampled(&self, random: u64) -> bool {
        match self.fraction {
            None => true,
            Some(f) if f.denominator == 0 || f.numerator == 0 => false,
            Some(f) if f.numerator >= f.denominator => true,
            Some(f) => random % u64::from(f.denominator) < u64::from(f.numerator),
        }
    }
}

/// `rules[].timeouts`: `None` means no timeout (unset, or the zero duration).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeouts {
    /// From the start of the request to the response head (504 when exceeded).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_ms")]
    pub request: Option<Duration>,
    /// From sending to one backend to its response head (504 when exceeded).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_ms")]
    pub backend_request: Option<Duration>,
}

/// An optional duration as `"<n>ms"`, how `/debug/config` shows every duration.
pub(crate) fn ser_ms<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_duration(d, s),
        None => s.serialize_none(),
    }
}

/// A duration as `"<n>ms"` (see [`ser_ms`]).
pub(crate) fn ser_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{}ms", d.as_millis()))
}

impl Timeouts {
    /// True when neither timeout is set.
    pub fn is_empty(&self) -> bool {
        self.request.is_none() && self.backend_request.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(p: &str) -> PathMatch {
        PathMatch::prefix(p)
    }

    #[test]
    fn replace_prefix_match() {
        let m = PathModifier::ReplacePrefixMatch("/xxx".into());
        assert_eq!(
            m.apply(&prefix("/prefix/one"), "/prefix/one/three"),
            "/xxx/three"
        );
        assert_eq!(m.apply(&prefix("/prefix/one"), "/prefix/one"), "/xxx");
        assert_eq!(m.apply(&prefix("/prefix/one"), "/prefix/one/"), "/xxx/");
        let root = PathModifier::ReplacePrefixMatch("/".into());
        assert_eq!(root.apply(&prefix("/strip"), "/strip/a/b"), "/a/b");
        assert_eq!(root.apply(&prefix("/strip"), "/strip"), "/");
        let to = PathModifier::ReplacePrefixMatch("/one".into());
        assert_eq!(to.apply(&prefix("/"), "/a"), "/one/a");
    }

    #[test]
    fn url_rewrite_keeps_the_query_and_picks_the_host() {
        let target = PathAndQuery::from_static("/prefix/a?q=1&r=%20");
        let host = Some(HeaderValue::from_static("req.example"));
        let rewrite = UrlRewrite {
            hostname: Some(HeaderValue::from_static("up.example")),
            path: Some(PathModifier::ReplacePrefixMatch("/new/".into())),
        };
        let (out, h) = rewrite
            .apply(&prefix("/prefix"), target.clone(), host.clone())
            .unwrap();
        assert_eq!(out.as_str(), "/new/a?q=1&r=%20");
        assert_eq!(
            h.as_ref().map(HeaderValue::as_bytes),
            Some(&b"up.example"[..])
        );
        let host_only = UrlRewrite {
            hostname: None,
            path: None,
        };
        let (out, h) = host_only.apply(&prefix("/"), target, host).unwrap();
        assert_eq!(out.as_str(), "/prefix/a?q=1&r=%20");
        assert_eq!(
            h.as_ref().map(HeaderValue::as_bytes),
            Some(&b"req.example"[..])
        );
    }

    #[test]
    fn mirror_sampling_follows_the_fraction() {
        let backend = Arc::new(ServiceBackend {
            service: super::super::backend_set::ServiceKey {
                namespace: "d".into(),
                name: "m".into(),
                port: 80,
            },
            endpoints: vec![],
            terminating: vec![],
            protocol: Default::default(),
            balance: Default::default(),
            limits: None,
        });
        let m = |fraction| Mirror {
            backend: backend.clone(),
            fraction,
        };
        let count = |m: &Mirror| (0..100).filter(|r| m.sampled(*r)).count();
        assert_eq!(count(&m(None)), 100);
        let f = |numerator, denominator| {
            Some(Fraction {
                numerator,
                denominator,
            })
        };
        assert_eq!(count(&m(f(20, 100))), 20);
        assert_eq!(count(&m(f(25, 50))), 50);
        assert_eq!(count(&m(f(0, 100))), 0);
        assert_eq!(count(&m(f(7, 7))), 100);
    }

    #[test]
    fn header_modifier_order() {
        let mut h = HeaderMap::new();
        h.insert("a", HeaderValue::from_static("old"));
        h.insert("gone", HeaderValue::from_static("x"));
        let m = HeaderModifier {
            set: vec![(
                HeaderName::from_static("a"),
                HeaderValue::from_static("new"),
            )],
            add: vec![(HeaderName::from_static("b"), HeaderValue::from_static("1"))],
            remove: vec![HeaderName::from_static("gone")],
            add_on_success: vec![],
        };
        m.apply(&mut h);
        assert_eq!(h["a"], "new");
        assert_eq!(h["b"], "1");
        assert!(!h.contains_key("gone"));
    }

    #[test]
    fn headers_added_on_success_only_skip_4xx_and_5xx() {
        use http::StatusCode;
        let pair = |n: &'static str, v: &'static str| {
            (HeaderName::from_static(n), HeaderValue::from_static(v))
        };
        let mut m = HeaderModifier {
            add: vec![pair("x-ok", "1"), pair("x-all", "2")],
            ..Default::default()
        };
        m.add_on_success_only(&["X-Ok".to_owned()]);
        assert_eq!(m.add, [pair("x-all", "2")]);
        assert_eq!(m.add_on_success, [pair("x-ok", "1")]);
        for (status, ok) in [
            (StatusCode::OK, true),
            (StatusCode::NO_CONTENT, true),
            (StatusCode::FOUND, true),
            (StatusCode::NOT_MODIFIED, true),
            (StatusCode::NOT_FOUND, false),
            (StatusCode::INTERNAL_SERVER_ERROR, false),
            (StatusCode::SWITCHING_PROTOCOLS, false),
        ] {
            let mut h = HeaderMap::new();
            m.apply_to_response(status, &mut h);
            assert_eq!(h.contains_key("x-ok"), ok, "{status}");
            assert_eq!(h["x-all"], "2", "{status}");
        }
    }
}
