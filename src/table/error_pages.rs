//! Error pages as the table carries them: which backend statuses a rule replaces and the
//! Service that answers instead (a TrafficPolicy's `errorPages`, ingress-nginx's
//! `custom-http-errors` with `default-backend`). Pure data; `proxy::upstream::error_pages`
//! sends the error request.

use std::sync::Arc;

use serde::{Serialize, Serializer};

use super::model::ServiceBackend;

/// Backend answers replaced by another Service's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorPages {
    /// The backend statuses replaced, sorted (400 to 599).
    pub codes: Vec<u16>,
    /// The Service port asked for the page, resolved like a backendRef (it follows the
    /// EndpointSlices).
    #[serde(serialize_with = "ser_service")]
    pub backend: Arc<ServiceBackend>,
    /// `namespace/name` of the policy it comes from.
    pub source: String,
}

impl ErrorPages {
    /// Whether a backend answer of `status` is replaced.
    pub fn intercepts(&self, status: u16) -> bool {
        self.codes.binary_search(&status).is_ok()
    }
}

fn ser_service<S: Serializer>(b: &Arc<ServiceBackend>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&b.service)
}
