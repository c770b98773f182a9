//! Host and `:authority` validation: a request names its site as `host[:port]` (RFC 9112 3.2,
//! RFC 3986 3.2.2) and nothing else. Pure; borrowed results, no allocation.
//!
//! Accepted: a DNS-style name (letters, digits, `-`, `_`, dot-separated labels of 1 to 63
//! characters, an optional trailing dot, 253 characters at most), which covers IPv4 literals;
//! or a bracketed IPv6 literal (`[::1]`, no zone). Either may carry `:port` (1 to 5 digits,
//! at most 65535). Everything else (userinfo `a@b`, a path `evil.com/x`, spaces, control
//! characters, percent escapes, an empty value) is refused.

use std::net::Ipv6Addr;

/// Longest accepted host name, in bytes.
const MAX_NAME: usize = 253;
/// Longest accepted label, in bytes.
const MAX_LABEL: usize = 63;

/// A validated `host[:port]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authority<'a> {
    /// The host as sent, without brackets for IPv6 literals.
    pub host: &'a str,
    /// True when the host is a bracketed IPv6 literal.
    pub ipv6: bool,
    pub port: Option<u16>,
}

impl Authority<'_> {
    /// The host as routes and listeners name it: lower-case, without port, brackets or a
    /// trailing dot.
    pub fn routing_name(&self) -> String {
        self.host.trim_end_matches('.').to_ascii_lowercase()
    }
}

/// Why a Host header or `:authority` is refused (a client fault: 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("empty host")]
    Empty,
    #[error("byte 0x{0:02X} is not allowed in a host")]
    InvalidByte(u8),
    #[error("empty or overlong label in a host name")]
    BadLabel,
    #[error("host name longer than 253 characters")]
    TooLong,
    #[error("invalid port")]
    BadPort,
    #[error("invalid IPv6 literal")]
    BadIpv6,
}

/// Parses a Host header value or `:authority` as `host[:port]`.
pub fn parse_authority(value: &[u8]) -> Result<Authority<'_>, HostError> {
    if value.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some(rest) = value.strip_prefix(b"[") {
        let close = rest
            .iter()
            .position(|&b| b == b']')
            .ok_or(HostError::BadIpv6)?;
        let literal = std::str::from_utf8(&rest[..close]).map_err(|_| HostError::BadIpv6)?;
        literal
            .parse::<Ipv6Addr>()
            .map_err(|_| HostError::BadIpv6)?;
        let port = match &rest[close + 1..] {
            [] => None,
            [b':', digits @ ..] => Some(port(digits)?),
            _ => return Err(HostError::BadIpv6),
        };
        return Ok(Authority {
            host: literal,
            ipv6: true,
            port,
        });
    }
    let (name, port) = match value.iter().rposition(|&b| b == b':') {
        Some(i) => (&value[..i], Some(port(&value[i + 1..])?)),
        None => (value, None),
    };
    let host = hostname(name)?;
    Ok(Authority {
        host,
        ipv6: false,
        port,
    })
}

/// Checks a configured hostname (a redirect or rewrite target): a name or IPv4 literal under
/// the same rules as a request host, without a port.
pub fn validate_hostname(name: &str) -> Result<(), HostError> {
    hostname(name.as_bytes()).map(|_| ())
}

/// A name of dot-separated labels of letters, digits, `-` and `_`.
fn hostname(name: &[u8]) -> Result<&str, HostError> {
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some(&b) = name
        .iter()
        .find(|&&b| !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
    {
        return Err(HostError::InvalidByte(b));
    }
    let labels = name.strip_suffix(b".").unwrap_or(name);
    if labels.len() > MAX_NAME {
        return Err(HostError::TooLong);
    }
    if labels
        .split(|&b| b == b'.')
        .any(|l| l.is_empty() || l.len() > MAX_LABEL)
    {
        return Err(HostError::BadLabel);
    }
    // Only ASCII bytes passed the check above.
    std::str::from_utf8(name).map_err(|_| HostError::InvalidByte(0))
}

fn port(digits: &[u8]) -> Result<u16, HostError> {
    if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(HostError::BadPort);
    }
    digits
        .iter()
        .try_fold(0u32, |n, &d| Some(n * 10 + u32::from(d - b'0')))
        .and_then(|n| u16::try_from(n).ok())
        .ok_or(HostError::BadPort)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_names_drop_port_brackets_case_and_trailing_dot() {
        let name = |v: &str| parse_authority(v.as_bytes()).unwrap().routing_name();
        assert_eq!(name("Example.COM:8080"), "example.com");
        assert_eq!(name("example.com."), "example.com");
        assert_eq!(name("[::1]:80"), "::1");
        assert_eq!(name("host"), "host");
    }

    #[test]
    fn valid_authorities() {
        let ok = |v: &str, host: &str, port: Option<u16>| {
            let a = parse_authority(v.as_bytes()).unwrap_or_else(|e| panic!("{v:?}: {e}"));
            assert_eq!((a.host, a.port), (host, port), "{v:?}");
        };
        ok("example.com", "example.com", None);
        ok("Example.COM:8080", "Example.COM", Some(8080));
        ok("a.example.com.", "a.example.com.", None);
        ok("127.0.0.1:80", "127.0.0.1", Some(80));
        ok("[::1]:8080", "::1", Some(8080));
        ok("[2001:db8::1]", "2001:db8::1", None);
        ok("my_service-1.ns", "my_service-1.ns", None);
        ok("h:65535", "h", Some(65535));
    }

    #[test]
    fn invalid_authorities() {
        use HostError::*;
        let cases: &[(&[u8], HostError)] = &[
            (b"", Empty),
            (b":80", Empty),
            (b"evil.com/x.example.com", InvalidByte(b'/')),
            (b"a@b", InvalidByte(b'@')),
            (b"a b", InvalidByte(b' ')),
            (b"a\r\nX-Injected", InvalidByte(b'\r')),
            (b"a\r\nX-Injected: 1", BadPort),
            (b"a\x00", InvalidByte(0)),
            (b"a%2eb", InvalidByte(b'%')),
            (b"a..b", BadLabel),
            (b".a", BadLabel),
            (b"h:", BadPort),
            (b"h:65536", BadPort),
            (b"h:8o", BadPort),
            (b"h:123456", BadPort),
            (b"::1", InvalidByte(b':')),
            (b"[::1", BadIpv6),
            (b"[::1]x", BadIpv6),
            (b"[fe80::1%eth0]", BadIpv6),
            (b"[v1.x]", BadIpv6),
            (b"\xc3\xa9.example", InvalidByte(0xC3)),
        ];
        for (v, want) in cases {
            assert_eq!(
                parse_authority(v),
                Err(*want),
                "{:?}",
                String::from_utf8_lossy(v)
            );
        }
        let long = format!("{}.com", "a".repeat(64));
        assert_eq!(parse_authority(long.as_bytes()), Err(BadLabel));
        let many = vec!["a"; 130].join(".");
        assert_eq!(parse_authority(many.as_bytes()), Err(TooLong));
    }

    #[test]
    fn configured_hostnames_have_no_port() {
        assert!(validate_hostname("www.example.com").is_ok());
        assert!(validate_hostname("www.example.com:80").is_err());
        assert!(validate_hostname("x\r\nSet-Cookie: a").is_err());
    }
}
