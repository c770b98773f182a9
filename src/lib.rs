//! edgeplane: a Kubernetes Gateway API controller and the edge proxy it programs, in one process.
//!
//! Data flow: `provider` (config directory or Kubernetes) -> [`snapshot::Snapshot`] ->
//! [`translate`] (pure) -> [`table::RouteTable`] + [`status::StatusReport`] -> `ArcSwap` ->
//! [`proxy`]. [`reconcile`] runs that loop and publishes into [`published`]; [`admin`] exposes
//! health and metrics, [`dashboard`] the live page and the debug views.
#![forbid(unsafe_code)]

// The library's own tests include test support written against the crate's public name.
#[cfg(test)]
extern crate self as edgeplane;

pub mod admin;
pub mod admission;
pub mod cli;
pub mod convert;
pub mod dashboard;
pub mod devtools;
pub mod kinds;
pub mod metrics;
pub mod name;
pub mod problem_log;
pub mod provider;
pub mod proxy;
pub mod published;
pub mod reconcile;
pub mod request;
#[cfg(test)]
mod route_kind_tests;
pub mod snapshot;
pub mod status;
pub mod table;
pub mod translate;
pub mod webhook;
pub mod yaml_out;
