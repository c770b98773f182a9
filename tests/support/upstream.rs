//! The upstream Gateway API release beside the project (`../shared/gateway-api-v1.6.1`: CRDs
//! and conformance manifests, reference data that is never copied into the project). Tests
//! that read it are skipped, saying so, where it is absent, and fail under `CI=true`, where it
//! is always laid beside the checkout: a missing copy must not turn into a silent pass.
#![allow(dead_code)]

use std::path::PathBuf;

/// The release's folder.
pub fn release_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/gateway-api-v1.6.1")
}

/// `rel` inside the release when it exists there. Otherwise `None` after a `SKIPPED` line
/// naming `test`, or a panic when the environment says `CI=true`.
pub fn upstream(rel: &str, test: &str) -> Option<PathBuf> {
    let path = release_dir().join(rel);
    if path.exists() {
        return Some(path);
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        !ci,
        "{test}: {} is missing; CI always lays the upstream release beside the checkout",
        path.display()
    );
    eprintln!(
        "SKIPPED {test}: no upstream Gateway API release at {}",
        path.display()
    );
    None
}
