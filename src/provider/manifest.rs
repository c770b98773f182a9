//! Kubernetes manifests (multi-document YAML or JSON, `List` kinds expanded) parsed into
//! documents, and into the typed objects a [`crate::snapshot::Snapshot`] holds (see
//! [`super::objects`] for which kinds go where). Errors name the file, line and column. No I/O:
//! callers read files.

use std::path::{Path, PathBuf};

use serde::de::DeserializeSeed;
use serde_json::Value;

use super::objects::FileKinds;
use super::yaml::{Bounded, Budget};
use crate::kinds::KindSet;

pub use super::objects::Object;
pub use crate::snapshot::DEFAULT_NAMESPACE;

/// A manifest that could not be parsed, or an object that was not admitted.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}{}: {message}", path.display(), location(*line, *column))]
pub struct ManifestError {
    pub path: PathBuf,
    /// 1-based line of the problem, when the parser knows it.
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

fn location(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}

impl ManifestError {
    /// An error about the document starting at `line` of `path`.
    pub fn at(path: &Path, line: usize, message: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            line: Some(line),
            column: None,
            message: message.into(),
        }
    }

    fn from_yaml(path: &Path, e: &serde_yaml_ng::Error, doc_line: usize) -> Self {
        let (line, column) = match e.location() {
            Some(l) => (Some(l.line()), Some(l.column())),
            None => (Some(doc_line), None),
        };
        Self {
            path: path.to_owned(),
            line,
            column,
            message: e.to_string(),
        }
    }
}

/// One Kubernetes object of a manifest, as JSON, before defaulting: what `kubectl apply` would
/// send to the API server.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// 1-based line where its YAML document starts (items of a `List` share the list's line).
    pub line: usize,
    /// Index of its YAML document in the file, counting empty ones.
    pub index: usize,
    /// Where it sits in its YAML document: empty, or `items[3].` for an item of a `List`.
    pub field_prefix: String,
    pub api_version: String,
    pub kind: String,
    pub value: Value,
}

impl Document {
    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }

    /// `metadata.name`, empty when missing.
    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or("")
    }
}

/// A non-empty YAML (or JSON) document of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct RawDocument {
    /// Index in the file, counting empty documents.
    pub index: usize,
    /// 1-based line where it starts.
    pub line: usize,
    pub value: Value,
}

/// Every non-empty YAML (or JSON) document of `text`; `path` only labels errors. What the
/// documents expand to (aliases included) is bounded by [`Budget::for_text`]: beyond it the
/// file is an error.
pub fn parse_values(path: &Path, text: &str) -> Result<Vec<RawDocument>, ManifestError> {
    let mut out = Vec::new();
    // Document start lines, so errors inside a document without a location still name a line.
    let starts = document_lines(text);
    let budget = Budget::for_text(text.len());
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let doc_line = starts.get(i).copied().unwrap_or(1);
        let value = Bounded(&budget)
            .deserialize(doc)
            .map_err(|e| ManifestError::from_yaml(path, &e, doc_line))?;
        if !value.is_null() {
            out.push(RawDocument {
                index: i,
                line: doc_line,
                value,
            });
        }
    }
    Ok(out)
}

/// Splits `text` into its Kubernetes objects (`List`s expanded, empty documents skipped);
/// `path` only labels errors. A document without `apiVersion` and `kind`, or one of a kind a
/// [`crate::snapshot::Snapshot`] holds without `metadata.name`, is an error.
pub fn parse_documents(path: &Path, text: &str) -> Result<Vec<Document>, ManifestError> {
    parse_documents_for(FileKinds::snapshot(), path, text)
}

/// [`parse_documents`] for the kinds of any set: documents of its kinds need a name.
pub fn parse_documents_for<S: KindSet>(
    kinds: &FileKinds<S>,
    path: &Path,
    text: &str,
) -> Result<Vec<Document>, ManifestError> {
    let mut out = Vec::new();
    let named = |doc: &Document| !kinds.reads(doc) || !doc.name().is_empty();
    for raw in parse_values(path, text)? {
        let at = Position {
            line: raw.line,
            index: raw.index,
            field_prefix: String::new(),
        };
        split_value(path, raw.value, at, &named, &mut out)?;
    }
    Ok(out)
}

/// Parses every document of `text` into typed objects, defaulted and validated as a cluster
/// would do it ([`crate::admission::builtin`]): the first object that is refused is the error.
/// `path` only labels errors.
pub fn parse_manifests(path: &Path, text: &str) -> Result<Vec<Object>, ManifestError> {
    parse_admitted(path, text, true)
}

/// Parses every document of `text` into typed objects, defaulted as a cluster would default
/// them but not validated: for tests of how the translator copes with objects the API server
/// would refuse. `path` only labels errors.
pub fn parse_manifests_unvalidated(path: &Path, text: &str) -> Result<Vec<Object>, ManifestError> {
    parse_admitted(path, text, false)
}

