//! Providers turn an outside source of Gateway API objects (a config directory, a Kubernetes
//! cluster) into [`crate::snapshot::Snapshot`]s.

pub mod admitted;
mod changed;
pub mod crds;
pub mod file;
pub mod kube;
pub mod lines;
pub mod manifest;
pub mod objects;
mod parsed;
pub mod paths;
pub mod skipped;
pub mod stamp;
pub mod walk;
pub mod yaml;
