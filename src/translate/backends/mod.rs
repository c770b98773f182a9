//! Backends: a backendRef resolved to a Service port and its endpoints, and the
//! BackendTLSPolicies that say how the proxy reaches it.

pub(super) mod endpoints;
pub(super) mod resolve;
pub(super) mod tls;
