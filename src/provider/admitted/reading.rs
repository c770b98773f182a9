//! What a reading of a config directory hands the admission, and what the admission found:
//! each file's text or why it could not be read, how much to trust the reading, and the errors,
//! skipped kinds and unsettled files of one [`super::Admission::apply`].

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::provider::manifest::ManifestError;
use crate::provider::skipped::SkippedKind;

/// One reading of a file: its text, or why it could not be read.
pub type FileRead = Result<String, String>;

/// A file as a complete reading of the directory takes it.
#[derive(Debug)]
pub enum Taken {
    /// Known to be unchanged since it was last read: its held text stands.
    Held,
    /// Read now.
    Read(FileRead),
}

/// What one [`super::Admission::apply`] found.
#[derive(Debug, Default)]
pub struct Applied {
    /// Files that did not parse and objects that were not admitted, each with file and line.
    pub errors: Vec<ManifestError>,
    /// Kinds that were skipped (not read by the product); kinds that look meant for us but
    /// are unknown (`kind: HttpRoute`) are errors instead.
    pub skipped: BTreeSet<SkippedKind>,
    /// False when the admitted objects are exactly those of the previous reading.
    pub changed: bool,
    /// Files that looked half-written in a [`Reading::Tentative`] reading (they did not parse,
    /// could not be read, or became empty): they kept their previous documents and no error was
    /// recorded for them; the caller reads again.
    pub unsettled: Vec<PathBuf>,
}

/// How much to trust a reading of the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Taken right after a change: a file that does not parse, cannot be read, or became
    /// empty may be in the middle of being written, so it keeps its previous documents
    /// silently and is listed in [`Applied::unsettled`].
    Tentative,
    /// Final: every file is taken as it is, and every problem is an error.
    Final,
}
