//! The patch types the API server accepts, chosen by `Content-Type`: JSON merge patch
//! (RFC 7386), strategic merge patch (treated as a merge patch: lists are replaced), JSON patch
//! (RFC 6902) and server-side apply (the applied fields merged in; field ownership is not
//! tracked).

use serde_json::Value;

use super::store::ApiError;

/// How a PATCH body is interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Strategic,
    Json,
    Apply,
}

impl PatchType {
    /// The patch type of a `Content-Type` header, `None` for anything else (415).
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }

    /// The verb recorded in write counts: `apply` for server-side apply, `patch` otherwise.
    pub fn verb(self) -> &'static str {
        match self {
            PatchType::Apply => "apply",
            _ => "patch",
        }
    }
}

/// A parsed PATCH request.
#[derive(Debug, Clone)]
pub struct Patch {
    pub ptype: PatchType,
    pub body: Value,
    /// The `fieldManager` query parameter (empty when absent).
    pub manager: String,
}

/// Parses a patch body: JSON, or YAML for server-side apply.
pub fn parse(ptype: PatchType, body: &[u8]) -> Result<Value, ApiError> {
    let parsed = match ptype {
        PatchType::Apply => serde_yaml_ng::from_slice::<Value>(body).map_err(|e| e.to_string()),
        _ => serde_json::from_slice::<Value>(body).map_err(|e| e.to_string()),
    };
    parsed.map_err(|e| ApiError::bad_request(format!("invalid patch body: {e}")))
}

/// Applies a parsed patch to `doc` in place.
pub fn apply(doc: &mut Value, ptype: PatchType, patch: &Value) -> Result<(), ApiError> {
    match ptype {
        PatchType::Merge | PatchType::Strategic | PatchType::Apply => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("patch body must be a JSON object"));
            }
            json_patch::merge(doc, patch);
            Ok(())
        }
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(doc, &ops)
                .map_err(|e| ApiError::invalid(format!("JSON patch failed: {e}")))
        }
    }
}
