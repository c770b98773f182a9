//! The pure part of the conversion webhook: one `ConversionReview` (apiextensions.k8s.io/v1)
//! in, the answering `ConversionReview` out. A body that is not a conversion request is an
//! error the server answers with 400; a request whose objects cannot be converted is answered
//! with `result.status: Failure` and a message, as the API server expects. No I/O.

use serde::Deserialize;
use serde_json::{json, Value};

use super::convert::convert;

/// The API version of the only `ConversionReview` the API server sends and accepts here.
pub const REVIEW_API_VERSION: &str = "apiextensions.k8s.io/v1";
/// The kind of a review.
pub const REVIEW_KIND: &str = "ConversionReview";

/// Why a body is not a conversion request (answered with 400).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("body is not a ConversionReview: {0}")]
    Malformed(String),
    #[error("ConversionReview apiVersion {0:?} is not supported (only {REVIEW_API_VERSION})")]
    ApiVersion(String),
    #[error("kind {0:?} is not ConversionReview")]
    Kind(String),
    #[error("ConversionReview has no request")]
    NoRequest,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<Request>,
}

#[derive(Deserialize)]
struct Request {
    uid: String,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: String,
    #[serde(default)]
    objects: Vec<Value>,
}

/// Answers the review in `body`: every object converted to `request.desiredAPIVersion`, in
/// order, or (when one cannot be) no objects and a `Failure` naming the object and the reason.
pub fn answer_review(body: &[u8]) -> Result<Value, ReviewError> {
    let review: Review =
        serde_json::from_slice(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    if review.api_version != REVIEW_API_VERSION {
        return Err(ReviewError::ApiVersion(review.api_version));
    }
    if review.kind != REVIEW_KIND {
        return Err(ReviewError::Kind(review.kind));
    }
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    let converted: Result<Vec<Value>, String> = request
        .objects
        .into_iter()
        .map(|object| {
            let name = describe(&object);
            convert(object, &request.desired_api_version).map_err(|e| format!("{name}: {e}"))
        })
        .collect();
    let response = match converted {
        Ok(objects) => json!({
            "uid": request.uid,
            "convertedObjects": objects,
            "result": {"status": "Success"},
        }),
        Err(message) => json!({
            "uid": request.uid,
            "convertedObjects": [],
            "result": {"status": "Failure", "message": message},
        }),
    };
    Ok(json!({
        "apiVersion": REVIEW_API_VERSION,
        "kind": REVIEW_KIND,
        "response": response,
    }))
}

/// `Kind namespace/name` of an object, for messages.
fn describe(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("object");
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}
