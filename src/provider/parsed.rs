//! A parsed manifest file as the admission state keeps it between readings: a digest of its
//! text (its text too, while the admission may need it again), the stamp of the file it was
//! read from, and its documents of the kinds read, each with its object's identity and a digest
//! of its normalized content. Pure.

use std::path::Path;

use sha1::{Digest, Sha1};

use super::admitted::ObjectKey;
use super::manifest::{parse_documents_for, Document};
use super::objects::FileKinds;
use super::skipped::SkippedKind;
use super::stamp::Stamp;
use crate::kinds::KindSet;

/// The last successful parse of one file.
pub(super) struct ParsedFile {
    /// SHA-1 of its text: a reading that finds the same text parses nothing.
    digest: [u8; 20],
    /// Whether the file held any document, of any kind.
    pub(super) had_documents: bool,
    /// Its documents of the kinds read, normalized, in file order.
    pub(super) definitions: Box<[Definition]>,
    /// What the file looked like when the text of this parse was read, while that can be
    /// trusted: a walk that finds the same stamp does not open the file.
    pub(super) stamp: Option<Stamp>,
    /// Its text while it is kept, and its documents of kinds not read: `None` for most files
    /// once their objects are admitted (one pointer instead of two empty slices).
    rare: Option<Box<Rare>>,
}

/// The parts of a [`ParsedFile`] that most files drop or never have.
struct Rare {
    /// Its text, while one of its definitions is not the admitted version of its object
    /// (rejected, defined elsewhere too): admitting it again parses the text again, and an
    /// error names the line of a field. Dropped once every definition is admitted: then the
    /// file is needed again only when it changes, and a change is read anew.
    text: Option<Text>,
    /// Kinds of its documents that are not read, with the line of each document.
    skipped: Box<[(SkippedKind, usize)]>,
}

/// A file's text as kept, with what locating a field of one of its definitions needs.
struct Text {
    text: Box<str>,
    /// Per definition, the path of its document within the document of the file it was
    /// written in (`items[2].` for an item of a `List`); empty when every one is empty.
    prefixes: Box<[Box<str>]>,
}

/// One document of a file, normalized, as kept between readings: its identity, where it is,
/// and a digest of its content. The document itself is not kept: it is needed again only when
/// it has to be admitted again without its file having changed (rare), and then it is parsed
/// again from the file's text, which is kept while that can happen ([`ParsedFile::text`]).
pub(super) struct Definition {
    pub(super) key: ObjectKey,
    /// Its document's line ([`Definition::line`]) and index in the file, and its place among
    /// the file's definitions (and among [`ParsedFile::documents`]): `u32`s, as every file
    /// keeps a definition per object while it stays.
    line: u32,
    index: u32,
    position: u32,
    /// SHA-1 of the document as written (compact JSON, after namespace and generation were
    /// filled in): equal digests are an unchanged document.
    pub(super) digest: [u8; 20],
}

impl Definition {
    /// The definition of `doc`, and the document as compact JSON.
    fn new(mut doc: Document, position: usize) -> (Self, Written) {
        let json = serde_json::to_string(&doc.value).unwrap_or_default();
        let def = Self {
            key: ObjectKey::of(&doc),
            line: small(doc.line),
            index: small(doc.index),
            position: small(position),
            digest: Sha1::digest(json.as_bytes()).into(),
        };
        doc.value = serde_json::Value::Null;
        let written = Written {
            doc,
            json: json.into_boxed_str(),
        };
        (def, written)
    }
}

