//! Providers turn an outside source of Gateway API objects into [`crate::snapshot::Snapshot`]s.

pub mod file;
pub mod manifest;
