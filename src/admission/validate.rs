//! OpenAPI schema validation of a (defaulted) object, with the checks and wording of the API
//! server's kube-openapi validator, plus strict field validation (unknown fields) and the
//! list-type uniqueness rules. CEL rules are evaluated separately, in `cel`.

use serde_json::Value;

use super::errors::{go_quote, render_value, FieldError, FieldErrorType};
use super::formats;
use super::schema::{Additional, ListType, Schema, SchemaType};

/// How a node is being validated: as part of the object (strict: unknown fields and required
/// properties reported) or as one branch of anyOf/oneOf/allOf/not (value checks only).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Strict,
    Branch,
}

/// Validates the root object against its schema, appending errors in document order.
pub(crate) fn validate_root(schema: &Schema, value: &Value, errors: &mut Vec<FieldError>) {
    let mut path = String::new();
    node(schema, value, &mut path, errors, Mode::Strict, true);
}

/// The JSON type name kube-openapi reports for a value.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(ty: SchemaType, v: &Value) -> bool {
    match (ty, v) {
        (SchemaType::Object, Value::Object(_))
        | (SchemaType::Array, Value::Array(_))
        | (SchemaType::String, Value::String(_))
        | (SchemaType::Boolean, Value::Bool(_))
        | (SchemaType::Number, Value::Number(_)) => true,
        (SchemaType::Integer, Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

/// `path` joined with a property name, as field.Path renders it.
pub(crate) fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn type_error(path: &str, expected: &str, v: &Value) -> FieldError {
    let actual = json_type(v);
    FieldError::new(
        path,
        FieldErrorType::TypeInvalid,
        Some(go_quote(actual)),
        format!(
            "{path} in body must be of type {expected}: {}",
            go_quote(actual)
        ),
    )
}

fn node(
    s: &Schema,
    v: &Value,
    path: &mut String,
    errors: &mut Vec<FieldError>,
    mode: Mode,
    root: bool,
) {
    if v.is_null() && s.nullable {
        return;
    }
    if s.int_or_string {
        if !matches!(v, Value::String(_)) && !type_matches(SchemaType::Integer, v) {
            errors.push(type_error(path, "integer-or-string", v));
            return;
        }
    } else if let Some(ty) = s.ty {
        if !type_matches(ty, v) {
            errors.push(type_error(path, ty.name(), v));
            return;
        }
    }
    if let Some(allowed) = &s.enum_values {
        if !allowed.contains(v) {
            let values: Vec<String> = allowed
                .iter()
                .map(|a| match a {
                    Value::String(s) => go_quote(s),
                    other => go_quote(&other.to_string()),
                })
                .collect();
            errors.push(FieldError::new(
                path,
                FieldErrorType::Unsupported,
                Some(render_value(v)),
                format!("supported values: {}", values.join(", ")),
            ));
        }
    }
    match v {
        Value::String(text) => string(s, v, text, path, errors),
        Value::Number(n) => number(s, v, n.as_f64().unwrap_or(f64::NAN), path, errors),
        Value::Array(items) => array(s, items, path, errors, mode),
        Value::Object(map) => object(s, map, path, errors, mode, root),
        _ => {}
    }
    combinators(s, v, path, errors);
}

fn string(s: &Schema, v: &Value, text: &str, path: &str, errors: &mut Vec<FieldError>) {
    let len = text.chars().count() as u64;
    if let Some(max) = s.max_length.filter(|m| len > *m) {
        errors.push(FieldError::new(
            path,
            FieldErrorType::TooLong,
            Some(render_value(v)),
            format!("may not be more than {max} bytes"),
        ));
    }
    if let Some(min) = s.min_length.filter(|m| len < *m) {
        errors.push(FieldError::invalid(
            path,
            v,
            format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some((source, re)) = &s.pattern {
        if !re.is_match(text) {
            errors.push(FieldError::invalid(
                path,
                v,
                format!("{path} in body should match '{source}'"),
            ));
        }
    }
    if let Some(format) = &s.format {
        if formats::check(format, text) == Some(false) {
            errors.push(FieldError::invalid(
                path,
                v,
                format!(
                    "{path} in body must be of type {format}: {}",
                    go_quote(text)
                ),
            ));
        }
    }
}

fn number(s: &Schema, v: &Value, n: f64, path: &str, errors: &mut Vec<FieldError>) {
    let bound = |b: f64| {
        if b.fract() == 0.0 && b.abs() < 1e15 {
            format!("{}", b as i64)
        } else {
            format!("{b}")
        }
    };
    if let Some(min) = s.minimum {
        let (bad, words) = if s.exclusive_minimum {
            (n <= min, "greater than")
        } else {
            (n < min, "greater than or equal to")
        };
        if bad {
            let detail = format!("{path} in body should be {words} {}", bound(min));
            errors.push(FieldError::invalid(path, v, detail));
        }
    }
    if let Some(max) = s.maximum {
        let (bad, words) = if s.exclusive_maximum {
            (n >= max, "less than")
        } else {
            (n > max, "less than or equal to")
        };
        if bad {
            let detail = format!("{path} in body should be {words} {}", bound(max));
            errors.push(FieldError::invalid(path, v, detail));
        }
    }
}

fn array(s: &Schema, items: &[Value], path: &mut String, errors: &mut Vec<FieldError>, mode: Mode) {
    let n = items.len() as u64;
    if let Some(max) = s.max_items.filter(|m| n > *m) {
        errors.push(FieldError::new(
            path,
            FieldErrorType::TooMany,
            Some(n.to_string()),
            format!("must have at most {max} items"),
        ));
    }
    if let Some(min) = s.min_items.filter(|m| n < *m) {
        errors.push(FieldError::new(
            path,
            FieldErrorType::Invalid,
            Some(n.to_string()),
            format!("{path} in body should have at least {min} items"),
        ));
    }
    match &s.list_type {
        Some(ListType::Set) => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    let field = format!("{path}[{i}]");
                    let rendered = Some(render_value(item));
                    errors.push(FieldError::new(
                        &field,
                        FieldErrorType::Duplicate,
                        rendered,
                        "",
                    ));
                }
            }
        }
        Some(ListType::Map(keys)) => {
            let key_of = |item: &Value| -> Value {
                let mut m = serde_json::Map::new();
                for k in keys {
                    if let Some(kv) = item.get(k) {
                        m.insert(k.clone(), kv.clone());
                    }
                }
                Value::Object(m)
            };
            let all: Vec<Value> = items.iter().map(key_of).collect();
            for (i, key) in all.iter().enumerate() {
                if all[..i].contains(key) {
                    let field = format!("{path}[{i}]");
                    let rendered = Some(render_value(key));
                    errors.push(FieldError::new(
                        &field,
                        FieldErrorType::Duplicate,
                        rendered,
                        "",
                    ));
                }
            }
        }
        _ => {}
    }
    if let Some(item_schema) = &s.items {
        let base = path.len();
        for (i, item) in items.iter().enumerate() {
            path.push_str(&format!("[{i}]"));
            node(item_schema, item, path, errors, mode, false);
            path.truncate(base);
        }
    }
}

fn object(
    s: &Schema,
    map: &serde_json::Map<String, Value>,
    path: &mut String,
    errors: &mut Vec<FieldError>,
    mode: Mode,
    root: bool,
) {
    let n = map.len() as u64;
    if let Some(max) = s.max_properties.filter(|m| n > *m) {
        errors.push(FieldError::new(
            path,
            FieldErrorType::TooMany,
            Some(n.to_string()),
            format!("must have at most {max} items"),
        ));
    }
    if let Some(min) = s.min_properties.filter(|m| n < *m) {
        errors.push(FieldError::new(
            path,
            FieldErrorType::Invalid,
            Some(n.to_string()),
            format!("{path} in body should have at least {min} properties"),
        ));
    }
    let mut required: Vec<&str> = s.required.iter().map(String::as_str).collect();
    if s.embedded_resource && mode == Mode::Strict {
        required.extend(["apiVersion", "kind"]);
    }
    for name in required {
        if !map.contains_key(name) {
            errors.push(FieldError::required(&child_path(path, name), ""));
        }
    }
    let base = path.len();
    for (name, value) in map {
        if root && name == "metadata" {
            continue; // ObjectMeta is validated by the API machinery, not the CRD schema.
        }
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(name);
        if let Some(prop) = s.properties.get(name) {
            node(prop, value, path, errors, mode, false);
        } else if let Additional::Schema(add) = &s.additional {
            node(add, value, path, errors, mode, false);
        } else if mode == Mode::Strict && !allows_unknown(s, name, root) {
            errors.push(FieldError::new(
                path,
                FieldErrorType::UnknownField,
                None,
                "",
            ));
        }
        path.truncate(base);
    }
}

/// Whether a property the schema does not declare is kept rather than reported.
fn allows_unknown(s: &Schema, name: &str, root: bool) -> bool {
    s.preserve_unknown
        || matches!(s.additional, Additional::Allowed(true))
        || ((root || s.embedded_resource) && matches!(name, "apiVersion" | "kind" | "metadata"))
}

/// anyOf / oneOf / allOf / not: value validations only, as structural schemas allow.
fn combinators(s: &Schema, v: &Value, path: &mut String, errors: &mut Vec<FieldError>) {
    let passes = |branch: &Schema, path: &mut String| {
        let mut errs = Vec::new();
        node(branch, v, path, &mut errs, Mode::Branch, false);
        errs
    };
    let type_name = || go_quote(json_type(v));
    for branch in &s.all_of {
        errors.extend(passes(branch, path));
    }
    if !s.any_of.is_empty() && !s.any_of.iter().any(|b| passes(b, path).is_empty()) {
        errors.push(FieldError::new(
            path,
            FieldErrorType::Invalid,
            Some(type_name()),
            format!(
                "{} must validate at least one schema (anyOf)",
                go_quote(path)
            ),
        ));
    }
    if !s.one_of.is_empty() {
        let valid = s
            .one_of
            .iter()
            .filter(|b| passes(b, path).is_empty())
            .count();
        if valid != 1 {
            let found = if valid == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {valid} valid alternatives")
            };
            errors.push(FieldError::new(
                path,
                FieldErrorType::Invalid,
                Some(type_name()),
                format!(
                    "{} must validate one and only one schema (oneOf). {found}",
                    go_quote(path)
                ),
            ));
        }
    }
    if let Some(not) = &s.not {
        if passes(not, path).is_empty() {
            errors.push(FieldError::new(
                path,
                FieldErrorType::Invalid,
                Some(type_name()),
                format!("{} must not validate the schema (not)", go_quote(path)),
            ));
        }
    }
}