/// `n` as kept in a [`Definition`]; files are size-bounded, far below `u32::MAX` lines.
fn small(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Definition {
    /// 1-based line where its document starts.
    pub(super) fn line(&self) -> usize {
        self.line as usize
    }

    /// Index of its YAML document in the file.
    pub(super) fn index(&self) -> usize {
        self.index as usize
    }

    /// Its place among the file's definitions.
    pub(super) fn position(&self) -> usize {
        self.position as usize
    }
}

/// A document of a file parsed by the current reading, kept until it is admitted as compact
/// JSON (a tree of maps takes about ten times the memory, and a reading may hold thousands).
pub(super) struct Written {
    /// The document without its value.
    doc: Document,
    json: Box<str>,
}

impl Written {
    /// The document, its value parsed back.
    pub(super) fn document(self) -> Result<Document, serde_json::Error> {
        let mut doc = self.doc;
        doc.value = serde_json::from_str(&self.json)?;
        Ok(doc)
    }
}

impl ParsedFile {
    /// The file of `text` and its `documents`, with the documents of the kinds read,
    /// normalized, as compact JSON, in the order of its definitions.
    pub(super) fn new<S: KindSet>(
        kinds: &FileKinds<S>,
        text: String,
        documents: Vec<Document>,
    ) -> (Self, Vec<Written>) {
        let had_documents = !documents.is_empty();
        let (read, skipped) = read_documents(kinds, documents);
        let (definitions, written): (Vec<Definition>, Vec<Written>) = read
            .into_iter()
            .enumerate()
            .map(|(position, doc)| Definition::new(doc, position))
            .unzip();
        let prefixes = if written.iter().all(|w| w.doc.field_prefix.is_empty()) {
            Box::default()
        } else {
            written
                .iter()
                .map(|w| w.doc.field_prefix.as_str().into())
                .collect()
        };
        let file = Self {
            digest: text_digest(&text),
            had_documents,
            // Kept until the file changes, usually with one document: no spare capacity.
            definitions: definitions.into_boxed_slice(),
            stamp: None,
            rare: Some(Box::new(Rare {
                text: Some(Text {
                    text: text.into_boxed_str(),
                    prefixes,
                }),
                skipped: skipped.into_boxed_slice(),
            })),
        };
        (file, written)
    }

    /// True when `text` is the text it was parsed from.
    pub(super) fn parsed_from(&self, text: &str) -> bool {
        self.digest == text_digest(text)
    }

    /// Its text, unless it was dropped ([`ParsedFile::drop_text`]).
    pub(super) fn text(&self) -> Option<&str> {
        Some(&self.rare.as_ref()?.text.as_ref()?.text)
    }

    /// The path of the document of the definition at `position` within the document of the
    /// file it was written in (`items[2].` for an item of a `List`), while the text is kept.
    pub(super) fn field_prefix(&self, position: usize) -> Option<&str> {
        let text = self.rare.as_ref()?.text.as_ref()?;
        Some(text.prefixes.get(position).map_or("", |p| p))
    }

    /// Drops its text: every definition is admitted as it is now.
    pub(super) fn drop_text(&mut self) {
        if let Some(rare) = &mut self.rare {
            rare.text = None;
            if rare.skipped.is_empty() {
                self.rare = None;
            }
        }
    }

    /// Kinds of its documents that are not read, with the line of each document.
    pub(super) fn skipped(&self) -> &[(SkippedKind, usize)] {
        self.rare.as_ref().map_or(&[], |r| &r.skipped)
    }

    /// Its documents of the kinds read, normalized, parsed again from its text (as compact
    /// JSON): one for each definition, at its [`Definition::position`]. Empty if the text was
    /// dropped or no longer parses, neither of which happens while a definition is not
    /// admitted: it parsed when it was taken.
    pub(super) fn documents<S: KindSet>(&self, kinds: &FileKinds<S>, path: &Path) -> Vec<Written> {
        let Some(text) = self.text() else {
            return Vec::new();
        };
        let Ok(documents) = parse_documents_for(kinds, path, text) else {
            return Vec::new();
        };
        let (read, _) = read_documents(kinds, documents);
        read.into_iter()
            .enumerate()
            .map(|(position, doc)| Definition::new(doc, position).1)
            .collect()
    }
}

fn text_digest(text: &str) -> [u8; 20] {
    Sha1::digest(text.as_bytes()).into()
}

/// The documents of the kinds read, normalized, and the kinds (and lines) of the others.
fn read_documents<S: KindSet>(
    kinds: &FileKinds<S>,
    documents: Vec<Document>,
) -> (Vec<Document>, Vec<(SkippedKind, usize)>) {
    let mut read = Vec::new();
    let mut skipped = Vec::new();
    for mut doc in documents {
        if !kinds.reads(&doc) {
            let kind = SkippedKind {
                api_version: doc.api_version,
                kind: doc.kind,
            };
            skipped.push((kind, doc.line));
            continue;
        }
        kinds.normalize(&mut doc);
        read.push(doc);
    }
    (read, skipped)
}