fn parse_admitted(path: &Path, text: &str, validate: bool) -> Result<Vec<Object>, ManifestError> {
    let crds = crate::admission::builtin::crds();
    let admit = |value: &mut Value, line| {
        if validate {
            crds.admit(value, None)
                .map_err(|r| ManifestError::at(path, line, r.to_string()))
        } else {
            crds.apply_defaults(value);
            Ok(())
        }
    };
    parse_documents(path, text)?
        .into_iter()
        .map(|mut doc| {
            doc.normalize();
            let line = doc.line;
            admit(&mut doc.value, line)?;
            if crate::kinds::crd::needs_storage_conversion(&doc.value) {
                let stored = crate::kinds::crd::STORAGE_API_VERSION;
                doc.value = crate::kinds::crd::convert(doc.value.take(), stored)
                    .map_err(|e| ManifestError::at(path, line, e.to_string()))?;
                doc.api_version = stored.to_owned();
                admit(&mut doc.value, line)?;
            }
            doc.to_object()
                .map_err(|m| ManifestError::at(path, line, m))
        })
        .collect()
}

fn document_lines(text: &str) -> Vec<usize> {
    let mut starts = vec![1];
    for (n, line) in text.lines().enumerate() {
        if line.starts_with("---") && n > 0 {
            starts.push(n + 2);
        } else if line.starts_with("---") {
            starts[0] = 2;
        }
    }
    starts
}

/// Where a document sits in its file.
struct Position {
    line: usize,
    index: usize,
    field_prefix: String,
}

fn split_value(
    path: &Path,
    value: Value,
    at: Position,
    named: &dyn Fn(&Document) -> bool,
    out: &mut Vec<Document>,
) -> Result<(), ManifestError> {
    let line = at.line;
    let field = |name: &str| {
        value
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if !value.is_object() {
        return Err(ManifestError::at(
            path,
            line,
            "document is not a Kubernetes object",
        ));
    }
    if kind.is_empty() || api_version.is_empty() {
        return Err(ManifestError::at(
            path,
            line,
            "document has no `kind` or `apiVersion`",
        ));
    }
    if kind == "List" && !api_version.contains('/') {
        let Value::Object(mut map) = value else {
            return Ok(());
        };
        if let Some(Value::Array(items)) = map.remove("items") {
            for (i, item) in items.into_iter().enumerate() {
                let item_at = Position {
                    line,
                    index: at.index,
                    field_prefix: format!("{}items[{i}].", at.field_prefix),
                };
                split_value(path, item, item_at, named, out)?;
            }
        }
        return Ok(());
    }
    let doc = Document {
        line,
        index: at.index,
        field_prefix: at.field_prefix,
        api_version,
        kind,
        value,
    };
    if !named(&doc) {
        return Err(ManifestError::at(path, line, "object has no metadata.name"));
    }
    out.push(doc);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::kinds::httproute::HttpRoute;
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::core::v1::Secret;

    use super::*;

    #[test]
    fn reads_multi_document_yaml_with_defaults() {
        let text = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r\nspec: {}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n---\n";
        let objs = parse_manifests(Path::new("a.yaml"), text).unwrap();
        assert_eq!(objs.len(), 2);
        let Some(r) = objs[0].get::<HttpRoute>() else {
            panic!("not a route: {:?}", objs[0])
        };
        assert_eq!(r.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(r.metadata.generation, Some(1));
        assert!(matches!(&objs[1], Object::Skipped(u) if u.kind == "Deployment"));
    }

    #[test]
    fn syntax_errors_name_file_and_line() {
        let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n---\napiVersion: v1\nkind: Service\nmetadata: [oops\n";
        let e = parse_manifests(Path::new("dir/bad.yaml"), text).unwrap_err();
        assert_eq!(e.line, Some(9), "{e}");
        assert!(e.to_string().starts_with("dir/bad.yaml:9"), "{e}");
    }

    #[test]
    fn type_errors_name_the_document_line() {
        let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: t\nspec:\n  ports: 5\n";
        let e = parse_manifests(Path::new("x.yaml"), text).unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
    }

    #[test]
    fn secrets_decode_data_and_merge_string_data() {
        let text = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: SGVsbG8=\n  tls.key: b2xk\nstringData:\n  tls.key: new\n";
        let objs = parse_manifests(Path::new("s.yaml"), text).unwrap();
        let Some(s) = objs[0].get::<Secret>() else {
            panic!("not a secret: {:?}", objs[0])
        };
        assert_eq!(s.metadata.namespace.as_deref(), Some("default"));
        let data = s.data.as_ref().unwrap();
        assert_eq!(data["tls.crt"].0, b"Hello");
        assert_eq!(data["tls.key"].0, b"new");
        assert!(s.string_data.is_none());
        let bad = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {tls.crt: '%%%'}\n";
        assert!(parse_manifests(Path::new("b.yaml"), bad).is_err());
    }

    #[test]
    fn lists_are_expanded() {
        let text = r#"{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}]}"#;
        let objs = parse_manifests(Path::new("l.json"), text).unwrap();
        assert!(objs[0]
            .get::<Namespace>()
            .is_some_and(|n| n.metadata.namespace.is_none()));
    }
}
