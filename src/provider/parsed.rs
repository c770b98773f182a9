//! A parsed manifest file as the admission state keeps it between readings: its text, and its
//! documents of the kinds read, each with its object's identity and a digest of its
//! normalized content. Pure.

use std::path::Path;

use sha1::{Digest, Sha1};

use super::admitted::{ObjectKey, SkippedKind};
use super::manifest::{parse_documents_for, Document};
use super::objects::FileKinds;
use crate::kinds::KindSet;

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

/// One document of a file, normalized, as kept between readings: its identity, where it is,
/// and a digest of its content. The document itself is not kept: it is needed again only when
/// it has to be admitted again without its file having changed (rare), and then it is parsed
/// again from the file's text, which is kept for error lines anyway.
pub(super) struct Definition {
    pub(super) key: ObjectKey,
    pub(super) line: usize,
    pub(super) index: usize,
    pub(super) field_prefix: String,
    /// Its place among the file's definitions (and among [`ParsedFile::documents`]).
    pub(super) position: usize,
    /// SHA-1 of the document as written (compact JSON, after namespace and generation were
    /// filled in): equal digests are an unchanged document.
    pub(super) digest: [u8; 20],
}

impl Definition {
    fn new(doc: &Document, position: usize) -> Self {
        let written = serde_json::to_vec(&doc.value).unwrap_or_default();
        Self {
            key: ObjectKey::of(doc),
            line: doc.line,
            index: doc.index,
            field_prefix: doc.field_prefix.clone(),
            position,
            digest: Sha1::digest(&written).into(),
        }
    }
}

impl ParsedFile {
    /// The file of `text` and its `documents`, with the documents of the kinds read,
    /// normalized, in the order of its definitions.
    pub(super) fn new<S: KindSet>(
        kinds: &FileKinds<S>,
        text: String,
        documents: Vec<Document>,
    ) -> (Self, Vec<Document>) {
        let had_documents = !documents.is_empty();
        let (read, skipped) = read_documents(kinds, documents);
        let mut definitions: Vec<Definition> = read
            .iter()
            .enumerate()
            .map(|(position, doc)| Definition::new(doc, position))
            .collect();
        // Kept until the file changes, usually with one document: no spare capacity.
        definitions.shrink_to_fit();
        let file = Self {
            text,
            had_documents,
            definitions,
            skipped,
        };
        (file, read)
    }

    /// Its documents of the kinds read, normalized, parsed again from its text: one for each
    /// definition, at its [`Definition::position`]. Empty if the text no longer parses, which
    /// cannot happen: it parsed when it was taken.
    pub(super) fn documents<S: KindSet>(&self, kinds: &FileKinds<S>, path: &Path) -> Vec<Document> {
        parse_documents_for(kinds, path, &self.text)
            .map(|documents| read_documents(kinds, documents).0)
            .unwrap_or_default()
    }
}

/// The documents of the kinds read, normalized, and the kinds of the others.
fn read_documents<S: KindSet>(
    kinds: &FileKinds<S>,
    documents: Vec<Document>,
) -> (Vec<Document>, Vec<SkippedKind>) {
    let mut read = Vec::new();
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
        read.push(doc);
    }
    (read, skipped)
}
