//! Rules about one object that every write shares: `apiVersion` per served version, metadata
//! checks, what counts for `generation`, how main-resource and status writes split the object,
//! timestamps and `generateName` suffixes.

use serde_json::{json, Map, Value};

use super::error::ApiError;
use super::kinds::Kind;
use super::store::Target;

/// The object with `apiVersion` and `kind` of the version it is read at.
pub fn as_version(obj: &Value, kind: &Kind) -> Value {
    let mut obj = obj.clone();
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), json!(kind.api_version()));
        o.insert("kind".into(), json!(kind.kind));
    }
    obj
}

pub fn rv_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
}

/// Everything that counts for `generation`: the object without metadata and status.
pub fn content(obj: &Value) -> Value {
    let mut c = obj.clone();
    if let Some(o) = c.as_object_mut() {
        for field in ["metadata", "status", "apiVersion", "kind"] {
            o.remove(field);
        }
    }
    c
}

/// The new object of a write: main-resource writes keep the old status (when the kind has a
/// status subresource); status writes keep everything but the status.
pub fn split_status(kind: &Kind, old: &Value, body: Value, target: Target) -> Value {
    let (mut base, status_from) = match target {
        Target::Main if kind.status => (body, old),
        Target::Main => return body,
        Target::Status => (old.clone(), &body),
    };
    if let Some(o) = base.as_object_mut() {
        match status_from.get("status") {
            Some(s) => o.insert("status".into(), s.clone()),
            None => o.remove("status"),
        };
    }
    base
}

pub fn check_type(kind: &Kind, body: &Value) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let api_version = body.get("apiVersion").and_then(Value::as_str);
    let group = api_version.map(|v| v.rsplit_once('/').map_or("", |(g, _)| g));
    if group.is_some_and(|g| g != kind.group) {
        return Err(ApiError::bad_request(format!(
            "apiVersion {api_version:?} does not match the resource {}",
            kind.resource()
        )));
    }
    match body.get("kind").and_then(Value::as_str) {
        Some(k) if k != kind.kind => Err(ApiError::bad_request(format!(
            "kind {k} does not match the resource {}",
            kind.resource()
        ))),
        _ => Ok(()),
    }
}

pub fn check_namespace(
    kind: &Kind,
    ns: &str,
    meta: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    if !kind.namespaced {
        meta.remove("namespace");
        return Ok(());
    }
    match meta.get("namespace").and_then(Value::as_str) {
        Some(n) if !n.is_empty() && n != ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            meta.insert("namespace".into(), json!(ns));
            Ok(())
        }
    }
}

pub fn metadata_mut(obj: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the body must be a JSON object"))?;
    let meta = o.entry("metadata").or_insert_with(|| json!({}));
    if meta.is_null() {
        *meta = json!({});
    }
    meta.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

/// RFC 3339 with seconds, as Kubernetes writes timestamps.
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Five characters from the alphabet Kubernetes uses for `generateName`.
pub fn suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[fastrand::usize(..ALPHABET.len())] as char)
        .collect()
}

/// The `PartialObjectMetadata` (or `...List`) form of an object or list, answered when the
/// client asks for it in `Accept` (kube's `metadata_watcher`, `Api::get_metadata`).
pub fn metadata_only(v: &Value) -> Value {
    match v.get("items").and_then(Value::as_array) {
        Some(items) => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": v.get("metadata").cloned().unwrap_or_else(|| json!({})),
            "items": items.iter().map(metadata_only).collect::<Vec<_>>(),
        }),
        None => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": v.get("metadata").cloned().unwrap_or_else(|| json!({})),
        }),
    }
}
