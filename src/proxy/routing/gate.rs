//! The request gate: what a request must satisfy before it is routed, checked once, in order:
//! its target length (414), its head size (a ProxyConfig's limit), its host (one valid `Host`, agreeing with
//! `:authority`), its framing (no transfer coding but `chunked`), and its target
//! (asterisk-form only for `OPTIONS`; the path canonicalized
//! by the path policy, so the path a rule matches is the path the backend receives).
//! Every refusal is a [`ProxyError`] that `error.rs` maps to a 4xx or 501.

use std::borrow::Cow;

use http::header::{self, HeaderValue};
use http::uri::PathAndQuery;
use http::{HeaderMap, Method, Request, Uri, Version};

use crate::proxy::error::ProxyError;
use crate::request::{normalize_path, parse_authority, PathPolicy};

/// The request target after the gate.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A path (origin-form, or the path of an absolute-form target), now canonical.
    Path,
    /// `OPTIONS *`: a question about the server, answered by the proxy itself.
    Asterisk,
}

/// The host a request is for: the header value forwarded upstream as `Host`, and the name
/// it is routed by.
#[derive(Debug)]
pub(crate) struct RequestHost {
    pub header: HeaderValue,
    /// See [`crate::request::Authority::routing_name`].
    pub name: String,
}

/// The authority the client asked for, validated: HTTP/2 `:authority` (which must agree with
/// a `Host` header if both are sent) or `Host`; an HTTP/1 absolute-form target's authority
/// takes precedence over `Host` (RFC 9112 3.2.2). Exactly one valid `Host` line is required
/// whenever `Host` is sent, and a request naming no host at all is refused.
pub(crate) fn authority<B>(req: &Request<B>) -> Result<RequestHost, ProxyError> {
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(ProxyError::DuplicateHost);
    }
    let host_name = match host {
        Some(h) => Some(
            parse_authority(h.as_bytes())
                .map_err(ProxyError::BadHost)?
                .routing_name(),
        ),
        None => None,
    };
    let Some(uri_authority) = req.uri().authority() else {
        return match (host, host_name) {
            (Some(header), Some(name)) => Ok(RequestHost {
                header: header.clone(),
                name,
            }),
            _ => Err(ProxyError::MissingHost),
        };
    };
    let a = uri_authority.as_str();
    let name = parse_authority(a.as_bytes())
        .map_err(ProxyError::BadHost)?
        .routing_name();
    if req.version() == Version::HTTP_2 {
        if let Some(h) = host {
            if !h.as_bytes().eq_ignore_ascii_case(a.as_bytes()) {
                return Err(ProxyError::HostMismatch);
            }
        }
    }
    let header = HeaderValue::from_str(a).map_err(|_| ProxyError::MissingHost)?;
    Ok(RequestHost { header, name })
}

/// Message framing of HTTP/1 requests (RFC 9112 6.1, 6.3): `chunked` is the only transfer
/// coding the proxy forwards (anything else is 501: dropping it would hand the backend a body
/// it cannot decode), it is applied once, and never together with `Content-Length` (the
/// ambiguity request smuggling relies on).
pub(crate) fn check_framing(version: Version, headers: &HeaderMap) -> Result<(), ProxyError> {
    if version == Version::HTTP_2 || !headers.contains_key(header::TRANSFER_ENCODING) {
        return Ok(());
    }
    let mut chunked = 0;
    for value in headers.get_all(header::TRANSFER_ENCODING) {
        let value = value
            .to_str()
            .map_err(|_| ProxyError::BadFraming("Transfer-Encoding is not ASCII"))?;
        for coding in value.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            if coding.eq_ignore_ascii_case("chunked") {
                chunked += 1;
            } else {
                return Err(ProxyError::UnsupportedTransferCoding(coding.to_owned()));
            }
        }
    }
    if chunked != 1 {
        return Err(ProxyError::BadFraming(
            "chunked must be applied exactly once",
        ));
    }
    if headers.contains_key(header::CONTENT_LENGTH) {
        return Err(ProxyError::BadFraming(
            "Transfer-Encoding together with Content-Length",
        ));
    }
    Ok(())
}

/// Canonicalizes the request target in place. The query string is kept byte for byte; the
/// URI is rebuilt (and allocated) only when the path changes.
pub(crate) fn normalize_target<B>(
    req: &mut Request<B>,
    policy: &PathPolicy,
) -> Result<Target, ProxyError> {
    let uri = req.uri();
    if uri.path_and_query().map(PathAndQuery::as_str) == Some("*") {
        return if req.method() == Method::OPTIONS {
            Ok(Target::Asterisk)
        } else {
            Err(ProxyError::AsteriskForm)
        };
    }
    let Cow::Owned(path) = normalize_path(uri.path(), policy).map_err(ProxyError::BadPath)? else {
        return Ok(Target::Path);
    };
    let full = match uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query =
        Some(PathAndQuery::try_from(full).map_err(|e| ProxyError::BadUri(e.to_string()))?);
    *req.uri_mut() = Uri::from_parts(parts).map_err(|e| ProxyError::BadUri(e.to_string()))?;
    Ok(Target::Path)
}

