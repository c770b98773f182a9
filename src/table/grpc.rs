//! The gRPC part of a GRPCRoute match: the request must be a gRPC call (`content-type:
//! application/grpc*`) whose path `/service/method` satisfies the service and method
//! conditions; and the precedence key the GRPCRoute spec orders such matches by. Pure.

use http::header::CONTENT_TYPE;
use http::HeaderMap;
use serde::Serialize;

use super::matchers::ValueMatch;

/// A GRPCRoute `method` match (absent parts match anything). Every GRPCRoute match carries one,
/// so a GRPCRoute rule only ever serves gRPC calls.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcMatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<ValueMatch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<ValueMatch>,
}

impl GrpcMatch {
    /// True when the request is a gRPC call to a service and method this match accepts.
    pub fn matches(&self, path: &str, headers: &HeaderMap) -> bool {
        if !is_grpc(headers) {
            return false;
        }
        let Some((service, method)) = split_path(path) else {
            return false;
        };
        self.service
            .as_ref()
            .is_none_or(|m| m.matches(service.as_bytes()))
            && self
                .method
                .as_ref()
                .is_none_or(|m| m.matches(method.as_bytes()))
    }

    /// The GRPCRoute spec's precedence among matches of one host: most characters in the
    /// service, then in the method (an exact name ranks above a regular expression, which
    /// ranks above no condition, since an exact name is what the spec's character count is
    /// well defined for). Higher is first. Header counts are compared by the caller.
    pub fn rank(&self) -> (u8, usize, u8, usize) {
        let part = |m: &Option<ValueMatch>| match m {
            Some(ValueMatch::Exact(v)) => (2, v.len()),
            Some(ValueMatch::RegularExpression(r)) => (1, r.as_str().len()),
            None => (0, 0),
        };
        let (sk, sl) = part(&self.service);
        let (mk, ml) = part(&self.method);
        (sk, sl, mk, ml)
    }
}

/// True when the request's `content-type` is `application/grpc` or one of its `+format`
/// variants: such a request gets gRPC answers from the proxy (`UNIMPLEMENTED` when nothing
/// routes it) rather than HTTP error pages.
pub fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim();
            v.len() >= 16
                && v[..16].eq_ignore_ascii_case("application/grpc")
                && matches!(v.as_bytes().get(16), None | Some(b'+' | b';'))
        })
}

/// `/service/method` split in its two non-empty parts; any other shape is not a gRPC path.
pub fn split_path(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    (!service.is_empty() && !method.is_empty() && !method.contains('/'))
        .then_some((service, method))
}

#[cfg(test)]
mod tests {
    use super::super::matchers::Regex;
    use super::*;

    fn grpc_headers(content_type: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, content_type.parse().unwrap());
        h
    }

    #[test]
    fn only_grpc_content_types_are_grpc() {
        assert!(is_grpc(&grpc_headers("application/grpc")));
        assert!(is_grpc(&grpc_headers("application/grpc+proto")));
        assert!(is_grpc(&grpc_headers("Application/GRPC; charset=utf-8")));
        assert!(!is_grpc(&grpc_headers("application/grpcx")));
        assert!(!is_grpc(&grpc_headers("application/json")));
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[test]
    fn service_and_method_conditions() {
        let h = grpc_headers("application/grpc");
        let m = GrpcMatch {
            service: Some(ValueMatch::Exact("pkg.Svc".into())),
            method: Some(ValueMatch::RegularExpression(Regex::new("Get.*").unwrap())),
        };
        assert!(m.matches("/pkg.Svc/GetThing", &h));
        assert!(!m.matches("/pkg.Svc/PutThing", &h));
        assert!(!m.matches("/pkg.Other/GetThing", &h));
        assert!(!m.matches("/pkg.Svc/GetThing/extra", &h));
        assert!(!m.matches("/pkg.Svc/GetThing", &HeaderMap::new()));
        let any = GrpcMatch {
            service: None,
            method: None,
        };
        assert!(any.matches("/a/b", &h));
        assert!(!any.matches("/a", &h));
    }

    #[test]
    fn exact_outranks_regex_outranks_absent() {
        let exact = |s: &str| Some(ValueMatch::Exact(s.into()));
        let re = |s: &str| Some(ValueMatch::RegularExpression(Regex::new(s).unwrap()));
        let rank = |service, method| GrpcMatch { service, method }.rank();
        assert!(rank(exact("a.B"), exact("M")) > rank(exact("a.B"), None));
        assert!(rank(exact("a.B"), None) > rank(re("a.Bcdefgh.*"), exact("Mmmmmm")));
        assert!(rank(re("a.*"), None) > rank(None, exact("Method")));
        assert!(rank(exact("a.Bc"), None) > rank(exact("a.B"), exact("M")));
    }
}
