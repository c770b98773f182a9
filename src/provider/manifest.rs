//! Kubernetes manifests (multi-document YAML or JSON, `List` kinds expanded) parsed into the typed
//! objects a [`Snapshot`] holds. Errors name the file, line and column. No I/O: callers read files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_yaml_ng::Value;

use crate::snapshot::Snapshot;

/// Namespace given to namespaced objects that name none, as `kubectl apply` would.
pub const DEFAULT_NAMESPACE: &str = "default";

/// One object read from a manifest.
#[derive(Debug, Clone)]
pub enum Object {
    GatewayClass(GatewayClass),
    Gateway(Gateway),
    HttpRoute(HttpRoute),
    ReferenceGrant(ReferenceGrant),
    Namespace(Namespace),
    Service(Service),
    EndpointSlice(EndpointSlice),
    /// A Secret; `stringData` is merged into `data` when parsed, as the API server does.
    Secret(Secret),
    /// A kind the product does not read (Deployments, ConfigMaps, ...), kept for one log line.
    Skipped {
        api_version: String,
        kind: String,
        name: String,
    },
}

/// A manifest that could not be parsed.
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

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

/// Parses every document of `text`; `path` only labels errors. Empty documents are skipped.
pub fn parse_manifests(path: &Path, text: &str) -> Result<Vec<Object>, ManifestError> {
    let mut out = Vec::new();
    // Document start lines, so errors inside a document without a location still name a line.
    let starts = document_lines(text);
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let doc_line = starts.get(i).copied().unwrap_or(1);
        let value =
            Value::deserialize(doc).map_err(|e| ManifestError::from_yaml(path, &e, doc_line))?;
        if value.is_null() {
            continue;
        }
        parse_value(path, value, doc_line, &mut out)?;
    }
    Ok(out)
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

fn parse_value(
    path: &Path,
    value: Value,
    line: usize,
    out: &mut Vec<Object>,
) -> Result<(), ManifestError> {
    let err = |message: String| ManifestError {
        path: path.to_owned(),
        line: Some(line),
        column: None,
        message,
    };
    let meta: TypeMeta = serde_yaml_ng::from_value(value.clone())
        .map_err(|e| err(format!("document is not a Kubernetes object: {e}")))?;
    if meta.kind.is_empty() || meta.api_version.is_empty() {
        return Err(err("document has no `kind` or `apiVersion`".into()));
    }
    let group = meta.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let obj = match (group, meta.kind.as_str()) {
        ("gateway.networking.k8s.io", "GatewayClass") => {
            Object::GatewayClass(de(path, value, line, false)?)
        }
        ("gateway.networking.k8s.io", "Gateway") => Object::Gateway(de(path, value, line, true)?),
        ("gateway.networking.k8s.io", "HTTPRoute") => {
            Object::HttpRoute(de(path, value, line, true)?)
        }
        ("gateway.networking.k8s.io", "ReferenceGrant") => {
            Object::ReferenceGrant(de(path, value, line, true)?)
        }
        ("", "Namespace") => Object::Namespace(de(path, value, line, false)?),
        ("", "Service") => Object::Service(de(path, value, line, true)?),
        ("discovery.k8s.io", "EndpointSlice") => {
            Object::EndpointSlice(de(path, value, line, true)?)
        }
        ("", "Secret") => Object::Secret(merge_string_data(de(path, value, line, true)?)),
        ("", "List") => {
            let items = value
                .get("items")
                .and_then(Value::as_sequence)
                .cloned()
                .unwrap_or_default();
            for item in items {
                parse_value(path, item, line, out)?;
            }
            return Ok(());
        }
        (_, kind) => Object::Skipped {
            api_version: meta.api_version.clone(),
            kind: kind.to_owned(),
            name: value
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        },
    };
    out.push(obj);
    Ok(())
}

/// Objects whose metadata the parser normalizes.
trait HasMeta {
    fn meta_mut(&mut self) -> &mut ObjectMeta;
}

macro_rules! has_meta {
    ($($t:ty),*) => { $(impl HasMeta for $t { fn meta_mut(&mut self) -> &mut ObjectMeta { &mut self.metadata } })* };
}
has_meta!(
    GatewayClass,
    Gateway,
    HttpRoute,
    ReferenceGrant,
    Namespace,
    Service,
    EndpointSlice,
    Secret
);

/// Moves `stringData` into `data` (`stringData` wins on equal keys), as the API server does on
/// write, so the translator reads one map.
fn merge_string_data(mut secret: Secret) -> Secret {
    if let Some(strings) = secret.string_data.take() {
        let data = secret.data.get_or_insert_with(Default::default);
        for (k, v) in strings {
            data.insert(k, k8s_openapi::ByteString(v.into_bytes()));
        }
    }
    secret
}

fn de<T: DeserializeOwned + HasMeta>(
    path: &Path,
    value: Value,
    line: usize,
    namespaced: bool,
) -> Result<T, ManifestError> {
    let mut obj: T = serde_yaml_ng::from_value(value).map_err(|e| ManifestError {
        path: path.to_owned(),
        line: Some(line),
        column: None,
        message: e.to_string(),
    })?;
    let meta = obj.meta_mut();
    if meta.name.as_deref().unwrap_or("").is_empty() {
        return Err(ManifestError {
            path: path.to_owned(),
            line: Some(line),
            column: None,
            message: "object has no metadata.name".into(),
        });
    }
    if namespaced && meta.namespace.is_none() {
        meta.namespace = Some(DEFAULT_NAMESPACE.to_owned());
    }
    // Standalone objects have no API server to count generations: start at 1.
    if meta.generation.is_none() {
        meta.generation = Some(1);
    }
    meta.managed_fields = None;
    Ok(obj)
}

impl Snapshot {
    /// Adds one parsed object; skipped kinds are ignored (the caller logs them).
    pub fn insert(&mut self, object: Object) {
        match object {
            Object::GatewayClass(o) => self.gateway_classes.push(Arc::new(o)),
            Object::Gateway(o) => self.gateways.push(Arc::new(o)),
            Object::HttpRoute(o) => self.http_routes.push(Arc::new(o)),
            Object::ReferenceGrant(o) => self.reference_grants.push(Arc::new(o)),
            Object::Namespace(o) => self.namespaces.push(Arc::new(o)),
            Object::Service(o) => self.services.push(Arc::new(o)),
            Object::EndpointSlice(o) => self.endpoint_slices.push(Arc::new(o)),
            Object::Secret(o) => self.secrets.push(Arc::new(o)),
            Object::Skipped { .. } => {}
        }
    }

    /// A snapshot of the given objects.
    pub fn from_objects(objects: impl IntoIterator<Item = Object>) -> Self {
        let mut s = Self::default();
        for o in objects {
            s.insert(o);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_multi_document_yaml_with_defaults() {
        let text = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r\nspec: {}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n---\n";
        let objs = parse_manifests(Path::new("a.yaml"), text).unwrap();
        assert_eq!(objs.len(), 2);
        let Object::HttpRoute(r) = &objs[0] else {
            panic!("not a route: {:?}", objs[0])
        };
        assert_eq!(r.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(r.metadata.generation, Some(1));
        assert!(matches!(&objs[1], Object::Skipped { kind, .. } if kind == "Deployment"));
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
        let Object::Secret(s) = &objs[0] else {
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
        assert!(matches!(&objs[0], Object::Namespace(n) if n.metadata.namespace.is_none()));
    }
}
