//! Ingress as a route input, through the real binary: `edgeplane serve --config-dir` with
//! Ingresses, IngressClasses, Services and a TLS Secret in files, served by the implicit
//! Gateway of the class on mapped ports of a loopback address of the test's own; plain and
//! TLS (by SNI) requests reach the backends the Ingress names, with the ingress-nginx
//! annotations applied (header edits, backend protocols and TLS, hashing, the access log
//! switch, TLS passthrough by SNI included).

mod support;

#[path = "ingress/standalone.rs"]
mod standalone;

#[path = "ingress/annotations.rs"]
mod annotations;

#[path = "ingress/convert.rs"]
mod convert;

#[path = "ingress/regex.rs"]
mod regex;

#[path = "ingress/canary.rs"]
mod canary;

#[path = "ingress/server.rs"]
mod server;

#[path = "ingress/policy.rs"]
mod policy;

#[path = "ingress/upstream.rs"]
mod upstream;

#[path = "ingress/headers.rs"]
mod headers;

#[path = "ingress/access_log.rs"]
mod access_log;

#[path = "ingress/fallback.rs"]
mod fallback;

#[path = "ingress/passthrough.rs"]
mod passthrough;

#[path = "ingress/upstream_timeouts.rs"]
mod upstream_timeouts;

#[path = "ingress/concurrency.rs"]
mod concurrency;

#[path = "ingress/error_pages.rs"]
mod error_pages;
