//! Why a request went where it went: the rules a request was checked against, in the order
//! routing tries them, each with the first condition that failed, up to the rule that matched.
//! What the request tracer (`edgeplane trace`) shows; routing itself never calls it. Pure.

use serde::{Deserialize, Serialize};

use super::matchers::{PathMatch, RequestMatch, RequestView};
use super::model::ListenerTable;

/// One rule a request was checked against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Considered {
    /// The virtual host's hostname (`*` for any).
    pub hostname: String,
    /// `Kind/namespace/name`.
    pub route: String,
    /// The rule's name, else its index.
    pub rule: String,
    /// The index of the rule's `matches[]` entry.
    pub match_index: u32,
    /// `None` when it matched; else the first condition that failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// At most this many rules are listed: a host with thousands of rules would make a trace
/// unreadable, and the matched one comes first among the ones that are close.
pub const MAX_CONSIDERED: usize = 64;

/// The rules of `listener` that `req` was checked against, in routing's order, ending with
/// the one that matched (if one did).
pub fn considered(listener: &ListenerTable, req: &RequestView<'_>) -> Vec<Considered> {
    let mut out = Vec::new();
    for host in listener.hosts.candidates(req.host) {
        for rule in &host.rules {
            if out.len() >= MAX_CONSIDERED {
                return out;
            }
            let failed = mismatch(&rule.matcher, req);
            let matched = failed.is_none();
            out.push(Considered {
                hostname: host.hostname.to_string(),
                route: format!("{}/{}", rule.route.kind(), rule.route.label()),
                rule: match &rule.rule_name {
                    Some(name) => name.to_string(),
                    None => rule.rule_index.to_string(),
                },
                match_index: rule.match_index,
                failed,
            });
            if matched {
                return out;
            }
        }
    }
    out
}

/// The first condition of `m` that `req` does not satisfy, in words; `None` when it matches.
pub fn mismatch(m: &RequestMatch, req: &RequestView<'_>) -> Option<String> {
    if !m.path.matches(req.path) {
        return Some(match &m.path {
            PathMatch::Exact(v) => format!("path is not {v}"),
            PathMatch::Prefix(v) => format!("path is not under {v}"),
            PathMatch::RegularExpression(r) => format!("path does not match {}", r.as_str()),
        });
    }
    if let Some(method) = m.method.as_deref().filter(|m| *m != req.method) {
        return Some(format!("method is not {method}"));
    }
    if let Some(h) = m.headers.iter().find(|h| !h.matches(req.headers)) {
        return Some(format!("header {} does not match", h.name));
    }
    if let Some(q) = m.query.iter().find(|q| !q.matches(req.query)) {
        return Some(format!("query parameter {} does not match", q.name));
    }
    if m.grpc
        .as_ref()
        .is_some_and(|g| !g.matches(req.path, req.headers))
    {
        return Some("not this gRPC service and method".to_owned());
    }
    None
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderName, HeaderValue, Method};

    use super::*;
    use crate::table::{HeaderMatch, QueryMatch, ValueMatch};

    #[test]
    fn the_first_failing_condition_is_named() {
        let mut m = RequestMatch::any();
        m.path = PathMatch::prefix("/api");
        m.method = Some(Box::new(Method::POST));
        m.headers = Box::new([HeaderMatch {
            name: HeaderName::from_static("x-role"),
            value: ValueMatch::Exact("admin".into()),
        }]);
        m.query = Box::new([QueryMatch {
            name: "v".into(),
            value: ValueMatch::Exact("2".into()),
        }]);
        fn view<'a>(
            path: &'a str,
            method: &'a Method,
            query: Option<&'a str>,
            headers: &'a HeaderMap,
        ) -> RequestView<'a> {
            RequestView {
                host: "example.com",
                path,
                query,
                method,
                headers,
            }
        }
        let mut headers = HeaderMap::new();
        let why = |v: &RequestView<'_>| mismatch(&m, v);
        assert_eq!(
            why(&view("/web", &Method::POST, None, &headers)).as_deref(),
            Some("path is not under /api")
        );
        assert_eq!(
            why(&view("/api/x", &Method::GET, None, &headers)).as_deref(),
            Some("method is not POST")
        );
        assert_eq!(
            why(&view("/api/x", &Method::POST, None, &headers)).as_deref(),
            Some("header x-role does not match")
        );
        headers.insert("x-role", HeaderValue::from_static("admin"));
        assert_eq!(
            why(&view("/api/x", &Method::POST, Some("v=1"), &headers)).as_deref(),
            Some("query parameter v does not match")
        );
        assert_eq!(
            why(&view("/api/x", &Method::POST, Some("v=2"), &headers)),
            None
        );
    }
}
