//! Arbitrary bytes as a manifest file: parsing, admission with the built-in Gateway API CRDs
//! (defaults, schemas, CEL rules) and translation of whatever is admitted must never panic.
#![no_main]

use std::path::Path;

use edgeplane::admission::builtin;
use edgeplane::provider::manifest::{parse_documents, parse_manifests};
use edgeplane::snapshot::Snapshot;
use edgeplane::translate::{translate, TranslateOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.yaml");
    // The whole-file path the config directory takes (all or nothing).
    let _ = parse_manifests(path, text);
    // Per document, so that one rejected document does not hide the others from translation.
    let Ok(documents) = parse_documents(path, text) else {
        return;
    };
    let crds = builtin::crds();
    let mut snapshot = Snapshot::default();
    for mut doc in documents {
        doc.normalize();
        if crds.admit(&mut doc.value, None).is_err() {
            continue;
        }
        if let Ok(object) = doc.to_object() {
            snapshot.insert(object);
        }
    }
    let options = TranslateOptions {
        ingress: Default::default(),
        controller_name: edgeplane::translate::DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: [127, 0, 0, 1].into(),
        now: jiff::Timestamp::UNIX_EPOCH,
        generation: 1,
        port_map: "80=18080".parse().unwrap_or_default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    };
    let translation = translate(&snapshot, &options);
    // What `/debug/config`, `/debug/status` and `check` render.
    let _ = serde_json::to_string(&translation.table);
    let _ = serde_yaml_ng::to_string(&translation.status);
    let _ = translation.status.problems();
});
