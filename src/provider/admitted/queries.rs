//! What the admission state answers about itself: which files it holds, the snapshot of the
//! admitted objects, where an object was read from, and how many there are.

use std::path::Path;
use std::sync::Arc;

use super::{Admission, ObjectKey};
use crate::kinds::KindSet;
use crate::provider::objects::collect;

impl<S: KindSet> Admission<S> {
    /// True when the file `path` is held as last taken (parsed, or read again unchanged).
    pub fn holds(&self, path: &Path) -> bool {
        self.files.contains_key(path)
    }

    /// True when the file `path` is held as parsed from `text`.
    pub fn holds_text(&self, path: &Path, text: &str) -> bool {
        self.files.get(path).is_some_and(|f| f.parsed_from(text))
    }

    /// The path `path` as the state shares it, while the file is held.
    pub fn shared_path(&self, path: &Path) -> Option<Arc<Path>> {
        self.files.get_key_value(path).map(|(p, _)| p.clone())
    }

    /// A snapshot of every admitted object.
    pub fn snapshot(&self) -> S {
        collect(self.admitted.values().map(|a| a.object.clone()))
    }

    /// The file and line (of its document) the admitted object `key` was read from.
    pub fn location(&self, key: &ObjectKey) -> Option<(&Path, usize)> {
        let path = &self.admitted.get(key)?.path;
        let defs = &self.files.get(path)?.definitions;
        Some((path, defs.iter().find(|d| d.key == *key)?.line()))
    }

    /// Number of documents in the files, of every kind (read, skipped or unknown).
    pub fn documents(&self) -> usize {
        self.files
            .values()
            .map(|f| f.definitions.len() + f.skipped.len())
            .sum()
    }

    /// Number of admitted objects.
    pub fn len(&self) -> usize {
        self.admitted.len()
    }

    /// True when nothing is admitted.
    pub fn is_empty(&self) -> bool {
        self.admitted.is_empty()
    }
}
