//! `x-kubernetes-validations`: rules compiled once when a CRD is registered, then evaluated at
//! every node that carries them with `self` (and `oldSelf` for transition rules) bound to that
//! node, reporting failures as the API server does.

mod convert;
mod library;

use std::borrow::Cow;

use cel::common::types::{CelInt, CelOptional, CelString};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, ExecutionError, Program};
use serde_json::Value;

use super::errors::{go_quote, FieldError, FieldErrorType};
use super::schema::{Additional, ListType, Schema};
use super::CrdError;

/// One compiled validation rule.
#[derive(Debug)]
pub(crate) struct Rule {
    /// The rule's source, as written in the CRD.
    pub source: String,
    program: Program,
    message: Option<String>,
    message_expression: Option<Program>,
    reason: FieldErrorType,
    /// Rendered suffix of `fieldPath` (e.g. `.name`, `[key]`), appended to the node's path.
    field_path: Option<String>,
    uses_old_self: bool,
    optional_old_self: bool,
}

impl Rule {
    /// Whether the rule is a transition rule (reads `oldSelf`).
    pub(crate) fn uses_old_self(&self) -> bool {
        self.uses_old_self
    }
}

fn compile(source: &str, path: &str, what: &str) -> Result<Program, CrdError> {
    let env = library::ENV
        .as_ref()
        .map_err(|e| CrdError::Library(e.clone()))?;
    env.compile(source).map_err(|e| CrdError::Rule {
        path: display_path(path).into_owned(),
        rule: source.to_string(),
        reason: format!("{what}: {e}"),
    })
}

/// Compiles rule number `index` of the schema node at `path` (`.spec.rules[*]`).
pub(crate) fn compile_rule(v: &Value, path: &str, index: usize) -> Result<Rule, CrdError> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let source = text("rule").ok_or_else(|| CrdError::BadSchema {
        path: format!("{path}.x-kubernetes-validations[{index}]"),
        reason: "rule is missing".into(),
    })?;
    let program = compile(&source, path, "compilation failed")?;
    let message_expression = match text("messageExpression") {
        Some(expr) => Some(compile(
            &expr,
            path,
            "messageExpression compilation failed",
        )?),
        None => None,
    };
    let reason = match text("reason").as_deref() {
        None | Some("FieldValueInvalid") => FieldErrorType::Invalid,
        Some("FieldValueForbidden") => FieldErrorType::Forbidden,
        Some("FieldValueRequired") => FieldErrorType::Required,
        Some("FieldValueDuplicate") => FieldErrorType::Duplicate,
        Some(other) => {
            return Err(CrdError::Rule {
                path: display_path(path).into_owned(),
                rule: source,
                reason: format!("unsupported reason {other:?}"),
            })
        }
    };
    let field_path = match text("fieldPath") {
        Some(fp) => Some(parse_field_path(&fp).ok_or_else(|| CrdError::Rule {
            path: display_path(path).into_owned(),
            rule: source.clone(),
            reason: format!("invalid fieldPath {fp:?}"),
        })?),
        None => None,
    };
    let uses_old_self = program.references().has_variable("oldSelf");
    Ok(Rule {
        message: text("message").filter(|m| !m.trim().is_empty()),
        message_expression,
        reason,
        field_path,
        uses_old_self,
        optional_old_self: v.get("optionalOldSelf").and_then(Value::as_bool) == Some(true),
        program,
        source,
    })
}

/// `fieldPath` (`.a.b`, `.a['b.c']`, `.list[0]`) rendered as a field.Path suffix.
fn parse_field_path(fp: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = fp;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let name = &r[..end];
            if name.is_empty() {
                return None;
            }
            out.push('.');
            out.push_str(name);
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = r[..end].trim_matches(|c| c == '\'' || c == '"');
            out.push_str(&format!("[{inner}]"));
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Root paths print as field.Path's nil path does.
fn display_path(path: &str) -> Cow<'_, str> {
    let trimmed = path.strip_prefix('.').unwrap_or(path);
    if trimmed.is_empty() {
        Cow::Borrowed("<nil>")
    } else {
        Cow::Borrowed(trimmed)
    }
}

/// Binds `self` and `oldSelf` for one evaluation without copying either value.
struct Vars<'b, 'v> {
    this: &'b (dyn Val + 'v),
    old: Option<&'b (dyn Val + 'v)>,
    optional_old: Option<Box<dyn Val + 'v>>,
}

impl VariableResolver for Vars<'_, '_> {
    fn resolve<'c>(&'c self, name: &str) -> Option<CowVal<'c, 'c>> {
        match name {
            "self" => Some(CowVal::Borrowed(self.this)),
            "oldSelf" => match (&self.optional_old, self.old) {
                (Some(opt), _) => Some(CowVal::Borrowed(opt.as_ref())),
                (None, Some(old)) => Some(CowVal::Borrowed(old)),
                (None, None) => None,
            },
            _ => None,
        }
    }
}

