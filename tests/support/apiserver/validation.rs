//! Server-side field validation (the `fieldValidation` query parameter) of the kinds whose
//! schemas edgeplane carries built in (every Gateway API kind it reads and the edgeplane.dev
//! kinds; see `edgeplane::admission::builtin`), checked against those same schemas:
//! `Strict` (what `kubectl` sends since 1.27) refuses a body with a field the schema does not
//! declare, with the API server's wording (`strict decoding error: unknown field "spec.x"`,
//! or `.spec.x: field not declared in schema` for server-side apply); `Warn` (the default)
//! drops such fields and answers a `Warning` header for each; `Ignore` drops them silently.
//! Bodies of create, update, merge and strategic-merge patches and apply are checked; a JSON
//! patch's operations are not. Only unknown fields are checked here: defaults, other schema
//! checks and CEL rules are the admission module's work, not the emulator's.

use serde_json::Value;

use edgeplane::admission::{builtin, FieldErrorType};

use super::error::ApiError;
use super::kinds::Kind;

/// The `fieldValidation` directive of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Strict,
    Warn,
    Ignore,
}

impl Mode {
    /// The directive of the query parameter; absent means `Warn`, as on the API server.
    pub fn from_query(value: Option<&str>) -> Result<Mode, ApiError> {
        match value {
            None | Some("") | Some("Warn") => Ok(Mode::Warn),
            Some("Strict") => Ok(Mode::Strict),
            Some("Ignore") => Ok(Mode::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation invalid value {other:?}: must be one of Ignore, Warn or Strict"
            ))),
        }
    }
}

/// The paths (`spec.rules[0].backendRef`) of the fields of `body` (an object of `kind`, whole
/// or partial) that its built-in schema does not declare; empty for kinds without one.
fn unknown_fields(body: &Value, kind: &Kind) -> Vec<String> {
    let mut object = body.clone();
    if let Some(map) = object.as_object_mut() {
        map.entry("apiVersion")
            .or_insert_with(|| Value::String(kind.api_version()));
        map.entry("kind")
            .or_insert_with(|| Value::String(kind.kind.clone()));
        if !map.contains_key("metadata") {
            map.insert("metadata".into(), serde_json::json!({"name": "x"}));
        }
    }
    match builtin::crds().admit(&mut object, None) {
        Ok(()) => Vec::new(),
        Err(r) => r
            .errors
            .into_iter()
            .filter(|e| e.error == FieldErrorType::UnknownField)
            .map(|e| e.field)
            .collect(),
    }
}

/// Applies `mode` to a request body: `Err` (400 BadRequest) for unknown fields under `Strict`,
/// else the body without them and the warnings to answer. `apply` selects the wording of a
/// server-side apply; `name` and `namespace` are the object's, for that wording.
pub fn check(
    body: &mut Value,
    kind: &Kind,
    mode: Mode,
    apply: Option<(&str, &str)>,
) -> Result<Vec<String>, ApiError> {
    let unknown = unknown_fields(body, kind);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    if mode == Mode::Strict {
        let message = match apply {
            Some((namespace, name)) => {
                let fields: Vec<String> = unknown
                    .iter()
                    .map(|f| format!(".{f}: field not declared in schema"))
                    .collect();
                let group_version = kind.api_version();
                let who = if namespace.is_empty() {
                    name.to_string()
                } else {
                    format!("{namespace}/{name}")
                };
                format!(
                    "failed to create typed patch object ({who}; {group_version}, Kind={}): {}",
                    kind.kind,
                    fields.join(", ")
                )
            }
            None => {
                let fields: Vec<String> = unknown
                    .iter()
                    .map(|f| format!("unknown field {f:?}"))
                    .collect();
                format!(
                    "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding \
                     error: {}",
                    fields.join(", "),
                    kind = kind.kind,
                    version = kind.version,
                )
            }
        };
        return Err(ApiError::bad_request(message));
    }
    for field in &unknown {
        remove(body, field);
    }
    Ok(match mode {
        Mode::Warn => unknown
            .iter()
            .map(|f| format!("unknown field {f:?}"))
            .collect(),
        _ => Vec::new(),
    })
}

/// Removes the field at `path` (`a.b[2].c`, as field errors render paths) from `value`.
fn remove(value: &mut Value, path: &str) {
    let mut steps: Vec<Step> = Vec::new();
    for part in path.split('.') {
        let (name, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        steps.push(Step::Key(name.to_string()));
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            match index.trim_end_matches(']').parse() {
                Ok(i) => steps.push(Step::Index(i)),
                Err(_) => return,
            }
        }
    }
    let Some((last, parents)) = steps.split_last() else {
        return;
    };
    let mut node = value;
    for step in parents {
        let next = match step {
            Step::Key(k) => node.get_mut(k.as_str()),
            Step::Index(i) => node.get_mut(*i),
        };
        match next {
            Some(n) => node = n,
            None => return,
        }
    }
    if let (Step::Key(k), Some(map)) = (last, node.as_object_mut()) {
        map.remove(k);
    }
}

enum Step {
    Key(String),
    Index(usize),
}
