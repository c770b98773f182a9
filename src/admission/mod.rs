//! Admission of custom resources, as the Kubernetes API server does it before any controller
//! sees an object: structural defaulting, then OpenAPI schema validation with strict field
//! validation, then the CRD's `x-kubernetes-validations` CEL rules.
//! Pure: JSON values in, results out; no I/O, no async, no Kubernetes client.

pub mod builtin;
mod cel;
mod default;
mod errors;
mod formats;
mod gateway_rules;
pub(crate) use gateway_rules::MAX_PARENT_REFS;
mod gateway_schema;
mod schema;
mod validate;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use errors::go_quote;
pub use errors::{render_value, FieldError, FieldErrorType, Rejection};
use schema::Schema;

/// Registry of CRD schemas by (group, kind) and version: what standalone mode admits objects
/// against, so files are held to the same rules a cluster would hold them to.
#[derive(Debug, Clone, Default)]
pub struct Crds {
    kinds: HashMap<(String, String), Arc<Crd>>,
}

/// One registered CRD: its display name, its served versions and a parsed schema per served
/// version. A CRD read from a file is parsed when registered; a built-in one when an object of
/// its kind is first admitted (see [`Crds::register_lazy`]).
#[derive(Debug)]
struct Crd {
    name: String,
    served: Vec<String>,
    versions: OnceLock<Option<HashMap<String, Arc<Schema>>>>,
    source: Option<Source>,
}

/// What makes a lazily registered CRD's `apiextensions.k8s.io/v1` object when it is first used.
type SourceFn = dyn Fn() -> Result<Value, CrdError> + Send + Sync;

/// The maker of a lazily registered CRD (a newtype for `Debug`).
struct Source(Box<SourceFn>);

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Source")
    }
}

impl Crd {
    /// The parsed schema of every served version, parsing a lazily registered CRD on first
    /// use; `None` when that fails (a bug in a built-in definition, logged once): the kind is
    /// then admitted unchanged, as an unregistered kind is.
    fn versions(&self) -> Option<&HashMap<String, Arc<Schema>>> {
        self.versions
            .get_or_init(|| {
                let source = self.source.as_ref()?;
                match (source.0)().and_then(|crd| parse_versions(&crd, &self.name)) {
                    Ok(parsed) => Some(parsed),
                    Err(e) => {
                        tracing::error!(crd = %self.name, error = %e, "built-in schema not usable");
                        None
                    }
                }
            })
            .as_ref()
    }
}

/// Parses the schema of every served version of a CRD object (`name` for errors). Versions
/// often carry the same schema: it is parsed (and its rules compiled) once.
fn parse_versions(crd: &Value, name: &str) -> Result<HashMap<String, Arc<Schema>>, CrdError> {
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .ok_or(CrdError::Missing {
            field: "spec.versions",
        })?;
    let mut parsed = HashMap::new();
    let mut seen: Vec<(&Value, Arc<Schema>)> = Vec::new();
    for v in versions {
        let served = v.get("served").and_then(Value::as_bool).unwrap_or(true);
        let (Some(version), Some(schema), true) = (
            v.get("name").and_then(Value::as_str),
            v.pointer("/schema/openAPIV3Schema"),
            served,
        ) else {
            continue;
        };
        if let Some((_, same)) = seen.iter().find(|(json, _)| *json == schema) {
            parsed.insert(version.to_owned(), same.clone());
            continue;
        }
        let compiled = Schema::parse(schema, "").map_err(|e| CrdError::InVersion {
            crd: name.to_owned(),
            version: version.to_owned(),
            source: Box::new(e),
        })?;
        let compiled = Arc::new(compiled);
        seen.push((schema, compiled.clone()));
        parsed.insert(version.to_owned(), compiled);
    }
    if parsed.is_empty() {
        return Err(CrdError::NoSchema {
            crd: name.to_owned(),
        });
    }
    Ok(parsed)
}

