//! Why a backendRef could not be resolved, and the `ResolvedRefs` reason each cause gets.

use crate::status::conditions::Reason;
use crate::table::ServiceKey;

/// Why a backendRef could not be resolved; each maps to a `ResolvedRefs` reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("backendRef {group}/{kind} {name} is not a core Service")]
    InvalidKind {
        group: String,
        kind: String,
        name: String,
    },
    #[error("reference from namespace {from} to Service {namespace}/{name} is not permitted by a ReferenceGrant")]
    NotPermitted {
        from: String,
        namespace: String,
        name: String,
    },
    #[error("Service {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error("backendRef to Service {namespace}/{name} has no port")]
    NoPort { namespace: String, name: String },
    #[error("Service {namespace}/{name} has no port {port}")]
    NoServicePort {
        namespace: String,
        name: String,
        port: i32,
    },
    #[error("Service port {service} has unsupported appProtocol {app_protocol}")]
    UnsupportedProtocol {
        service: ServiceKey,
        app_protocol: String,
    },
    #[error("ExternalName Service {namespace}/{name} has no EndpointSlice")]
    ExternalName { namespace: String, name: String },
}

impl BackendError {
    /// The `ResolvedRefs` reason the spec prescribes.
    pub fn reason(&self) -> Reason {
        match self {
            Self::InvalidKind { .. } => Reason::InvalidKind,
            Self::NotPermitted { .. } => Reason::RefNotPermitted,
            Self::UnsupportedProtocol { .. } => Reason::UnsupportedProtocol,
            Self::NotFound { .. }
            | Self::NoPort { .. }
            | Self::NoServicePort { .. }
            | Self::ExternalName { .. } => Reason::BackendNotFound,
        }
    }
}
