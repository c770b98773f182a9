//! An access log line as text: JSON or `key=value`, the entry's chosen fields in order,
//! written straight into a batch's reused buffer (no allocation per field or line).

use std::fmt::Write as _;
use std::time::Duration;

use http::HeaderValue;

use super::{Entry, Field};
use crate::proxy::text::{hex_u128, push_ip, push_socket_addr};
use crate::table::{AccessLogFormat, RouteRule};

/// A batch's reused clock.
#[derive(Default)]
pub(crate) struct LineWriter {
    clock: Clock,
}

impl LineWriter {
    /// Appends `entry`'s line, without its newline, to `out`.
    pub(crate) fn write(&mut self, entry: &Entry, out: &mut String) {
        entry.write_line(out, &mut self.clock);
    }
}

/// A line's time repeats the date and time to the second of the lines before it: that part is
/// formatted once per second.
#[derive(Default)]
struct Clock {
    /// The second `prefix` is of, and `YYYY-MM-DDTHH:MM:SS` for it.
    second: Option<i64>,
    prefix: String,
}

impl Clock {
    /// Writes `time` as RFC 3339 in UTC with nanoseconds (always nine digits: lines line up).
    fn write(&mut self, time: jiff::Timestamp, out: &mut String) {
        let second = time.as_second();
        if self.second != Some(second) {
            self.prefix.clear();
            if let Ok(whole) = jiff::Timestamp::from_second(second) {
                let _ = write!(self.prefix, "{whole}");
            }
            // `...:SSZ`: the date and time without the zone, which follows the fraction.
            self.prefix.pop();
            self.second = Some(second);
        }
        out.push_str(&self.prefix);
        out.push('.');
        push_padded(out, time.subsec_nanosecond().max(0).unsigned_abs(), 9);
        out.push('Z');
    }
}

/// Room for a line's fixed-size fields, reserved at once with the lengths of the variable ones
/// so that a line is copied into its batch without growing it on the way.
const FIXED_LINE: usize = 512;

impl Entry {
    /// Appends the line, without its newline, to `out`: each field's key (quotes, separators
    /// and name, laid out once per configuration in [`super::LogSpec`]), then its value,
    /// written in place.
    fn write_line(&self, out: &mut String, clock: &mut Clock) {
        let json = self.spec.format == AccessLogFormat::Json;
        let text_len = |v: &Option<HeaderValue>| v.as_ref().map_or(0, HeaderValue::len);
        out.reserve(
            FIXED_LINE
                + self.path.as_ref().map_or(0, String::len)
                + text_len(&self.host)
                + text_len(&self.user_agent)
                + text_len(&self.request_id),
        );
        for slot in self.spec.fields.iter() {
            out.push_str(&slot.key);
            self.write_value(slot.field, json, out, clock);
        }
        if json {
            out.push('}');
        }
    }

    /// Writes `field`'s value: a number, `null` (`-` in text), or a string (quoted and escaped
    /// in JSON; quoted in text when it has a space, quote, `=` or backslash, or is empty).
    /// Values the proxy formats itself (times, addresses, names, ids) never need escaping, so
    /// they are written straight into `out` between quotes.
    fn write_value(&self, field: Field, json: bool, out: &mut String, clock: &mut Clock) {
        match field {
            Field::Time => quoted(out, json, |out| clock.write(self.time, out)),
            Field::ClientAddress => quoted(out, json, |out| push_ip(out, self.client)),
            Field::Method => push_str(out, json, self.method.as_ref().map(|m| m.as_str())),
            Field::Host => push_str(out, json, header(&self.host)),
            Field::Path => push_str(out, json, self.path.as_deref()),
            Field::Protocol => push_str(out, json, Some(self.protocol)),
            Field::Status => push_num(out, json, self.status.map(u64::from)),
            Field::Duration => push_seconds(
                out,
                json,
                Some(self.duration.unwrap_or_else(|| self.start.elapsed())),
            ),
            Field::RequestBytes => push_num(out, json, Some(self.request_bytes)),
            Field::ResponseBytes => push_num(out, json, Some(self.response_bytes)),
            Field::Gateway | Field::Listener => match self.source() {
                Some(source) => quoted(out, json, |out| {
                    let _ = match field {
                        Field::Gateway => source.write_gateway(out),
                        _ => source.write_listener(out),
                    };
                }),
                None => push_null(out, json),
            },
            Field::Route => match self.rule.as_ref().map(|r| &r.route).or(self.route.as_ref()) {
                Some(r) => quoted(out, json, |out| {
                    out.push_str(r.kind());
                    out.push('/');
                    out.push_str(r.label());
                }),
                None => push_null(out, json),
            },
            Field::Rule => match self.rule.as_deref() {
                Some(RouteRule {
                    rule_name: Some(name),
                    ..
                }) => push_str(out, json, Some(name)),
                // An index is a string too: the field has one type.
                Some(r) => quoted(out, json, |out| {
                    out.push_str(itoa::Buffer::new().format(r.rule_index))
                }),
                None => push_null(out, json),
            },
            Field::Upstream => match self.upstream {
                Some(a) => quoted(out, json, |out| push_socket_addr(out, a)),
                None => push_null(out, json),
            },
            Field::UpstreamTime => push_seconds(out, json, self.upstream_time),
            Field::Retries => push_num(out, json, Some(u64::from(self.retries))),
            Field::Decision => push_str(out, json, self.decision),
            Field::UserAgent => push_str(out, json, header(&self.user_agent)),
            Field::RequestId => push_str(out, json, header(&self.request_id)),
            Field::TraceId => match self.trace_id {
                // Hex digits are ASCII.
                Some(id) => quoted(out, json, |out| {
                    out.push_str(std::str::from_utf8(&hex_u128(id)).unwrap_or_default());
                }),
                None => push_null(out, json),
            },
        }
    }

