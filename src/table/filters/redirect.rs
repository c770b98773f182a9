//! The HTTPRoute `RequestRedirect` filter in compiled form and the `Location` it answers with:
//! scheme, host, port (defaulted by the spec's rules for the scheme) and path, built from the
//! request's own target. Apart from the other filters because it answers rather than edits
//! what is forwarded. Pure: the proxy calls it and computes nothing itself.

use serde::Serialize;

use super::PathModifier;
use crate::table::matchers::PathMatch;

/// The scheme a client used, or a redirect asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }

    /// 80 or 443: a URL on this port leaves the port out.
    pub fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }
}

/// `RequestRedirect`, compiled.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Redirect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<Scheme>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathModifier>,
    /// 301, 302 (default), 303, 307 or 308.
    pub status: u16,
}

/// The request facts a redirect location depends on.
#[derive(Debug, Clone, Copy)]
pub struct RedirectTarget<'a> {
    /// As the client reached the listener.
    pub scheme: Scheme,
    /// Request host without port.
    pub host: &'a str,
    /// Port of the Gateway listener the request arrived on.
    pub listener_port: u16,
    pub path: &'a str,
    pub query: Option<&'a str>,
}

impl Redirect {
    /// The `Location` header value. The host comes validated (from the table or the request
    /// gate); path and query bytes outside visible ASCII are percent-encoded. Per the spec, a port follows the scheme's well-known port when
    /// the scheme is changed, else the listener's port, and is omitted when it is the default
    /// port of the resulting scheme (80 for http, 443 for https).
    pub fn location(&self, req: &RedirectTarget<'_>, matched: &PathMatch) -> String {
        let scheme = self.scheme.unwrap_or(req.scheme);
        let host = self.hostname.as_deref().unwrap_or(req.host);
        let port = self
            .port
            .unwrap_or(self.scheme.map_or(req.listener_port, Scheme::default_port));
        let default_port = port == scheme.default_port();
        let scheme = scheme.as_str();
        let path = match &self.path {
            Some(m) => m.apply(matched, req.path),
            None => req.path.to_owned(),
        };
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        let mut out = if default_port {
            format!("{scheme}://{host}")
        } else {
            format!("{scheme}://{host}:{port}")
        };
        push_visible(&mut out, &path);
        if let Some(q) = req.query {
            out.push('?');
            push_visible(&mut out, q);
        }
        out
    }
}

/// Appends `s`, percent-encoding every byte that is not visible ASCII (controls, CR, LF,
/// space, non-ASCII): request-controlled text in a `Location` can never end the header line.
fn push_visible(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in s.bytes() {
        if (0x21..=0x7E).contains(&b) {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xF)]));
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn prefix(p: &str) -> PathMatch {
        PathMatch::prefix(p)
    }

    #[test]
    fn redirect_ports_follow_the_spec() {
        let req = RedirectTarget {
            scheme: Scheme::Http,
            host: "h.example",
            listener_port: 8080,
            path: "/p",
            query: Some("q=1"),
        };
        let base = Redirect {
            scheme: None,
            hostname: None,
            port: None,
            path: None,
            status: 302,
        };
        assert_eq!(
            base.location(&req, &prefix("/")),
            "http://h.example:8080/p?q=1"
        );
        let https = Redirect {
            scheme: Some(Scheme::Https),
            ..base
        };
        assert_eq!(
            https.location(&req, &prefix("/")),
            "https://h.example/p?q=1"
        );
        let port = Redirect {
            port: Some(443),
            scheme: None,
            hostname: Some("x".into()),
            path: None,
            status: 301,
        };
        assert_eq!(port.location(&req, &prefix("/")), "http://x:443/p?q=1");
        let http80 = RedirectTarget {
            listener_port: 80,
            query: None,
            ..req
        };
        let plain = Redirect {
            scheme: None,
            hostname: None,
            port: None,
            path: Some(PathModifier::ReplaceFullPath("/new".into())),
            status: 302,
        };
        assert_eq!(
            plain.location(&http80, &prefix("/")),
            "http://h.example/new"
        );
    }

    #[test]
    fn redirect_location_never_carries_control_bytes() {
        let req = RedirectTarget {
            scheme: Scheme::Http,
            host: "h.example",
            listener_port: 80,
            path: "/a\r\nSet-Cookie: x=1",
            query: Some("q=\u{e9} \n"),
        };
        let r = Redirect {
            scheme: None,
            hostname: None,
            port: None,
            path: None,
            status: 302,
        };
        let loc = r.location(&req, &prefix("/"));
        assert_eq!(
            loc,
            "http://h.example/a%0D%0ASet-Cookie:%20x=1?q=%C3%A9%20%0A"
        );
        assert!(HeaderValue::from_str(&loc).is_ok());
    }
}
