//! The Kubernetes API emulator in `tests/support/apiserver` driven by the production kube
//! client: objects and verbs, watches and reflectors, discovery, outages and introspection.

mod support;

#[path = "apiserver/conversion.rs"]
mod conversion;
#[path = "apiserver/objects.rs"]
mod objects;
#[path = "apiserver/operations.rs"]
mod operations;
#[path = "apiserver/tables.rs"]
mod tables;
#[path = "apiserver/validation.rs"]
mod validation;
#[path = "apiserver/watches.rs"]
mod watches;
