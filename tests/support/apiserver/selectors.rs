//! Label and field selectors as the API server parses them from `labelSelector` and
//! `fieldSelector`, and percent-decoding of query strings.

use serde_json::Value;

use super::store::ApiError;

/// One label requirement: `k=v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`.
#[derive(Debug, Clone)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// One field requirement on a dotted path (`metadata.name=x`, `spec.type!=y`).
#[derive(Debug, Clone)]
struct FieldReq {
    path: String,
    value: String,
    equal: bool,
}

/// Parsed `labelSelector` and `fieldSelector` of a list or watch.
#[derive(Debug, Clone, Default)]
pub struct Selectors {
    labels: Vec<LabelReq>,
    fields: Vec<FieldReq>,
}

impl Selectors {
    /// Parses both selectors; an empty string selects everything.
    pub fn parse(labels: &str, fields: &str) -> Result<Selectors, ApiError> {
        let mut out = Selectors::default();
        for part in split_top_level(labels) {
            out.labels.push(parse_label(&part)?);
        }
        for part in split_top_level(fields) {
            out.fields.push(parse_field(&part)?);
        }
        Ok(out)
    }

    /// `true` when `obj` satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        let labels_ok = self.labels.iter().all(|req| match req {
            LabelReq::Eq(k, v) => label(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => label(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelReq::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelReq::Exists(k) => label(k).is_some(),
            LabelReq::NotExists(k) => label(k).is_none(),
        });
        labels_ok
            && self.fields.iter().all(|req| {
                let actual = field_value(obj, &req.path);
                (actual == req.value) == req.equal
            })
    }
}

/// The string form of the field at a dotted path; absent fields read as "".
fn field_value(obj: &Value, path: &str) -> String {
    let pointer = format!("/{}", path.replace('.', "/"));
    match obj.pointer(&pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Splits on commas outside parentheses, dropping empty parts.
fn split_top_level(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn parse_label(part: &str) -> Result<LabelReq, ApiError> {
    let bad = || ApiError::bad_request(format!("unable to parse requirement: {part:?}"));
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(LabelReq::NotEq(k.trim().into(), v.trim().into()));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(LabelReq::Eq(k.trim().into(), v.trim().into()));
    }
    if let Some(k) = part.strip_prefix('!') {
        return Ok(LabelReq::NotExists(k.trim().into()));
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 1 {
        return Ok(LabelReq::Exists(words[0].into()));
    }
    let rest = words[1].trim();
    let (op, list) = rest.split_once(char::is_whitespace).ok_or_else(bad)?;
    let list = list.trim();
    let inner = list
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
        .ok_or_else(bad)?;
    let values = inner.split(',').map(|v| v.trim().to_string()).collect();
    match op {
        "in" => Ok(LabelReq::In(words[0].into(), values)),
        "notin" => Ok(LabelReq::NotIn(words[0].into(), values)),
        _ => Err(bad()),
    }
}

fn parse_field(part: &str) -> Result<FieldReq, ApiError> {
    let (path, value, equal) = if let Some((k, v)) = part.split_once("!=") {
        (k, v, false)
    } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        (k, v, true)
    } else {
        return Err(ApiError::bad_request(format!(
            "invalid field selector: {part:?}"
        )));
    };
    Ok(FieldReq {
        path: path.trim().to_string(),
        value: value.trim().to_string(),
        equal,
    })
}

/// Decodes an `application/x-www-form-urlencoded` query into pairs.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