/// Why a CRD could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The object is not an `apiextensions.k8s.io/v1` CustomResourceDefinition.
    #[error("not an apiextensions.k8s.io/v1 CustomResourceDefinition (apiVersion {api_version:?}, kind {kind:?})")]
    NotACrd { api_version: String, kind: String },
    /// A field every CRD has is missing.
    #[error("CRD is missing {field}")]
    Missing { field: &'static str },
    /// No served version carries an `openAPIV3Schema`.
    #[error("CRD {crd} has no served version with an openAPIV3Schema")]
    NoSchema { crd: String },
    /// The schema is not a structural schema this engine understands.
    #[error("schema {path}: {reason}")]
    BadSchema { path: String, reason: String },
    /// A `pattern` that is not a valid RE2 regular expression.
    #[error("schema {path}: invalid pattern {pattern:?}: {reason}")]
    BadPattern {
        path: String,
        pattern: String,
        reason: String,
    },
    /// An `x-kubernetes-validations` rule that does not compile.
    #[error("rule {rule:?} at {path}: {reason}")]
    Rule {
        path: String,
        rule: String,
        reason: String,
    },
    /// The CEL library could not be built (a bug, not a CRD problem).
    #[error("CEL library: {0}")]
    Library(String),
    /// An error inside one version of a named CRD.
    #[error("CRD {crd} version {version}: {source}")]
    InVersion {
        crd: String,
        version: String,
        #[source]
        source: Box<CrdError>,
    },
}

impl Crds {
    /// An empty registry: every object is admitted unchanged until CRDs are registered.
    pub fn new() -> Self {
        Crds::default()
    }

    /// Registers every served version of one `apiextensions.k8s.io/v1` CustomResourceDefinition
    /// object (as JSON). A CRD for a group/kind already registered replaces it. Returns
    /// `"Kind.group"`. Every pattern and CEL rule is compiled here, once.
    pub fn register(&mut self, crd: &Value) -> Result<String, CrdError> {
        let text = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
        let api_version = text(crd, "/apiVersion").unwrap_or_default();
        let kind = text(crd, "/kind").unwrap_or_default();
        if api_version != "apiextensions.k8s.io/v1" || kind != "CustomResourceDefinition" {
            return Err(CrdError::NotACrd { api_version, kind });
        }
        let group = text(crd, "/spec/group").ok_or(CrdError::Missing {
            field: "spec.group",
        })?;
        let kind = text(crd, "/spec/names/kind").ok_or(CrdError::Missing {
            field: "spec.names.kind",
        })?;
        let name = format!("{kind}.{group}");
        let parsed = parse_versions(crd, &name)?;
        let mut served: Vec<String> = parsed.keys().cloned().collect();
        served.sort();
        let entry = Crd {
            name: name.clone(),
            served,
            versions: OnceLock::from(Some(parsed)),
            source: None,
        };
        self.kinds.insert((group, kind), Arc::new(entry));
        Ok(name)
    }

    /// Registers a CRD of `group` and `kind` served at `versions` without parsing it: `source`
    /// makes its `apiextensions.k8s.io/v1` object when an object of the kind is first admitted
    /// (or its rules are listed), and its schemas are parsed then, once. The built-in
    /// definitions are registered so: a process parses and keeps the schemas and CEL programs
    /// of the kinds it reads only. A CRD for a group/kind already registered replaces it.
    pub fn register_lazy(
        &mut self,
        group: &str,
        kind: &str,
        versions: &[&str],
        source: impl Fn() -> Result<Value, CrdError> + Send + Sync + 'static,
    ) {
        let mut served: Vec<String> = versions.iter().map(|v| (*v).to_owned()).collect();
        served.sort();
        let entry = Crd {
            name: format!("{kind}.{group}"),
            served,
            versions: OnceLock::new(),
            source: Some(Source(Box::new(source))),
        };
        self.kinds
            .insert((group.to_owned(), kind.to_owned()), Arc::new(entry));
    }

    /// Registers every kind of `other` here (sharing its parsed schemas), replacing kinds
    /// registered already.
    pub fn include(&mut self, other: &Crds) {
        for (key, crd) in &other.kinds {
            self.kinds.insert(key.clone(), crd.clone());
        }
    }

    /// True when a schema for this apiVersion ("group/version") and kind is registered.
    pub fn contains(&self, api_version: &str, kind: &str) -> bool {
        self.schema(api_version, kind).is_some()
    }

    /// `"Kind.group"` of every registered CRD, sorted, for logs and diagnostics.
    pub fn kinds(&self) -> Vec<String> {
        let mut names: Vec<String> = self.kinds.values().map(|c| c.name.clone()).collect();
        names.sort();
        names
    }

    /// Every compiled CEL rule of one registered kind and version as (schema path, rule), so
    /// callers can list what is enforced; empty when the kind is not registered.
    pub fn rules(&self, api_version: &str, kind: &str) -> Vec<(String, String)> {
        self.schema(api_version, kind)
            .map(|(_, s)| cel::rule_sources(s))
            .unwrap_or_default()
    }