/// Evaluates every rule in `schema`'s tree over `value` (`old` for transition rules).
pub(crate) fn validate(
    schema: &Schema,
    value: &Value,
    old: Option<&Value>,
    errors: &mut Vec<FieldError>,
) {
    if !schema.any_rules {
        return;
    }
    let this = convert::to_val(value, Some(schema));
    let old_val = old.map(|o| (o, convert::to_val(o, Some(schema))));
    let old_ref = old_val.as_ref().map(|(o, v)| (*o, v.as_ref()));
    let mut path = String::new();
    walk(schema, value, this.as_ref(), old_ref, &mut path, errors);
}

type Node<'b, 'v> = (&'v Value, &'b (dyn Val + 'v));

fn walk<'b, 'v>(
    s: &Schema,
    v: &'v Value,
    cv: &'b (dyn Val + 'v),
    old: Option<Node<'b, 'v>>,
    path: &mut String,
    errors: &mut Vec<FieldError>,
) {
    if !s.any_rules || v.is_null() {
        return;
    }
    for rule in &s.rules {
        if rule.uses_old_self && old.is_none() && !rule.optional_old_self {
            continue;
        }
        evaluate(rule, s, cv, old.map(|o| o.1), path, errors);
    }
    let base = path.len();
    match v {
        Value::Object(map) => {
            for (name, child) in map {
                let Some(cs) = s.child(name) else { continue };
                if !cs.any_rules {
                    continue;
                }
                let Some(key) = convert::key_for(s, name) else {
                    continue;
                };
                let Some(ccv) = index(cv, CelString::from(key.as_ref())) else {
                    continue;
                };
                let old_child = old.and_then(|(ov, ocv)| {
                    let ov = ov.get(name)?;
                    Some((ov, index(ocv, CelString::from(key.as_ref()))?))
                });
                let is_map_entry = !s.properties.contains_key(name)
                    && matches!(s.additional, Additional::Schema(_));
                if is_map_entry {
                    path.push_str(&format!("[{name}]"));
                } else {
                    path.push('.');
                    path.push_str(name);
                }
                walk_cow(cs, child, ccv, old_child, path, errors);
                path.truncate(base);
            }
        }
        Value::Array(items) => {
            let Some(is) = s.items.as_deref().filter(|i| i.any_rules) else {
                return;
            };
            for (i, item) in items.iter().enumerate() {
                let Some(icv) = index(cv, CelInt::from(i as i64)) else {
                    continue;
                };
                let old_item = old.and_then(|o| correlate(s, item, o));
                path.push_str(&format!("[{i}]"));
                walk_cow(is, item, icv, old_item, path, errors);
                path.truncate(base);
            }
        }
        _ => {}
    }
}

/// Walks a child reached through the CEL indexer, borrowed when it can be.
fn walk_cow<'b, 'v>(
    s: &Schema,
    v: &'v Value,
    cv: CowVal<'b, 'v>,
    old: Option<(&'v Value, CowVal<'b, 'v>)>,
    path: &mut String,
    errors: &mut Vec<FieldError>,
) {
    let cv_ref: &dyn Val = match &cv {
        CowVal::Borrowed(b) => *b,
        CowVal::Owned(o) => o.as_ref(),
    };
    let old_ref = old.as_ref().map(|(ov, ocv)| {
        let r: &dyn Val = match ocv {
            CowVal::Borrowed(b) => *b,
            CowVal::Owned(o) => o.as_ref(),
        };
        (*ov, r)
    });
    walk(s, v, cv_ref, old_ref, path, errors);
}

fn index<'b, 'v>(cv: &'b (dyn Val + 'v), key: impl Val) -> Option<CowVal<'b, 'v>> {
    cv.as_indexer()?.get(&key).ok()
}

/// The old item of a `list-type: map` list with the same keys as `item` (Kubernetes correlates
/// only such lists for transition rules).
fn correlate<'b, 'v>(
    s: &Schema,
    item: &Value,
    (old_list, old_cv): Node<'b, 'v>,
) -> Option<(&'v Value, CowVal<'b, 'v>)> {
    let Some(ListType::Map(keys)) = &s.list_type else {
        return None;
    };
    let pos = old_list
        .as_array()?
        .iter()
        .position(|o| keys.iter().all(|k| o.get(k) == item.get(k)))?;
    let ov = old_list.as_array()?.get(pos)?;
    Some((ov, index(old_cv, CelInt::from(pos as i64))?))
}

fn evaluate(
    rule: &Rule,
    s: &Schema,
    cv: &dyn Val,
    old: Option<&dyn Val>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let Ok(env) = library::ENV.as_ref() else {
        return;
    };
    let optional_old = rule.optional_old_self.then(|| -> Box<dyn Val> {
        match old {
            Some(o) => Box::new(CelOptional::of(o.clone_as_boxed())),
            None => Box::new(CelOptional::none()),
        }
    });
    let vars = Vars {
        this: cv,
        old,
        optional_old,
    };
    let mut ctx = Context::with_env(env.clone());
    ctx.set_variable_resolver(&vars);
    let field = match &rule.field_path {
        Some(fp) => format!("{path}{fp}"),
        None => path.to_string(),
    };
    let field = display_path(&field).into_owned();
    let type_name = go_quote(s.ty.map(|t| t.name()).unwrap_or(""));
    let detail = match rule.program.execute(&ctx) {
        Ok(cel::Value::Bool(true)) => return,
        Ok(_) => failure_message(rule, &ctx),
        Err(e) => {
            errors.push(FieldError::new(
                &field,
                FieldErrorType::Invalid,
                Some(type_name),
                evaluation_error(&e, rule),
            ));
            return;
        }
    };
    let value = (rule.reason != FieldErrorType::Forbidden
        && rule.reason != FieldErrorType::Required)
        .then_some(type_name);
    let detail = if rule.reason == FieldErrorType::Duplicate {
        String::new()
    } else {
        detail
    };
    errors.push(FieldError::new(&field, rule.reason, value, detail));
}

/// The message of a failed rule: messageExpression, else message, else `failed rule: <rule>`.
fn failure_message(rule: &Rule, ctx: &Context) -> String {
    if let Some(expr) = &rule.message_expression {
        if let Ok(cel::Value::String(m)) = expr.execute(ctx) {
            let m = m.trim();
            if !m.is_empty() && !m.contains('\n') {
                return m.to_string();
            }
        }
    }
    match &rule.message {
        Some(m) => m.trim().to_string(),
        None => format!("failed rule: {}", rule.source.trim()),
    }
}

/// An evaluation error, worded as the API server words it.
fn evaluation_error(e: &ExecutionError, rule: &Rule) -> String {
    let what = rule.message.as_deref().unwrap_or(&rule.source).trim();
    match e {
        ExecutionError::NoSuchOverload(_) => format!(
            "'no such overload': call arguments did not match a supported operator, function or \
             macro signature for rule: {what}"
        ),
        ExecutionError::NoSuchKey(k) => format!("no such key: {k} evaluating rule: {what}"),
        other => format!("{other} evaluating rule: {what}"),
    }
}

/// The rules of a schema tree with the rule text, for callers that list what was compiled.
/// `(schema path, message)` of every rule with a fixed `message`.
pub(crate) fn rule_messages(schema: &Schema) -> Vec<(String, String)> {
    let mut out = Vec::new();
    schema.collect_rules("", &mut out);
    out.into_iter()
        .filter_map(|(p, r)| Some((display_path(&p).into_owned(), r.message.clone()?)))
        .collect()
}

pub(crate) fn rule_sources(schema: &Schema) -> Vec<(String, String)> {
    let mut out = Vec::new();
    schema.collect_rules("", &mut out);
    out.into_iter()
        .map(|(p, r)| (display_path(&p).into_owned(), r.source.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Errors of validating `value` against a string-typed node carrying `rule`.
    fn check(schema: Value, value: Value, old: Option<Value>) -> Vec<String> {
        let s = Schema::parse(&schema, "").unwrap_or_else(|e| panic!("{e}"));
        let mut errors = Vec::new();
        validate(&s, &value, old.as_ref(), &mut errors);
        errors.iter().map(ToString::to_string).collect()
    }

    fn rule(ty: &str, rule: &str) -> Value {
        json!({"type": ty, "x-kubernetes-validations": [{"rule": rule}]})
    }

    #[test]
    fn parser_accepts_kubernetes_syntax() {
        let ok = |r: &str, v: Value| {
            let errs = check(rule("string", r), v, None);
            assert!(errs.is_empty(), "{r}: {errs:?}");
        };
        ok(r#"self.matches(r"""^[a-z]+$""")"#, json!("abc"));
        ok(
            "duration(self) > duration('1h') && duration('500ms') < duration('1s')",
            json!("1h1m"),
        );
        ok(
            "format.dns1123Label().validate(self).hasValue() == false",
            json!("my-name"),
        );
        ok(
            "format.dns1123Label().validate('Bad_').hasValue()",
            json!("x"),
        );
        ok(
            "isIP(self) && ip(self).family() == 4 && !isIP('::ffff:1.2.3.4')",
            json!("10.1.2.3"),
        );
        ok("cidr('10.0.0.0/8').containsIP(self)", json!("10.1.2.3"));
        ok(
            "self.split('.')[0] == '10' && self.substring(3) == '1.2.3'",
            json!("10.1.2.3"),
        );
        ok(
            "'AbC'.lowerAscii() == 'abc' && 'abc'.upperAscii() == 'ABC'",
            json!("x"),
        );
        ok("self.find('[0-9]+') == '10'", json!("10.1"));
    }

    #[test]
    fn escaped_property_names() {
        let s = json!({"type": "object",
            "properties": {"namespace": {"type": "string"}, "a-b": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self.__namespace__ == self.a__dash__b"}]});
        assert!(check(s.clone(), json!({"namespace": "x", "a-b": "x"}), None).is_empty());
        assert_eq!(
            check(s, json!({"namespace": "x", "a-b": "y"}), None),
            [
                r#"<nil>: Invalid value: "object": failed rule: self.__namespace__ == self.a__dash__b"#
            ]
        );
    }
}
