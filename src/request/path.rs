//! The path policy: one canonical form of a request path, computed before routing, so that the
//! path a rule matches is exactly the path the backend receives. Pure; allocates only when the
//! path changes.
//!
//! Rules, in order (docs/security.md explains each):
//! 1. The path starts with `/`; only visible ASCII (0x21..=0x7E) is allowed, never `?`, `#`,
//!    `<`, `>` or a backtick (which no request target can carry); every `%` starts a two-digit
//!    hex escape.
//! 2. Escapes of unreserved characters (ALPHA / DIGIT / `-._~`) are decoded; every other escape
//!    is kept with uppercase hex digits (RFC 3986 6.2.2.1-2). Nothing is decoded twice.
//! 3. `%2F`, `%5C` and a raw `\`, `;` (path parameters) and `//` (empty segments) are rejected
//!    unless [`PathPolicy`] allows them; `//` may also be merged into `/`.
//! 4. Dot segments are removed (RFC 3986 5.2.4), after decoding, so `%2e%2e` is `..`.
//! 5. A segment part that is `.` or `..` behind `;`, `%2F`, `%5C` or `\` is always rejected: a
//!    backend that splits there would see a dot segment the router did not.

use std::borrow::Cow;

use serde::Serialize;

/// Whether a construct the policy distrusts is refused or passed through unmodified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum SegmentPolicy {
    /// Answer 400: the safe default, since backends disagree about what it means.
    #[default]
    Reject,
    /// Keep it as sent (escapes with uppercase hex digits).
    Allow,
}

/// What to do with empty segments (`//`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum SlashPolicy {
    /// Answer 400.
    #[default]
    Reject,
    /// Keep them: `/a//b` is matched and forwarded as `/a//b`.
    Allow,
    /// Collapse runs of slashes: `/a//b` is matched and forwarded as `/a/b`.
    Merge,
}

/// The configurable part of the path policy; the default rejects every ambiguous construct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PathPolicy {
    /// `%2F` inside a segment.
    pub encoded_slash: SegmentPolicy,
    /// `%5C` and a raw `\`.
    pub backslash: SegmentPolicy,
    /// `;` (path parameters, `/a;jsessionid=1/b`).
    pub path_parameters: SegmentPolicy,
    /// `//` (empty segments).
    pub empty_segments: SlashPolicy,
}

impl PathPolicy {
    /// Allows every construct (empty segments kept): the policy for configured paths, which
    /// are checked for bytes only.
    pub const PERMISSIVE: Self = Self {
        encoded_slash: SegmentPolicy::Allow,
        backslash: SegmentPolicy::Allow,
        path_parameters: SegmentPolicy::Allow,
        empty_segments: SlashPolicy::Allow,
    };
}

/// Why a request path is refused (always a client fault: 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("the path does not start with '/'")]
    NotAbsolute,
    #[error("byte 0x{0:02X} is not allowed in a path")]
    InvalidByte(u8),
    #[error("malformed percent escape")]
    BadEscape,
    #[error("encoded slash (%2F) in the path")]
    EncodedSlash,
    #[error("backslash in the path")]
    Backslash,
    #[error("path parameter (';') in the path")]
    PathParameter,
    #[error("empty path segment ('//')")]
    EmptySegment,
    #[error("dot segment hidden behind ';', an encoded slash or a backslash")]
    HiddenDotSegment,
}

/// The canonical form of `path` (no query string) under `policy`, borrowed when it is already
/// canonical. Normalizing the result again returns it unchanged.
pub fn normalize_path<'a>(path: &'a str, policy: &PathPolicy) -> Result<Cow<'a, str>, PathError> {
    if !path.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    let out = if scan(path.as_bytes(), policy)? {
        Cow::Owned(rewrite(path, policy))
    } else {
        Cow::Borrowed(path)
    };
    check_hidden_dots(&out)?;
    Ok(out)
}

/// Checks a configured path (a redirect or rewrite value): `/`-rooted, visible ASCII, valid
/// escapes. Such a value ends up in `Location` or the upstream request line.
pub fn validate_config_path(path: &str) -> Result<(), PathError> {
    if !path.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    scan(path.as_bytes(), &PathPolicy::PERMISSIVE).map(|_| ())
}

