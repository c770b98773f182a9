//! Conversion of whole objects (`apiVersion`, `metadata`, `spec`, `status` as JSON) between the
//! served versions of the edgeplane kinds, as the conversion webhook and the file provider
//! need it. Each kind has a pair of spec mappings (`convert_policy`, `convert_proxy`); what the
//! target version cannot hold travels in the annotation [`CONVERSION_ANNOTATION`] and is
//! restored (and the annotation removed) on the way back, so a round trip gives back the
//! object it started from. `status` has the same shape in every version. Pure: no I/O.
//!
//! The annotation holds `{"apiVersion": <the version it restores>, "spec": [entries]}`, each
//! entry `{"path": [...], "from": <value the mapping gives there>, "to": <value to restore>}`
//! (`from`/`to` left out for "absent"). An entry is applied only where the mapped object still
//! has its `from` value and only when restoring it leaves the meaning of the object as written
//! unchanged (`restore_kept`), so an edit made through the other version wins over every
//! kept value that belongs with it.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::GROUP;

/// The annotation that keeps, as JSON, what the other version of an object could not hold.
pub const CONVERSION_ANNOTATION: &str = "edgeplane.dev/conversion-data";

/// The served versions, oldest first.
pub const VERSIONS: &[&str] = &["v1alpha1", "v1beta1"];

/// Why an object cannot be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("desired apiVersion {0:?} is not a served version of {GROUP}")]
    DesiredVersion(String),
    #[error("apiVersion {0:?} is not a served version of {GROUP}")]
    ObjectVersion(String),
    #[error("kind {0:?} is not an edgeplane kind")]
    Kind(String),
    #[error("spec is not a valid {api_version} {kind} spec: {reason}")]
    Invalid {
        api_version: String,
        kind: String,
        reason: String,
    },
}

/// A spec mapping between two versions of one kind; `Err` carries the reason the input does
/// not parse.
type SpecMap = fn(Value) -> Result<Value, String>;

/// True for an edgeplane object written at a served version other than the storage version:
/// what the file provider converts (as the API server does before storing) after admitting it
/// at the version it was written in.
pub fn needs_storage_conversion(object: &Value) -> bool {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    version_of(api_version).is_some_and(|v| v != super::STORAGE_VERSION)
        && mappings(object["kind"].as_str().unwrap_or_default(), "v1beta1").is_some()
}

/// The version part of `edgeplane.dev/<version>` when it is served.
fn version_of(api_version: &str) -> Option<&str> {
    let (group, version) = api_version.split_once('/')?;
    (group == GROUP && VERSIONS.contains(&version)).then_some(version)
}

/// The spec mappings `(forward, backward)` of `kind` from `from` to `to` (distinct versions).
fn mappings(kind: &str, from: &str) -> Option<(SpecMap, SpecMap)> {
    use super::{convert_policy as p, convert_proxy as x};
    let up_down: (SpecMap, SpecMap) = match kind {
        "TrafficPolicy" => (p::up, p::down),
        "ProxyConfig" => (x::up, x::down),
        _ => return None,
    };
    Some(if from == "v1alpha1" {
        up_down
    } else {
        (up_down.1, up_down.0)
    })
}

