//! The data plane end to end: real loopback sockets, echo backends, HTTP/1.1 and h2c clients,
//! route tables built by hand through the `table` API.

mod support;

#[path = "proxy/backend_protocols.rs"]
mod backend_protocols;
#[path = "proxy/backend_tls.rs"]
mod backend_tls;
#[path = "proxy/client_certs.rs"]
mod client_certs;
#[path = "proxy/client_faults.rs"]
mod client_faults;
#[path = "proxy/connections.rs"]
mod connections;
#[path = "proxy/cors.rs"]
mod cors;
#[path = "proxy/drain_h2.rs"]
mod drain_h2;
#[path = "proxy/ext_auth.rs"]
mod ext_auth;

#[path = "proxy/error_pages.rs"]
mod error_pages;
#[path = "proxy/filters.rs"]
mod filters;
#[path = "proxy/grpc.rs"]
mod grpc;
#[path = "proxy/l4.rs"]
mod l4;
#[path = "proxy/l4_reclaim.rs"]
mod l4_reclaim;
#[path = "proxy/l4_translated.rs"]
mod l4_translated;
#[path = "proxy/lifecycle.rs"]
mod lifecycle;
#[path = "proxy/mirror.rs"]
mod mirror;
#[path = "proxy/path_policy.rs"]
mod path_policy;
#[path = "proxy/policy_access.rs"]
mod policy_access;
#[path = "proxy/policy_access_log.rs"]
mod policy_access_log;
#[path = "proxy/policy_auth_hostile.rs"]
mod policy_auth_hostile;
#[path = "proxy/policy_body.rs"]
mod policy_body;
#[path = "proxy/policy_fail_closed.rs"]
mod policy_fail_closed;
#[path = "proxy/policy_jwt.rs"]
mod policy_jwt;
#[path = "proxy/policy_listener.rs"]
mod policy_listener;
#[path = "proxy/policy_service.rs"]
mod policy_service;
#[path = "proxy/policy_translated.rs"]
mod policy_translated;
#[path = "proxy/protocols.rs"]
mod protocols;
#[path = "proxy/resilience.rs"]
mod resilience;
#[path = "proxy/retries.rs"]
mod retries;
#[path = "proxy/route_metrics.rs"]
mod route_metrics;
#[path = "proxy/routing.rs"]
mod routing;
#[path = "proxy/sessions.rs"]
mod sessions;
#[path = "proxy/timeouts.rs"]
mod timeouts;
#[path = "proxy/tls.rs"]
mod tls;
#[path = "proxy/trace_export.rs"]
mod trace_export;
#[path = "proxy/translated.rs"]
mod translated;
