//! Shared helpers for integration tests: free loopback addresses, echo backends, HTTP/1.1 and h2c
//! clients, route-table builders, a running proxy and a Kubernetes API emulator. Every helper
//! talks to loopback only and every wait is bounded.
#![allow(dead_code)]

pub mod apiserver;
pub mod client;
pub mod echo;
pub mod net;
pub mod proxy;
pub mod tables;