/// Converts `object` to `desired` (`edgeplane.dev/v1alpha1` or `edgeplane.dev/v1beta1`). An
/// object already at that version is returned unchanged.
pub fn convert(mut object: Value, desired: &str) -> Result<Value, ConvertError> {
    let to = version_of(desired).ok_or_else(|| ConvertError::DesiredVersion(desired.to_owned()))?;
    let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
    let from =
        version_of(&api_version).ok_or_else(|| ConvertError::ObjectVersion(api_version.clone()))?;
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    let (forward, backward) =
        mappings(&kind, from).ok_or_else(|| ConvertError::Kind(kind.clone()))?;
    if from == to {
        return Ok(object);
    }
    let Some(fields) = object.as_object_mut() else {
        return Err(ConvertError::Kind(kind));
    };
    let saved = take_annotation(fields);
    if let Some(spec) = fields.get("spec").filter(|s| !s.is_null()).cloned() {
        let invalid = |api_version: &str, reason: String| ConvertError::Invalid {
            api_version: api_version.to_owned(),
            kind: kind.clone(),
            reason,
        };
        let mut converted = forward(spec.clone()).map_err(|e| invalid(&api_version, e))?;
        if let Some(saved) = saved.filter(|s| s["apiVersion"] == desired) {
            let entries = saved["spec"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            converted = restore_kept(converted, entries, backward);
        }
        let back = backward(converted.clone()).map_err(|e| invalid(desired, e))?;
        let mut entries = Vec::new();
        diff(Some(&back), Some(&spec), &mut Vec::new(), &mut entries);
        if !entries.is_empty() {
            let data = json!({"apiVersion": api_version, "spec": entries}).to_string();
            put_annotation(fields, data);
        }
        fields.insert("spec".to_owned(), converted);
    }
    fields.insert("apiVersion".to_owned(), Value::String(desired.to_owned()));
    Ok(object)
}

/// Removes the conversion annotation (and an annotation map left empty); returns its JSON.
fn take_annotation(object: &mut Map<String, Value>) -> Option<Value> {
    let metadata = object.get_mut("metadata")?.as_object_mut()?;
    let annotations = metadata.get_mut("annotations")?.as_object_mut()?;
    let text = annotations.remove(CONVERSION_ANNOTATION)?;
    if annotations.is_empty() {
        metadata.remove("annotations");
    }
    serde_json::from_str(text.as_str()?).ok()
}

fn put_annotation(object: &mut Map<String, Value>, data: String) {
    let metadata = object.entry("metadata").or_insert_with(|| json!({}));
    if !metadata.is_object() {
        *metadata = json!({});
    }
    let annotations = &mut metadata["annotations"];
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations[CONVERSION_ANNOTATION] = Value::String(data);
}

/// Appends to `out` one entry per leaf where `from` and `to` differ: objects are compared key
/// by key, lists of equal length item by item, anything else as a whole.
fn diff(from: Option<&Value>, to: Option<&Value>, path: &mut Vec<Value>, out: &mut Vec<Value>) {
    if from == to {
        return;
    }
    match (from, to) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                path.push(Value::String(key.clone()));
                diff(a.get(key), b.get(key), path, out);
                path.pop();
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                path.push(json!(i));
                diff(Some(x), Some(y), path, out);
                path.pop();
            }
        }
        _ => {
            let mut entry = Map::new();
            entry.insert("path".to_owned(), Value::Array(path.clone()));
            if let Some(f) = from {
                entry.insert("from".to_owned(), f.clone());
            }
            if let Some(t) = to {
                entry.insert("to".to_owned(), t.clone());
            }
            out.push(Value::Object(entry));
        }
    }
}

/// `converted` with the kept values of `entries` restored where they do not change what the
/// object means in the version it was written in.
///
/// A kept value belongs with the fields it was derived beside: a rate limit kept as
/// `{requests: 120, unit: Minute}` is written in `v1alpha1` as `requestsPerSecond: 2`; when
/// that is edited to 5, restoring `unit: Minute` alone (its `from` value still matches) would
/// store 5 a minute. So every restore is checked against the written version: `backward` of
/// the result must equal `backward` of the plain conversion, i.e. the written object still
/// reads as written. Entries are tried together per top-level spec field first (an untouched
/// group comes back whole, whose members may only be valid together), then one by one; any
/// that would change the written meaning is dropped and the edit wins.
fn restore_kept(converted: Value, entries: &[Value], backward: SpecMap) -> Value {
    let Ok(written) = backward(converted.clone()) else {
        return converted;
    };
    let keeps_meaning =
        |candidate: &Value| backward(candidate.clone()).is_ok_and(|seen| seen == written);
    let mut groups: Vec<(Option<&Value>, Vec<&Value>)> = Vec::new();
    for entry in entries {
        let head = entry["path"].as_array().and_then(|p| p.first());
        match groups.iter_mut().find(|(h, _)| *h == head) {
            Some((_, members)) => members.push(entry),
            None => groups.push((head, vec![entry])),
        }
    }
    let mut result = converted;
    for (_, members) in groups {
        let mut together = result.clone();
        for entry in &members {
            restore(&mut together, entry);
        }
        if keeps_meaning(&together) {
            result = together;
            continue;
        }
        for entry in members {
            let mut one = result.clone();
            restore(&mut one, entry);
            if keeps_meaning(&one) {
                result = one;
            }
        }
    }
    result
}