/// RFC 3986 unreserved characters.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The escape at `path[i]` (which is `%`): its value, and whether its digits are lowercase.
fn escape_at(path: &[u8], i: usize) -> Result<(u8, bool), PathError> {
    let (Some(&h), Some(&l)) = (path.get(i + 1), path.get(i + 2)) else {
        return Err(PathError::BadEscape);
    };
    let (Some(hv), Some(lv)) = (hex(h), hex(l)) else {
        return Err(PathError::BadEscape);
    };
    Ok((
        hv * 16 + lv,
        h.is_ascii_lowercase() || l.is_ascii_lowercase(),
    ))
}

fn is_dot_segment(seg: &[u8]) -> bool {
    seg == b"." || seg == b".."
}

/// Validates every byte against the policy, without allocating. True when the canonical form
/// differs from `path` (an escape to decode or to uppercase, a dot segment, `//` to merge).
fn scan(path: &[u8], policy: &PathPolicy) -> Result<bool, PathError> {
    let mut changed = false;
    let mut seg_start = 1;
    let mut i = 1;
    while i < path.len() {
        let b = path[i];
        match b {
            b'%' => {
                let (v, lower) = escape_at(path, i)?;
                if is_unreserved(v) {
                    changed = true;
                } else {
                    if v == b'/' && policy.encoded_slash == SegmentPolicy::Reject {
                        return Err(PathError::EncodedSlash);
                    }
                    if v == b'\\' && policy.backslash == SegmentPolicy::Reject {
                        return Err(PathError::Backslash);
                    }
                    changed |= lower;
                }
                i += 3;
                continue;
            }
            b'\\' if policy.backslash == SegmentPolicy::Reject => return Err(PathError::Backslash),
            b';' if policy.path_parameters == SegmentPolicy::Reject => {
                return Err(PathError::PathParameter)
            }
            b'/' => {
                let seg = &path[seg_start..i];
                if seg.is_empty() {
                    match policy.empty_segments {
                        SlashPolicy::Reject => return Err(PathError::EmptySegment),
                        SlashPolicy::Merge => changed = true,
                        SlashPolicy::Allow => {}
                    }
                }
                changed |= is_dot_segment(seg);
                seg_start = i + 1;
            }
            b'?' | b'#' | b'<' | b'>' | b'`' => return Err(PathError::InvalidByte(b)),
            0x21..=0x7E => {}
            _ => return Err(PathError::InvalidByte(b)),
        }
        i += 1;
    }
    Ok(changed || is_dot_segment(&path[seg_start..]))
}

const UPPER_HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Builds the canonical form of a path [`scan`] accepted: decode, then remove dot segments
/// (and merge empty segments when asked) per RFC 3986 5.2.4.
fn rewrite(path: &str, policy: &PathPolicy) -> String {
    let bytes = path.as_bytes();
    let mut decoded = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            // `scan` validated every escape.
            let (v, _) = escape_at(bytes, i).unwrap_or((b'%', false));
            if is_unreserved(v) {
                decoded.push(char::from(v));
            } else {
                decoded.push('%');
                decoded.push(char::from(UPPER_HEX[usize::from(v >> 4)]));
                decoded.push(char::from(UPPER_HEX[usize::from(v & 0xF)]));
            }
            i += 3;
        } else {
            decoded.push(char::from(b));
            i += 1;
        }
    }
    let segments: Vec<&str> = decoded[1..].split('/').collect();
    let last = segments.len() - 1;
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (k, seg) in segments.into_iter().enumerate() {
        match seg {
            "." => {}
            ".." => {
                out.pop();
            }
            "" if k != last && policy.empty_segments == SlashPolicy::Merge => continue,
            s => {
                out.push(s);
                continue;
            }
        }
        // A dot segment at the end leaves a directory: `/a/b/..` is `/a/`.
        if k == last {
            out.push("");
        }
    }
    let mut result = String::with_capacity(decoded.len());
    result.push('/');
    result.push_str(&out.join("/"));
    result
}