/// 414 when the request target (path and query) is longer than `max` bytes: everything the
/// router does with a path (normalization, regular-expression rules) then works on a bounded
/// input, and no backend receives a target longer than common servers accept (nginx: 8 KiB).
pub(crate) fn check_target_length(uri: &Uri, max: usize) -> Result<(), ProxyError> {
    let len = uri.path_and_query().map_or(0, |p| p.as_str().len());
    if len > max {
        Err(ProxyError::TargetTooLong(max))
    } else {
        Ok(())
    }
}

/// 431 when the request head (request line and header lines, as HTTP/1.1 would send them) is
/// larger than the listener's limit: hyper's own check only works in multiples of its buffer.
pub(crate) fn check_head_size(
    req: &Request<crate::proxy::body::ClientBody>,
    max: u32,
) -> Result<(), ProxyError> {
    let line = req.method().as_str().len()
        + req.uri().path_and_query().map_or(1, |p| p.as_str().len())
        + 11;
    let size = req
        .headers()
        .iter()
        .fold(line, |n, (k, v)| n + k.as_str().len() + v.len() + 4);
    if size > max as usize {
        Err(ProxyError::HeadersTooLarge(max))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(version: Version, uri: &str, hosts: &[&str]) -> Request<()> {
        let mut b = Request::get(uri).version(version);
        for h in hosts {
            b = b.header(header::HOST, *h);
        }
        b.body(()).expect("valid request")
    }

    #[test]
    fn host_rules() {
        let h1 = Version::HTTP_11;
        let h2 = Version::HTTP_2;
        let ok = |r: Request<()>| authority(&r).map(|v| v.header.to_str().unwrap_or("").to_owned());
        assert_eq!(
            ok(req(h1, "/", &["a.example"])).ok().as_deref(),
            Some("a.example")
        );
        assert_eq!(
            ok(req(h1, "/", &["[::1]:8080"])).ok().as_deref(),
            Some("[::1]:8080")
        );
        assert!(matches!(
            ok(req(h1, "/", &[])),
            Err(ProxyError::MissingHost)
        ));
        assert!(matches!(
            ok(req(h1, "/", &["a", "b"])),
            Err(ProxyError::DuplicateHost)
        ));
        assert!(matches!(
            ok(req(h1, "/", &["a@b"])),
            Err(ProxyError::BadHost(_))
        ));
        assert!(matches!(
            ok(req(h1, "/", &[""])),
            Err(ProxyError::BadHost(_))
        ));
        // Absolute-form wins over Host on HTTP/1.
        let abs = ok(req(h1, "http://b.example/x", &["a.example"]));
        assert_eq!(abs.ok().as_deref(), Some("b.example"));
        assert!(matches!(
            ok(req(h1, "http://u@b.example/x", &["a.example"])),
            Err(ProxyError::BadHost(_))
        ));
        // HTTP/2: :authority and Host must agree; either alone is enough.
        assert!(ok(req(h2, "http://a.example/", &["A.example"])).is_ok());
        assert!(matches!(
            ok(req(h2, "http://a.example/", &["b.example"])),
            Err(ProxyError::HostMismatch)
        ));
        assert!(ok(req(h2, "/", &["a.example"])).is_ok());
        assert!(matches!(
            ok(req(h2, "/", &[])),
            Err(ProxyError::MissingHost)
        ));
    }

    #[test]
    fn framing_rules() {
        let te = |v: &str, cl: bool| {
            let mut h = HeaderMap::new();
            h.insert(header::TRANSFER_ENCODING, HeaderValue::from_str(v).unwrap());
            if cl {
                h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
            }
            check_framing(Version::HTTP_11, &h)
        };
        assert!(te("chunked", false).is_ok());
        assert!(te("Chunked", false).is_ok());
        assert_eq!(te("gzip, chunked", false).unwrap_err().status(), 501);
        assert_eq!(te("chunked, chunked", false).unwrap_err().status(), 400);
        assert_eq!(te("chunked", true).unwrap_err().status(), 400);
        assert!(check_framing(Version::HTTP_11, &HeaderMap::new()).is_ok());
    }

    #[test]
    fn target_length() {
        let uri = |n: usize| Uri::try_from(format!("/{}", "a".repeat(n - 1))).unwrap();
        assert!(check_target_length(&uri(8192), 8192).is_ok());
        let err = check_target_length(&uri(8193), 8192).unwrap_err();
        assert_eq!(err.status(), 414);
    }

    #[test]
    fn targets() {
        let policy = PathPolicy::default();
        let mut r = req(Version::HTTP_11, "/public/%2e%2e/private?a=%2e%2e/b", &[]);
        assert_eq!(normalize_target(&mut r, &policy).ok(), Some(Target::Path));
        assert_eq!(r.uri().to_string(), "/private?a=%2e%2e/b");
        let mut r = req(Version::HTTP_11, "http://h.example/a/./b", &[]);
        assert!(normalize_target(&mut r, &policy).is_ok());
        assert_eq!(r.uri().to_string(), "http://h.example/a/b");
        let mut r = Request::options("*").body(()).unwrap();
        assert_eq!(
            normalize_target(&mut r, &policy).ok(),
            Some(Target::Asterisk)
        );
        let mut r = req(Version::HTTP_11, "*", &[]);
        assert!(matches!(
            normalize_target(&mut r, &policy),
            Err(ProxyError::AsteriskForm)
        ));
    }
}
