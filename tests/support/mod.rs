//! Shared helpers for integration tests: free loopback addresses, echo backends, HTTP/1.1 and h2c
//! clients, route-table builders and a running proxy. Every helper talks to loopback only and
//! every wait is bounded.
#![allow(dead_code)]

pub mod client;
pub mod echo;
pub mod net;
pub mod proxy;
pub mod tables;