/// Length of the separator at `b[i]` that a backend might split a segment on: `;`, `\\`
/// (1 byte), `%2F` or `%5C` (3 bytes); 0 when there is none.
fn separator_len(b: &[u8], i: usize) -> usize {
    match b[i] {
        b';' | b'\\' => 1,
        b'%' => match (b.get(i + 1), b.get(i + 2)) {
            (Some(b'2'), Some(b'F' | b'f')) | (Some(b'5'), Some(b'C' | b'c')) => 3,
            _ => 0,
        },
        _ => 0,
    }
}

/// Rule 5: no part of a segment between `;`, `%2F`, `%5C` or `\\` may be `.` or `..`.
fn check_hidden_dots(path: &str) -> Result<(), PathError> {
    if !path.bytes().any(|b| matches!(b, b';' | b'%' | b'\\')) {
        return Ok(());
    }
    for seg in path.split('/') {
        let b = seg.as_bytes();
        let (mut start, mut i, mut split) = (0, 0, false);
        while i < b.len() {
            match separator_len(b, i) {
                0 => i += 1,
                len => {
                    if is_dot_segment(&b[start..i]) {
                        return Err(PathError::HiddenDotSegment);
                    }
                    split = true;
                    i += len;
                    start = i;
                }
            }
        }
        if split && is_dot_segment(&b[start..]) {
            return Err(PathError::HiddenDotSegment);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: PathPolicy = PathPolicy {
        encoded_slash: SegmentPolicy::Reject,
        backslash: SegmentPolicy::Reject,
        path_parameters: SegmentPolicy::Reject,
        empty_segments: SlashPolicy::Reject,
    };
    const MERGE: PathPolicy = PathPolicy {
        empty_segments: SlashPolicy::Merge,
        ..DEFAULT
    };
    const ALLOW: PathPolicy = PathPolicy::PERMISSIVE;

    /// (input, policy, expected canonical form or error).
    fn cases() -> Vec<(&'static str, PathPolicy, Result<&'static str, PathError>)> {
        use PathError::*;
        vec![
            ("/", DEFAULT, Ok("/")),
            ("/public/x", DEFAULT, Ok("/public/x")),
            ("/public/", DEFAULT, Ok("/public/")),
            ("/public/../private", DEFAULT, Ok("/private")),
            ("/public/./x", DEFAULT, Ok("/public/x")),
            ("/public/%2e%2e/private", DEFAULT, Ok("/private")),
            ("/public/.%2E/private", DEFAULT, Ok("/private")),
            ("/public/%2E./private", DEFAULT, Ok("/private")),
            ("/public/%2e/x", DEFAULT, Ok("/public/x")),
            ("/a/b/..", DEFAULT, Ok("/a/")),
            ("/a/b/.", DEFAULT, Ok("/a/b/")),
            ("/..", DEFAULT, Ok("/")),
            ("/../../x", DEFAULT, Ok("/x")),
            ("/a/../../b/", DEFAULT, Ok("/b/")),
            ("/.../x", DEFAULT, Ok("/.../x")),
            ("/..a/.b", DEFAULT, Ok("/..a/.b")),
            ("/%41%62c%7e%2D%5f", DEFAULT, Ok("/Abc~-_")),
            ("/a%3fb", DEFAULT, Ok("/a%3Fb")),
            ("/a%20b%c3%a9", DEFAULT, Ok("/a%20b%C3%A9")),
            ("/a%252e%252e/b", DEFAULT, Ok("/a%252e%252e/b")),
            ("/a%25", DEFAULT, Ok("/a%25")),
            ("/a%2", DEFAULT, Err(BadEscape)),
            ("/a%zz", DEFAULT, Err(BadEscape)),
            ("/a%", DEFAULT, Err(BadEscape)),
            ("a/b", DEFAULT, Err(NotAbsolute)),
            ("*", DEFAULT, Err(NotAbsolute)),
            ("", DEFAULT, Err(NotAbsolute)),
            ("/a b", DEFAULT, Err(InvalidByte(b' '))),
            ("/a\tb", DEFAULT, Err(InvalidByte(b'\t'))),
            ("/a\r\nb", DEFAULT, Err(InvalidByte(b'\r'))),
            ("/a\u{e9}", DEFAULT, Err(InvalidByte(0xC3))),
            ("/a?b", DEFAULT, Err(InvalidByte(b'?'))),
            ("/a#b", DEFAULT, Err(InvalidByte(b'#'))),
            // Found by fuzzing: the canonical form must be a valid request target.
            ("//`````", ALLOW, Err(InvalidByte(b'`'))),
            ("/a<b>", DEFAULT, Err(InvalidByte(b'<'))),
            ("/a\"{}|^[]", DEFAULT, Ok("/a\"{}|^[]")),
            // %2F
            ("/public%2F..%2Fprivate", DEFAULT, Err(EncodedSlash)),
            ("/a%2fb", DEFAULT, Err(EncodedSlash)),
            ("/a%2fb", ALLOW, Ok("/a%2Fb")),
            ("/a%2F..", ALLOW, Err(HiddenDotSegment)),
            ("/public/..%2Fprivate", ALLOW, Err(HiddenDotSegment)),
            ("/public/%2e%2e%2fprivate", ALLOW, Err(HiddenDotSegment)),
            // backslash
            ("/a\\b", DEFAULT, Err(Backslash)),
            ("/a%5cb", DEFAULT, Err(Backslash)),
            ("/a\\b", ALLOW, Ok("/a\\b")),
            ("/a%5cb", ALLOW, Ok("/a%5Cb")),
            ("/public\\..\\private", ALLOW, Err(HiddenDotSegment)),
            ("/public/..%5Cprivate", ALLOW, Err(HiddenDotSegment)),
            // path parameters
            ("/a;jsessionid=1/b", DEFAULT, Err(PathParameter)),
            ("/a;jsessionid=1/b", ALLOW, Ok("/a;jsessionid=1/b")),
            ("/public/..;/private", ALLOW, Err(HiddenDotSegment)),
            ("/public/.;x/private", ALLOW, Err(HiddenDotSegment)),
            ("/a%3Bb", DEFAULT, Ok("/a%3Bb")),
            // empty segments
            ("//a", DEFAULT, Err(EmptySegment)),
            ("/a//b", DEFAULT, Err(EmptySegment)),
            ("/a//b", MERGE, Ok("/a/b")),
            ("//a///b//", MERGE, Ok("/a/b/")),
            ("/a//..", MERGE, Ok("/")),
            ("/a//b", ALLOW, Ok("/a//b")),
            ("/a//..", ALLOW, Ok("/a/")),
            ("/..//a", ALLOW, Ok("//a")),
        ]
    }

    #[test]
    fn the_policy_table() {
        for (input, policy, want) in cases() {
            let got = normalize_path(input, &policy);
            assert_eq!(
                got.as_deref().map_err(|e| *e),
                want,
                "{input:?} under {policy:?}"
            );
        }
    }

    #[test]
    fn normalizing_twice_changes_nothing() {
        for (input, policy, _) in cases() {
            if let Ok(once) = normalize_path(input, &policy) {
                let twice = normalize_path(&once, &policy).expect("canonical form is accepted");
                assert_eq!(twice, once, "{input:?}");
                assert!(matches!(twice, Cow::Borrowed(_)), "{input:?}");
            }
        }
    }

    #[test]
    fn canonical_paths_are_valid_request_targets() {
        for (input, policy, _) in cases() {
            if let Ok(p) = normalize_path(input, &policy) {
                assert!(
                    http::uri::PathAndQuery::try_from(p.as_ref()).is_ok(),
                    "{p:?}"
                );
            }
        }
    }

    #[test]
    fn canonical_paths_are_borrowed() {
        for p in ["/", "/a/b", "/a/b/", "/a%2Fb", "/a%20b", "/~user/x.y"] {
            let policy = PathPolicy {
                encoded_slash: SegmentPolicy::Allow,
                ..DEFAULT
            };
            assert!(
                matches!(normalize_path(p, &policy), Ok(Cow::Borrowed(_))),
                "{p}"
            );
        }
    }

    #[test]
    fn config_paths() {
        assert!(validate_config_path("/new/path;v=1").is_ok());
        assert!(validate_config_path("/a%2Fb").is_ok());
        assert_eq!(
            validate_config_path("/x\r\nSet-Cookie: a=b"),
            Err(PathError::InvalidByte(b'\r'))
        );
        assert_eq!(validate_config_path("x"), Err(PathError::NotAbsolute));
    }
}
