//! What the admission state answers about itself: which files it holds (and their stamps), the
//! snapshot of the admitted objects, where an object was read from, and how many there are.

use std::path::Path;

use super::{Admission, ObjectKey};
use crate::kinds::KindSet;
use crate::provider::stamp::Stamp;

impl<S: KindSet> Admission<S> {
    /// True when the file `path` is held as last taken (parsed, or read again unchanged).
    pub fn holds(&self, path: &Path) -> bool {
        self.files.contains_key(path)
    }

    /// True when the file `path` is held as parsed from `text`.
    pub fn holds_text(&self, path: &Path, text: &str) -> bool {
        self.files.get(path).is_some_and(|f| f.parsed_from(text))
    }

    /// The stamp held for the file `path`: what it looked like when its held text was read.
    pub fn stamp(&self, path: &Path) -> Option<&Stamp> {
        self.files.get(path)?.stamp.as_ref()
    }

    /// Holds `stamp` for the file `path`, if the file is held (`None`: it is read again by the
    /// next walk).
    pub fn set_stamp(&mut self, path: &Path, stamp: Option<Stamp>) {
        if let Some(file) = self.files.get_mut(path) {
            file.stamp = stamp;
        }
    }

    /// A snapshot of every admitted object: a copy of the one held, which each reading
    /// keeps in step with the admitted objects.
    pub fn snapshot(&self) -> S {
        self.snapshot.clone()
    }

    /// The snapshot of every admitted object collected anew, object by object: what
    /// [`Admission::snapshot`] must equal (for tests).
    #[cfg(test)]
    pub fn collected(&self) -> S {
        crate::provider::objects::collect(self.admitted.values().map(|a| a.object.clone()))
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
            .map(|f| f.definitions.len() + f.skipped().len())
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
