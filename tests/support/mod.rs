//! Shared helpers for integration tests: free loopback addresses, echo backends, HTTP/1.1 and h2c
//! clients, route-table builders, a running proxy, mirror recorders, WebSocket peers, TLS
//! (rcgen certificates, a rustls client) and a Kubernetes API emulator. Every helper talks to
//! loopback only and every wait is bounded.
#![allow(dead_code)]

pub mod apiserver;
pub mod authz;
pub mod client;
pub mod echo;
pub mod faulty;
pub mod grpc;
pub mod jwt;
pub mod kustomize;
pub mod mirror;
pub mod net;
pub mod proxy;
pub mod raw;
pub mod tables;
pub mod tls;
pub mod upstream;
pub mod websocket;
