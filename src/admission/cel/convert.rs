//! JSON to CEL values, typed by the schema as the API server types them (integer vs number,
//! object properties vs map entries), with Kubernetes' escaping of property names that are not
//! CEL identifiers. Strings borrow from the JSON: no text is copied.

use std::borrow::Cow;
use std::collections::HashMap;

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use serde_json::Value;

use crate::admission::schema::{Additional, Schema, SchemaType};

/// CEL's reserved words: a property with one of these names is reachable as `__name__`.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL name of a property (Kubernetes' `Escape`): `__namespace__` for `namespace`,
/// `__dash__`, `__dot__`, `__slash__`, `__underscores__`; `None` when it cannot be accessed.
pub(crate) fn escape(name: &str) -> Option<Cow<'_, str>> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(Cow::Owned(format!("__{name}__")));
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if name.chars().all(plain) && !name.contains("__") {
        return Some(Cow::Borrowed(name));
    }
    let mut out = String::with_capacity(name.len() + 8);
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(tail) = rest.strip_prefix("__") {
            out.push_str("__underscores__");
            rest = tail;
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if plain(c) => out.push(c),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(Cow::Owned(out))
}

/// Converts `v` to a CEL value, typed by `schema` where one is known.
pub(crate) fn to_val<'a>(v: &'a Value, schema: Option<&Schema>) -> Box<dyn Val + 'a> {
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => {
            let as_double = schema.and_then(|s| s.ty) == Some(SchemaType::Number);
            match (n.as_i64(), n.as_u64()) {
                (Some(i), _) if !as_double => Box::new(CelInt::from(i)),
                (None, Some(u)) if !as_double => Box::new(CelUInt::from(u)),
                _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
            }
        }
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.items.as_deref());
            let list: Vec<Box<dyn Val + 'a>> =
                items.iter().map(|i| to_val(i, item_schema)).collect();
            Box::new(CelList::from(list))
        }
        Value::Object(map) => {
            let map_schema = schema.and_then(|s| match &s.additional {
                Additional::Schema(a) if s.properties.is_empty() => Some(a.as_ref()),
                _ => None,
            });
            let mut out: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> =
                HashMap::with_capacity(map.len());
            for (name, child) in map {
                if let Some(add) = map_schema {
                    out.insert(CelMapKey::from(name.as_str()), to_val(child, Some(add)));
                    continue;
                }
                let key = match escape(name) {
                    Some(Cow::Borrowed(k)) => CelMapKey::from(k),
                    Some(Cow::Owned(k)) => CelMapKey::from(k),
                    None => continue,
                };
                out.insert(key, to_val(child, schema.and_then(|s| s.child(name))));
            }
            Box::new(CelMap::from(out))
        }
    }
}

/// The key under which [`to_val`] stored property or entry `name` of an object node.
pub(crate) fn key_for<'n>(schema: &Schema, name: &'n str) -> Option<Cow<'n, str>> {
    match &schema.additional {
        Additional::Schema(_) if schema.properties.is_empty() => Some(Cow::Borrowed(name)),
        _ => escape(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_kubernetes() {
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("foo-bar").as_deref(), Some("foo__dash__bar"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("plain_name").as_deref(), Some("plain_name"));
        assert_eq!(escape("1abc"), None);
        assert_eq!(escape("a b"), None);
    }
}
