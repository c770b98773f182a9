//! Route kinds: attachment of each route to listeners (parentRefs), and the compilation of
//! their rules (matches, filters, retries, session persistence) into table rules.

pub(super) mod attach;
pub(super) mod ext_auth;
pub(super) mod filters;
#[cfg(test)]
pub(super) mod grpc_tests;
pub(super) mod grpcroute;
pub(super) mod http_like;
pub(super) mod httproute;
pub(super) mod ingress;
pub(super) mod kinds_conflict;
pub(super) mod l4route;
pub(super) mod parents;
pub(super) mod resilience;
pub(super) mod rules;
