//! Field errors and rejections, worded as the Kubernetes API server words them.
//! Owns only the error values and their `Display`; nothing here decides what is invalid.

use std::fmt;

use serde_json::Value;

/// Why an object was not admitted: every field error, in the API server's wording, so a user
/// sees in the log what `kubectl apply` would have printed for the same manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// `Kind.group`, e.g. `HTTPRoute.gateway.networking.k8s.io`.
    pub kind: String,
    /// `metadata.name` of the rejected object (empty when it has none).
    pub name: String,
    /// Every field error found, schema errors first, then CEL rule failures.
    pub errors: Vec<FieldError>,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?} is invalid: ", self.kind, self.name)?;
        match self.errors.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                f.write_str("[")?;
                for (i, e) in many.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl std::error::Error for Rejection {}

/// One invalid field, as `k8s.io/apimachinery/pkg/util/validation/field.Error`, so messages can
/// be compared one to one with the API server's.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Path of the field, e.g. `spec.rules[0].matches[0].path.value`.
    pub field: String,
    /// The class of error; decides the leading words of the message.
    pub error: FieldErrorType,
    /// The bad value, already rendered as the API server renders it (`"abc"`, `17`, `null`).
    pub value: Option<String>,
    /// Human-readable detail; may be empty.
    pub detail: String,
}

/// The error classes of `field.ErrorType` that admission can raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorType {
    /// A required field is missing: `Required value`.
    Required,
    /// A value failed a check: `Invalid value`.
    Invalid,
    /// A value outside an enum: `Unsupported value`.
    Unsupported,
    /// A string longer than `maxLength`: `Too long`.
    TooLong,
    /// A list or map larger than its maximum: `Too many`.
    TooMany,
    /// A repeated set item or list-map key: `Duplicate value`.
    Duplicate,
    /// A value that may not be set: `Forbidden`.
    Forbidden,
    /// A value of the wrong JSON type: worded `Invalid value` like the API server does.
    TypeInvalid,
    /// A field the schema does not declare (strict field validation), worded as the API
    /// server's structured merge reports it: `field not declared in schema`.
    UnknownField,
}

impl FieldErrorType {
    /// The leading words of the message, as `field.ErrorType.String()`.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldErrorType::Required => "Required value",
            FieldErrorType::Invalid | FieldErrorType::TypeInvalid => "Invalid value",
            FieldErrorType::Unsupported => "Unsupported value",
            FieldErrorType::TooLong => "Too long",
            FieldErrorType::TooMany => "Too many",
            FieldErrorType::Duplicate => "Duplicate value",
            FieldErrorType::Forbidden => "Forbidden",
            FieldErrorType::UnknownField => "field not declared in schema",
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.error.as_str())?;
        // Like field.Error.ErrorBody: these types never print the bad value.
        let omit = matches!(
            self.error,
            FieldErrorType::Required
                | FieldErrorType::Forbidden
                | FieldErrorType::TooLong
                | FieldErrorType::UnknownField
        );
        if let (false, Some(v)) = (omit, &self.value) {
            write!(f, ": {v}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl FieldError {
    /// A field error with a rendered value.
    pub(crate) fn new(
        field: &str,
        error: FieldErrorType,
        value: Option<String>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            field: field.to_string(),
            error,
            value,
            detail: detail.into(),
        }
    }

    /// `Required value`, with an optional detail.
    pub(crate) fn required(field: &str, detail: impl Into<String>) -> Self {
        FieldError::new(field, FieldErrorType::Required, None, detail)
    }

    /// `Invalid value: <value>: <detail>`.
    pub(crate) fn invalid(field: &str, value: &Value, detail: impl Into<String>) -> Self {
        FieldError::new(
            field,
            FieldErrorType::Invalid,
            Some(render_value(value)),
            detail,
        )
    }
}

/// Renders a JSON value as `field.Error` prints a bad value: strings `%q`, numbers and booleans
/// `%v`, null as `null`, objects and lists as Go's `%#v` of an unstructured value.
pub fn render_value(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        _ => render_go_syntax(value),
    }
}

fn render_number(n: &serde_json::Number) -> String {
    match (n.as_i64(), n.as_u64(), n.as_f64()) {
        (Some(i), _, _) => i.to_string(),
        (_, Some(u), _) => u.to_string(),
        (_, _, Some(f)) => format!("{f}"),
        _ => n.to_string(),
    }
}

/// Go's `%#v` of an unstructured value, as nested inside maps and slices.
fn render_go_syntax(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => render_number(n),
        Value::String(s) => go_quote(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(render_go_syntax).collect();
            format!("[]interface {{}}{{{}}}", inner.join(", "))
        }
        Value::Object(map) => {
            // Go prints map keys sorted; serde_json's map is sorted by key too.
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), render_go_syntax(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", inner.join(", "))
        }
    }
}

/// Go's `strconv.Quote`: double quotes, backslash escapes, printable Unicode kept.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_error_display_follows_apimachinery() {
        let e = FieldError::required("spec.x", "");
        assert_eq!(e.to_string(), "spec.x: Required value");
        let e = FieldError::invalid("spec.x", &json!("abc"), "bad");
        assert_eq!(e.to_string(), r#"spec.x: Invalid value: "abc": bad"#);
        let e = FieldError::new(
            "spec.x",
            FieldErrorType::TooLong,
            Some("\"x\"".into()),
            "may not be more than 3 bytes",
        );
        assert_eq!(
            e.to_string(),
            "spec.x: Too long: may not be more than 3 bytes"
        );
        let e = FieldError::new(
            "spec.x",
            FieldErrorType::TooMany,
            Some("17".into()),
            "must have at most 16 items",
        );
        assert_eq!(
            e.to_string(),
            "spec.x: Too many: 17: must have at most 16 items"
        );
        let e = FieldError::new("spec.foo", FieldErrorType::UnknownField, None, "");
        assert_eq!(e.to_string(), "spec.foo: field not declared in schema");
    }

    #[test]
    fn values_render_like_go() {
        assert_eq!(render_value(&json!("a\"b\n")), r#""a\"b\n""#);
        assert_eq!(render_value(&json!(17)), "17");
        assert_eq!(render_value(&json!(1.5)), "1.5");
        assert_eq!(render_value(&json!(null)), "null");
        assert_eq!(
            render_value(&json!({"name": "a", "port": 80})),
            r#"map[string]interface {}{"name":"a", "port":80}"#
        );
    }

    #[test]
    fn rejection_lists_several_errors_in_brackets() {
        let r = Rejection {
            kind: "Foo.example.com".into(),
            name: "x".into(),
            errors: vec![
                FieldError::required("spec.a", ""),
                FieldError::required("spec.b", ""),
            ],
        };
        assert_eq!(
            r.to_string(),
            r#"Foo.example.com "x" is invalid: [spec.a: Required value, spec.b: Required value]"#
        );
    }
}