/// Applies one entry made by [`diff`] when `root` still holds its `from` value.
fn restore(root: &mut Value, entry: &Value) {
    let Some(path) = entry["path"].as_array() else {
        return;
    };
    if lookup(root, path) != entry.get("from") {
        return;
    }
    let Some((last, parents)) = path.split_last() else {
        if let Some(to) = entry.get("to") {
            *root = to.clone();
        }
        return;
    };
    let mut node = root;
    for step in parents {
        node = match (step, node) {
            (Value::String(k), Value::Object(m)) => m.entry(k.clone()).or_insert_with(|| json!({})),
            (Value::Number(i), Value::Array(a)) => {
                match i.as_u64().and_then(|i| a.get_mut(usize::try_from(i).ok()?)) {
                    Some(n) => n,
                    None => return,
                }
            }
            _ => return,
        };
    }
    match (last, node, entry.get("to")) {
        (Value::String(k), Value::Object(m), Some(to)) => {
            m.insert(k.clone(), to.clone());
        }
        (Value::String(k), Value::Object(m), None) => {
            m.remove(k);
        }
        (Value::Number(i), Value::Array(a), Some(to)) => {
            if let Some(slot) = i.as_u64().and_then(|i| a.get_mut(usize::try_from(i).ok()?)) {
                *slot = to.clone();
            }
        }
        _ => {}
    }
}

/// The value at `path` (keys and list indices), if any.
fn lookup<'a>(root: &'a Value, path: &[Value]) -> Option<&'a Value> {
    path.iter().try_fold(root, |node, step| match step {
        Value::String(k) => node.as_object()?.get(k),
        Value::Number(i) => node.as_array()?.get(usize::try_from(i.as_u64()?).ok()?),
        _ => None,
    })
}

/// Milliseconds of a Gateway API duration (`1h30m`, `500ms`), if it is one.
pub(crate) fn duration_millis(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 5 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (1, 2)
        } else if rest.starts_with('h') {
            (3_600_000, 1)
        } else if rest.starts_with('m') {
            (60_000, 1)
        } else if rest.starts_with('s') {
            (1_000, 1)
        } else {
            return None;
        };
        rest = &rest[len..];
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_then_restore_gives_the_target() {
        let from = json!({"a": 1, "b": {"c": [1, 2], "d": "x"}, "e": [{"f": 1}]});
        let to = json!({"b": {"c": [1, 2, 3], "g": true}, "e": [{"f": 2}], "h": null});
        let mut entries = Vec::new();
        diff(Some(&from), Some(&to), &mut Vec::new(), &mut entries);
        let mut restored = from.clone();
        for e in &entries {
            restore(&mut restored, e);
        }
        assert_eq!(restored, to);
        // A value changed since is kept.
        let mut edited = from;
        edited["e"][0]["f"] = json!(7);
        for e in &entries {
            restore(&mut edited, e);
        }
        assert_eq!(edited["e"][0]["f"], 7);
    }

    #[test]
    fn gateway_durations_in_millis() {
        assert_eq!(duration_millis("1h30m"), Some(5_400_000));
        assert_eq!(duration_millis("1500ms"), Some(1500));
        assert_eq!(duration_millis("1s500ms"), Some(1500));
        assert_eq!(duration_millis("10"), None);
        assert_eq!(duration_millis(""), None);
        assert_eq!(duration_millis("1d"), None);
    }
}
