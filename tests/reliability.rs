//! Reliability under hostile input and churn, in standalone mode through the real file
//! watcher, reconcile loop and proxy on loopback sockets: files rewritten in place while
//! traffic flows, Secrets updated to garbage, and route and endpoint churn with continuous
//! clients. Every loop is bounded in count and time.

mod support;

#[path = "reliability/certificates.rs"]
mod certificates;
#[path = "reliability/churn.rs"]
mod churn;
#[path = "reliability/config_dir.rs"]
mod config_dir;
#[path = "reliability/standalone.rs"]
mod standalone;
