//! A parsed manifest file as the admission state keeps it between readings: its text, and its
//! documents of the kinds read, normalized, each with its object's identity. Pure.

use std::sync::Arc;

use super::admitted::{ObjectKey, SkippedKind};
use super::manifest::Document;
use super::objects::FileKinds;
use crate::kinds::KindSet;
use crate::name::Name;

/// The last successful parse of one file.
pub(super) struct ParsedFile {
    pub(super) text: String,
    /// Whether the file held any document, of any kind.
    pub(super) had_documents: bool,
    /// Its documents of the kinds read, normalized, in file order.
    pub(super) definitions: Vec<Definition>,
    /// Kinds of its documents that are not read.
    pub(super) skipped: Vec<SkippedKind>,
}

/// One document of a file, normalized, as kept between readings. The document is kept as
/// compact JSON, not as a JSON tree: a tree of maps takes about ten times the memory, and
/// it is needed again only when the document changes.
pub(super) struct Definition {
    pub(super) key: ObjectKey,
    pub(super) line: usize,
    pub(super) index: usize,
    pub(super) field_prefix: String,
    /// Interned, as the key's group and kind are: every route of a directory repeats it.
    pub(super) api_version: Name,
    /// The document as written (after namespace and generation were filled in).
    pub(super) written: Arc<str>,
}

impl Definition {
    fn new(doc: Document) -> Self {
        let written = serde_json::to_string(&doc.value).unwrap_or_default();
        Self {
            key: ObjectKey::of(&doc),
            line: doc.line,
            index: doc.index,
            field_prefix: doc.field_prefix,
            api_version: Name::from(doc.api_version),
            written: written.into(),
        }
    }

    /// The document again, as parsed from its file.
    pub(super) fn document(&self) -> Result<Document, serde_json::Error> {
        Ok(Document {
            line: self.line,
            index: self.index,
            field_prefix: self.field_prefix.clone(),
            api_version: self.api_version.to_string(),
            kind: self.key.kind.to_string(),
            value: serde_json::from_str(&self.written)?,
        })
    }
}

impl ParsedFile {
    pub(super) fn new<S: KindSet>(
        kinds: &FileKinds<S>,
        text: String,
        documents: Vec<Document>,
    ) -> Self {
        let had_documents = !documents.is_empty();
        let mut definitions = Vec::new();
        let mut skipped = Vec::new();
        for mut doc in documents {
            if !kinds.reads(&doc) {
                skipped.push(SkippedKind {
                    api_version: doc.api_version,
                    kind: doc.kind,
                });
                continue;
            }
            kinds.normalize(&mut doc);
            definitions.push(Definition::new(doc));
        }
        // Kept until the file changes, usually with one document: no spare capacity.
        definitions.shrink_to_fit();
        Self {
            text,
            had_documents,
            definitions,
            skipped,
        }
    }
}
