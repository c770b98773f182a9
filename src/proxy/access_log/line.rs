//! An access log line as text: JSON or `key=value`, the entry's chosen fields in order,
//! written straight into a batch's reused buffer (no allocation per field or line).

use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::Duration;

use http::HeaderValue;

use super::{Entry, Field};
use crate::table::{AccessLogFormat, RouteRule};

/// A field's value before it is written in the line's format.
enum Value<'a> {
    Str(&'a str),
    Num(u64),
    /// A duration, written as seconds with six decimals.
    Seconds(Duration),
    Null,
}

/// A header's text, or nothing.
fn header(v: &Option<HeaderValue>) -> Value<'_> {
    match v.as_ref().and_then(|v| v.to_str().ok()) {
        Some(s) => Value::Str(s),
        None => Value::Null,
    }
}

fn seconds(d: Option<Duration>) -> Value<'static> {
    d.map_or(Value::Null, Value::Seconds)
}

/// A batch's reused scratch buffer and its clock.
#[derive(Default)]
pub(crate) struct LineWriter {
    scratch: String,
    clock: Clock,
}

impl LineWriter {
    /// Appends `entry`'s line, without its newline, to `out`.
    pub(crate) fn write(&mut self, entry: &Entry, out: &mut String) {
        entry.write_line(out, &mut self.scratch, &mut self.clock);
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

impl Entry {
    /// The value of `field`: borrowed from the entry, or (for values that need formatting)
    /// written into `scratch` and returned as [`Value::Null`] with `scratch` non-empty.
    fn value(&self, field: Field, scratch: &mut String, clock: &mut Clock) -> Value<'_> {
        scratch.clear();
        match field {
            Field::Time => clock.write(self.time, scratch),
            Field::ClientAddress => match self.client {
                IpAddr::V4(v4) => {
                    for (i, octet) in v4.octets().into_iter().enumerate() {
                        if i > 0 {
                            scratch.push('.');
                        }
                        scratch.push_str(itoa::Buffer::new().format(octet));
                    }
                }
                v6 => {
                    let _ = write!(scratch, "{v6}");
                }
            },
            Field::Method => {
                return self
                    .method
                    .as_ref()
                    .map_or(Value::Null, |m| Value::Str(m.as_str()))
            }
            Field::Host => return header(&self.host),
            Field::Path => return self.path.as_deref().map_or(Value::Null, Value::Str),
            Field::Protocol => return Value::Str(self.protocol),
            Field::Status => {
                return self
                    .status
                    .map_or(Value::Null, |s| Value::Num(u64::from(s)))
            }
            Field::Duration => {
                return seconds(Some(self.duration.unwrap_or_else(|| self.start.elapsed())))
            }
            Field::RequestBytes => return Value::Num(self.request_bytes),
            Field::ResponseBytes => return Value::Num(self.response_bytes),
            Field::Gateway | Field::Listener => {
                if let Some(source) = self.source() {
                    let _ = match field {
                        Field::Gateway => source.write_gateway(scratch),
                        _ => source.write_listener(scratch),
                    };
                }
            }
            Field::Route => {
                let route = self.rule.as_ref().map(|r| &r.route).or(self.route.as_ref());
                if let Some(r) = route {
                    scratch.push_str(r.kind());
                    scratch.push('/');
                    scratch.push_str(r.label());
                }
            }
            Field::Rule => match self.rule.as_deref() {
                Some(RouteRule {
                    rule_name: Some(name),
                    ..
                }) => return Value::Str(name),
                // An index is a string too: the field has one type.
                Some(r) => scratch.push_str(itoa::Buffer::new().format(r.rule_index)),
                None => {}
            },
            Field::Upstream => {
                if let Some(a) = self.upstream {
                    let _ = write!(scratch, "{a}");
                }
            }
            Field::UpstreamTime => return seconds(self.upstream_time),
            Field::Retries => return Value::Num(u64::from(self.retries)),
            Field::Decision => return self.decision.map_or(Value::Null, Value::Str),
            Field::UserAgent => return header(&self.user_agent),
            Field::RequestId => return header(&self.request_id),
            Field::TraceId => {
                if let Some(id) = self.trace_id {
                    let _ = write!(scratch, "{id:032x}");
                }
            }
        }
        Value::Null
    }

    /// Appends the line, without its newline, to `out`; `scratch` is a buffer to reuse.
    fn write_line(&self, out: &mut String, scratch: &mut String, clock: &mut Clock) {
        let json = self.spec.format == AccessLogFormat::Json;
        if json {
            out.push('{');
        }
        for (i, field) in self.spec.fields.iter().enumerate() {
            let value = match self.value(*field, scratch, clock) {
                Value::Null if !scratch.is_empty() => Value::Str(scratch.as_str()),
                v => v,
            };
            if i > 0 {
                out.push(if json { ',' } else { ' ' });
            }
            if json {
                out.push('"');
                out.push_str(field.name());
                out.push_str("\":");
            } else {
                out.push_str(field.name());
                out.push('=');
            }
            match value {
                Value::Num(n) => out.push_str(itoa::Buffer::new().format(n)),
                Value::Seconds(d) => {
                    out.push_str(itoa::Buffer::new().format(d.as_secs()));
                    out.push('.');
                    push_padded(out, d.subsec_micros(), 6);
                }
                Value::Null if json => out.push_str("null"),
                Value::Null => out.push('-'),
                Value::Str(s) if json => push_json_string(out, s),
                Value::Str(s) if s.is_empty() || s.bytes().any(|b| b" \"=\\".contains(&b)) => {
                    let _ = write!(out, "{s:?}");
                }
                Value::Str(s) => out.push_str(s),
            }
        }
        if json {
            out.push('}');
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
/// Scans bytes: none of those is ever part of a multi-byte UTF-8 sequence.
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
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