    /// `(schema path, message)` of every CEL rule of one registered kind and version that has
    /// a fixed `message` (rules with only a `messageExpression` are left out), so tests can
    /// check each rule is exercised.
    pub fn rule_messages(&self, api_version: &str, kind: &str) -> Vec<(String, String)> {
        self.schema(api_version, kind)
            .map(|(_, s)| cel::rule_messages(s))
            .unwrap_or_default()
    }

    fn schema(&self, api_version: &str, kind: &str) -> Option<(&Crd, &Schema)> {
        let (group, version) = api_version.split_once('/')?;
        let crd = self.kinds.get(&(group.to_string(), kind.to_string()))?;
        Some((crd, crd.versions()?.get(version)?))
    }

    /// An object of a registered kind at a version its CRD does not serve is refused, as the
    /// API server has no such resource: it is neither defaulted nor validated, so admitting it
    /// would let anything through. Objects of unregistered kinds are admitted unchanged.
    fn unserved(&self, api_version: &str, kind: &str, object: &Value) -> Result<(), Rejection> {
        let (group, _) = api_version.split_once('/').unwrap_or(("", api_version));
        let Some(crd) = self.kinds.get(&(group.to_string(), kind.to_string())) else {
            return Ok(());
        };
        if crd.versions().is_none() {
            return Ok(());
        }
        let served: Vec<String> = crd
            .served
            .iter()
            .map(|v| go_quote(&format!("{group}/{v}")))
            .collect();
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Err(Rejection {
            kind: crd.name.clone(),
            name: name.to_string(),
            errors: vec![FieldError::new(
                "apiVersion",
                FieldErrorType::Unsupported,
                Some(go_quote(api_version)),
                format!("supported values: {}", served.join(", ")),
            )],
        })
    }

    /// Whether admitting a new version of an object of `kind` at `api_version` reads the
    /// previous version (its schema has transition rules): the file provider keeps the
    /// admitted version of such objects only.
    pub fn reads_old(&self, api_version: &str, kind: &str) -> bool {
        self.schema(api_version, kind)
            .is_some_and(|(_, s)| s.any_old_self)
    }

    /// Applies the schema's defaults to `object` in place without validating it: for tests of
    /// how the translator copes with objects a cluster's API server would refuse (they reach
    /// it when a cluster's CRDs are older or lack validation). Other kinds are left unchanged.
    pub fn apply_defaults(&self, object: &mut Value) {
        let api_version = object.get("apiVersion").and_then(Value::as_str);
        let kind = object.get("kind").and_then(Value::as_str);
        if let Some((_, schema)) = api_version.zip(kind).and_then(|(a, k)| self.schema(a, k)) {
            default::apply(schema, object);
        }
    }

    /// Applies the schema's defaults to `object` in place (structural defaulting, as the API
    /// server: missing property with a `default` gets a deep copy; recursion continues into
    /// newly defaulted values; arrays recurse into items; additionalProperties too), then
    /// validates it. `old` is the previously admitted version of the same object, for transition
    /// rules (`oldSelf`); rules that use oldSelf are skipped when there is no old value at that
    /// path (as Kubernetes does). Objects of unregistered kinds are returned Ok unchanged; an
    /// object of a registered kind at a version its CRD does not serve is refused.
    pub fn admit(&self, object: &mut Value, old: Option<&Value>) -> Result<(), Rejection> {
        let api_version = object.get("apiVersion").and_then(Value::as_str);
        let kind = object.get("kind").and_then(Value::as_str);
        let Some((api_version, kind)) = api_version.zip(kind) else {
            return Ok(());
        };
        let Some((crd, schema)) = self.schema(api_version, kind) else {
            return self.unserved(api_version, kind, object);
        };
        default::apply(schema, object);
        let mut errors = Vec::new();
        let meta = object.get("metadata");
        let name = meta
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let generate_name = meta
            .and_then(|m| m.get("generateName"))
            .and_then(Value::as_str);
        if name.is_empty() && generate_name.is_none_or(str::is_empty) {
            errors.push(FieldError::required(
                "metadata.name",
                "name or generateName is required",
            ));
        }
        validate::validate_root(schema, object, &mut errors);
        cel::validate(schema, object, old, &mut errors);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Rejection {
                kind: crd.name.clone(),
                name,
                errors,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_can_be_shared_across_threads() {
        fn shareable<T: Send + Sync + Clone + 'static>() {}
        shareable::<Crds>();
        fn error<T: std::error::Error + Send + Sync + 'static>() {}
        error::<CrdError>();
        error::<Rejection>();
    }
}
