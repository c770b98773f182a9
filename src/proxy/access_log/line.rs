//! An access log line as text: JSON or `key=value`, the entry's chosen fields in order,
//! written straight into the writer thread's reused buffer (no allocation per field or line).

use std::fmt::Write as _;

use http::HeaderValue;

use super::{Entry, Field};
use crate::table::{AccessLogFormat, RouteRule};

/// A field's value before it is written in the line's format.
enum Value<'a> {
    Str(&'a str),
    Num(u64),
    Float(f64),
    Null,
}

/// A header's text, or nothing.
fn header(v: &Option<HeaderValue>) -> Value<'_> {
    match v.as_ref().and_then(|v| v.to_str().ok()) {
        Some(s) => Value::Str(s),
        None => Value::Null,
    }
}

fn seconds(d: Option<std::time::Duration>) -> Value<'static> {
    d.map_or(Value::Null, |d| Value::Float(d.as_secs_f64()))
}

impl Entry {
    /// The value of `field`: borrowed from the entry, or (for values that need formatting)
    /// written into `scratch` and returned as [`Value::Null`] with `scratch` non-empty.
    fn value(&self, field: Field, scratch: &mut String) -> Value<'_> {
        scratch.clear();
        match field {
            Field::Time => {
                let _ = write!(scratch, "{}", self.time);
            }
            Field::ClientAddress => {
                let _ = write!(scratch, "{}", self.client);
            }
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
                    let _ = write!(scratch, "{}/{}", r.kind(), r.label());
                }
            }
            Field::Rule => match self.rule.as_deref() {
                Some(RouteRule {
                    rule_name: Some(name),
                    ..
                }) => return Value::Str(name),
                // An index is a string too: the field has one type.
                Some(r) => {
                    let _ = write!(scratch, "{}", r.rule_index);
                }
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
    pub(crate) fn write_line(&self, out: &mut String, scratch: &mut String) {
        let json = self.spec.format == AccessLogFormat::Json;
        if json {
            out.push('{');
        }
        for (i, field) in self.spec.fields.iter().enumerate() {
            let value = match self.value(*field, scratch) {
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
                Value::Num(n) => {
                    let _ = write!(out, "{n}");
                }
                Value::Float(f) => {
                    let _ = write!(out, "{f:.6}");
                }
                Value::Null if json => out.push_str("null"),
                Value::Null => out.push('-'),
                Value::Str(s) if json => push_json_string(out, s),
                Value::Str(s) if s.is_empty() || s.contains([' ', '"', '=', '\\']) => {
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
        self.write_line(&mut out, &mut String::new());
        out
    }
}

/// Appends `s` as a JSON string (RFC 8259: quote, backslash and control characters escaped).
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    let mut rest = s;
    while let Some(at) = rest.find(|c: char| c == '"' || c == '\\' || c < ' ') {
        out.push_str(&rest[..at]);
        let c = rest[at..].chars().next().unwrap_or(' ');
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
        }
        rest = &rest[at + c.len_utf8()..];
    }
    out.push_str(rest);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

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