    /// The line, without its newline.
    #[cfg(test)]
    pub(crate) fn format(&self) -> String {
        let mut out = String::new();
        LineWriter::default().write(self, &mut out);
        out
    }
}

/// A header's text, or nothing.
fn header(v: &Option<HeaderValue>) -> Option<&str> {
    v.as_ref().and_then(|v| v.to_str().ok())
}

/// Writes a value the proxy formats itself, between quotes in JSON.
fn quoted(out: &mut String, json: bool, write: impl FnOnce(&mut String)) {
    if json {
        out.push('"');
        write(out);
        out.push('"');
    } else {
        write(out);
    }
}

fn push_null(out: &mut String, json: bool) {
    out.push_str(if json { "null" } else { "-" });
}

fn push_num(out: &mut String, json: bool, n: Option<u64>) {
    match n {
        Some(n) => out.push_str(itoa::Buffer::new().format(n)),
        None => push_null(out, json),
    }
}

/// A duration as seconds with six decimals.
fn push_seconds(out: &mut String, json: bool, d: Option<Duration>) {
    match d {
        Some(d) => {
            out.push_str(itoa::Buffer::new().format(d.as_secs()));
            out.push('.');
            push_padded(out, d.subsec_micros(), 6);
        }
        None => push_null(out, json),
    }
}

/// A string from the request or the configuration: escaped as JSON, or in text quoted (Rust's
/// debug form) when it would not read back as one value.
fn push_str(out: &mut String, json: bool, s: Option<&str>) {
    match s {
        Some(s) if json => push_json_string(out, s),
        Some(s) if s.is_empty() || s.bytes().any(|b| b" \"=\\".contains(&b)) => {
            let _ = write!(out, "{s:?}");
        }
        Some(s) => out.push_str(s),
        None => push_null(out, json),
    }
}

/// Appends `n` with at least `width` digits, zeros first (integer formatting without the
/// formatting machinery: lines carry several numbers each).
fn push_padded(out: &mut String, n: u32, width: usize) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n);
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(digits);
}

/// Appends `s` as a JSON string (RFC 8259: quote, backslash and control characters escaped).
/// Scans bytes: none of those is ever part of a multi-byte UTF-8 sequence. Most strings need
/// no escape, which one pass without early exit (vectorised by the compiler) tells.
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    let needs_escape = s.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if !needs_escape {
        out.push_str(s);
        out.push('"');
        return;
    }
    let mut rest = s;
    while let Some(at) = rest
        .bytes()
        .position(|b| b == b'"' || b == b'\\' || b < 0x20)
    {
        out.push_str(&rest[..at]);
        match rest.as_bytes()[at] {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b => {
                let _ = write!(out, "\\u{b:04x}");
            }
        }
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_with_nine_digits_across_seconds() {
        let mut clock = Clock::default();
        let at = |s: i64, ns: i32| jiff::Timestamp::new(s, ns).unwrap();
        let mut out = String::new();
        for (t, want) in [
            (at(1_796_000_000, 5), "2026-11-30T00:53:20.000000005Z"),
            (
                at(1_796_000_000, 999_999_999),
                "2026-11-30T00:53:20.999999999Z",
            ),
            (
                at(1_796_000_001, 120_000_000),
                "2026-11-30T00:53:21.120000000Z",
            ),
        ] {
            out.clear();
            clock.write(t, &mut out);
            assert_eq!(out, want);
            assert_eq!(out.parse::<jiff::Timestamp>().unwrap(), t);
        }
    }

    #[test]
    fn json_strings_escape_what_json_requires_and_nothing_else() {
        for s in [
            "plain",
            "a\"b",
            "back\\slash",
            "tab\tnew\nline\r",
            "\u{1}bell",
            "é ü ✓",
            "",
        ] {
            let mut out = String::new();
            push_json_string(&mut out, s);
            assert_eq!(out, serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }
}
