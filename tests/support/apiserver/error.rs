//! API errors, answered as `Status` objects with the matching HTTP code (404 NotFound,
//! 409 Conflict/AlreadyExists, 422 Invalid, 410 Expired, 405 MethodNotAllowed, ...).

use serde_json::{json, Value};

use super::kinds::Kind;

/// An API error, answered as a `Status` object with `code` as the HTTP status.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
        }
    }
    pub fn not_found(kind: &Kind, name: &str) -> ApiError {
        let what = format!("{} \"{name}\" not found", kind.resource());
        ApiError::new(404, "NotFound", what)
    }
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(422, "Invalid", message)
    }
    pub fn conflict(kind: &Kind, name: &str) -> ApiError {
        let message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
             please apply your changes to the latest version and try again",
            kind.resource()
        );
        ApiError::new(409, "Conflict", message)
    }

    /// The `Status` object a real API server answers with.
    pub fn to_status(&self) -> Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        })
    }
}
