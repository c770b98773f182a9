//! The objects of a config directory as an API server would hold them. Every document is
//! defaulted and validated against its CRD before it is admitted; an object that is rejected,
//! defined twice, or part of a file that does not parse keeps its last admitted version, as a
//! rejected `kubectl apply` leaves the stored object unchanged. Pure: callers read the files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::lines::field_line;
use super::manifest::{parse_documents_for, Document, ManifestError};
use super::objects::{collect, FileKinds, Object};
use super::parsed::{Definition, ParsedFile};
use crate::admission::Crds;
use crate::kinds::KindSet;
use crate::snapshot::Snapshot;

/// A kind the product does not read, found while loading a directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SkippedKind {
    pub api_version: String,
    pub kind: String,
}

impl fmt::Display for SkippedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)
    }
}

/// Identity of an object: two documents with the same key are the same object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectKey {
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    pub(super) fn of(doc: &Document) -> Self {
        Self {
            group: doc.group().to_owned(),
            kind: doc.kind.clone(),
            namespace: doc.value["metadata"]["namespace"]
                .as_str()
                .map(str::to_owned),
            name: doc.name().to_owned(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// One reading of a file: its text, or why it could not be read.
pub type FileRead = Result<String, String>;

/// What one [`Admission::apply`] found.
#[derive(Debug, Default)]
pub struct Applied {
    /// Files that did not parse and objects that were not admitted, each with file and line.
    pub errors: Vec<ManifestError>,
    /// Kinds that were skipped (not read by the product).
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

/// Why a document was not admitted, and the field the first error is about.
struct Rejected {
    field: Option<String>,
    message: String,
}

/// An admitted object, with what it was admitted from.
struct AdmittedObject<S> {
    path: PathBuf,
    /// The document as written, shared with its [`Definition`].
    written: Arc<str>,
    /// The document after defaulting, as compact JSON: `oldSelf` of the next version.
    admitted: String,
    object: Object<S>,
}

/// The admission state of a config directory across reloads, for the kinds of `S`.
pub struct Admission<S = Snapshot> {
    crds: Arc<Crds>,
    kinds: FileKinds<S>,
    files: BTreeMap<PathBuf, ParsedFile>,
    admitted: BTreeMap<ObjectKey, AdmittedObject<S>>,
}

impl Admission {
    /// An empty directory state that admits objects of the kinds of a [`Snapshot`] through
    /// `crds`.
    pub fn new(crds: Arc<Crds>) -> Self {
        Self::for_kinds(crds)
    }
}

impl<S: KindSet> Admission<S> {
    /// An empty directory state that admits objects of the kinds of `S` through `crds`.
    pub fn for_kinds(crds: Arc<Crds>) -> Self {
        Self {
            crds,
            kinds: FileKinds::default(),
            files: BTreeMap::new(),
            admitted: BTreeMap::new(),
        }
    }

    /// Applies one complete reading of the directory: every manifest file with its text. A file
    /// whose text did not change is not parsed again; an unchanged document is not admitted
    /// again.
    pub fn apply(&mut self, files_read: Vec<(PathBuf, FileRead)>, reading: Reading) -> Applied {
        let mut out = Applied::default();
        let mut files = BTreeMap::new();
        let tentative = reading == Reading::Tentative;
        for (path, read) in files_read {
            let previous = self.files.remove(&path);
            let parsed = match read {
                Ok(text) if previous.as_ref().is_some_and(|p| p.text == text) => previous,
                Ok(text) if tentative && emptied(previous.as_ref(), &text) => {
                    out.unsettled.push(path.clone());
                    previous
                }
                Ok(text) => match parse_documents_for(&self.kinds, &path, &text) {
                    Ok(documents) => Some(ParsedFile::new(&self.kinds, text, documents)),
                    Err(_) if tentative => {
                        out.unsettled.push(path.clone());
                        previous
                    }
                    Err(e) => {
                        out.errors.push(kept_file(e, previous.is_some()));
                        previous
                    }
                },
                Err(_) if tentative => {
                    out.unsettled.push(path.clone());
                    previous
                }
                Err(message) => {
                    out.errors.push(ManifestError {
                        path: path.clone(),
                        line: None,
                        column: None,
                        message: kept_message(message, previous.is_some()),
                    });
                    previous
                }
            };
            if let Some(p) = parsed {
                files.insert(path, p);
            }
        }
        self.files = files;
        let definitions = definitions(&self.files, &mut out);
        let mut before = std::mem::take(&mut self.admitted);
        let mut admitted = BTreeMap::new();
        for (key, defs) in definitions {
            let previous = before.remove(key);
            let key = key.clone();
            if let [(path, doc)] = defs.as_slice() {
                match self.admit(path, doc, previous.as_ref()) {
                    Ok(None) => {
                        admitted.extend(previous.map(|p| (key, p)));
                    }
                    Ok(Some(new)) => {
                        out.changed = true;
                        admitted.insert(key, new);
                    }
                    Err(rejected) => {
                        let line = rejected
                            .field
                            .and_then(|f| self.field_line(path, doc, &f))
                            .unwrap_or(doc.line);
                        let message = kept_message(rejected.message, previous.is_some());
                        out.errors.push(ManifestError::at(path, line, message));
                        admitted.extend(previous.map(|p| (key, p)));
                    }
                }
            } else {
                let places: Vec<String> = defs
                    .iter()
                    .map(|(p, d)| format!("{}:{}", p.display(), d.line))
                    .collect();
                let (path, doc) = defs[0];
                let message = format!("{key} is defined more than once: {}", places.join(", "));
                out.errors.push(ManifestError::at(
                    path,
                    doc.line,
                    kept_message(message, previous.is_some()),
                ));
                admitted.extend(previous.map(|p| (key, p)));
            }
        }
        // What is left of the previous objects was deleted.
        out.changed |= !before.is_empty();
        self.admitted = admitted;
        out
    }

    /// Admits one definition: `Ok(None)` when it is the previous version unchanged.
    fn admit(
        &self,
        path: &Path,
        def: &Definition,
        previous: Option<&AdmittedObject<S>>,
    ) -> Result<Option<AdmittedObject<S>>, Rejected> {
        if previous.is_some_and(|p| p.path == path && p.written == def.written) {
            return Ok(None);
        }
        let internal = |e: serde_json::Error| Rejected {
            field: None,
            message: format!("internal error: a stored document does not parse: {e}"),
        };
        let mut defaulted = def.document().map_err(internal)?;
        let old: Option<Value> = previous
            .map(|p| serde_json::from_str(&p.admitted))
            .transpose()
            .map_err(internal)?;
        self.crds
            .admit(&mut defaulted.value, old.as_ref())
            .map_err(|r| Rejected {
                field: r.errors.first().map(|e| e.field.clone()),
                message: r.to_string(),
            })?;
        let object = self.kinds.decode(&defaulted).map_err(|message| Rejected {
            field: None,
            message,
        })?;
        Ok(Some(AdmittedObject {
            path: path.to_owned(),
            written: def.written.clone(),
            admitted: serde_json::to_string(&defaulted.value).map_err(internal)?,
            object,
        }))
    }

    /// The line of `field` of `doc` in its file's text, when it can be found.
    fn field_line(&self, path: &Path, doc: &Definition, field: &str) -> Option<usize> {
        let text = &self.files.get(path)?.text;
        field_line(text, doc.index, &format!("{}{field}", doc.field_prefix))
    }

    /// The text of `path` as last taken (parsed, or read again unchanged), if any.
    pub fn text(&self, path: &Path) -> Option<&str> {
        self.files.get(path).map(|f| f.text.as_str())
    }

    /// A snapshot of every admitted object.
    pub fn snapshot(&self) -> S {
        collect(self.admitted.values().map(|a| a.object.clone()))
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

/// Every definition of every object of the parsed files; skipped kinds are recorded in `out`.
fn definitions<'a>(
    files: &'a BTreeMap<PathBuf, ParsedFile>,
    out: &mut Applied,
) -> BTreeMap<&'a ObjectKey, Vec<(&'a Path, &'a Definition)>> {
    let mut definitions: BTreeMap<&ObjectKey, Vec<(&Path, &Definition)>> = BTreeMap::new();
    for (path, file) in files {
        out.skipped.extend(file.skipped.iter().cloned());
        for def in &file.definitions {
            definitions
                .entry(&def.key)
                .or_default()
                .push((path.as_path(), def));
        }
    }
    definitions
}

/// True when a file that had documents now holds only blanks: what a file truncated for
/// rewriting looks like.
fn emptied(previous: Option<&ParsedFile>, text: &str) -> bool {
    previous.is_some_and(|p| p.had_documents) && text.trim().is_empty()
}

fn kept_file(mut e: ManifestError, kept: bool) -> ManifestError {
    e.message.push_str(if kept {
        "; the file's previously admitted objects stay in force"
    } else {
        "; none of the file's objects is admitted"
    });
    e
}

fn kept_message(message: String, kept: bool) -> String {
    if kept {
        format!("{message}; the previously admitted version stays in force")
    } else {
        format!("{message}; not admitted")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The built-in defaults plus an HTTPRoute CRD whose hostnames have at most 10 characters.
    fn crds() -> Arc<Crds> {
        let mut crds = Crds::new();
        crate::admission::builtin::register(&mut crds).unwrap();
        crds.register(&json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "httproutes.gateway.networking.k8s.io"},
            "spec": {"group": "gateway.networking.k8s.io", "names": {"kind": "HTTPRoute", "plural": "httproutes"}, "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"hostnames": {"type": "array",
                            "items": {"type": "string", "maxLength": 10}}}}}}}}]}
        }))
        .unwrap();
        Arc::new(crds)
    }

    fn route(name: &str, host: &str) -> String {
        format!("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: {name}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames:\n  - a.b\n  - {host}\n")
    }

    /// `(name, second hostname)` of every admitted route.
    fn routes(a: &Admission) -> Vec<(String, String)> {
        a.snapshot()
            .http_routes
            .iter()
            .map(|r| {
                let host = r.spec.hostnames.as_ref().map_or("", |h| h[1].as_str());
                (r.metadata.name.clone().unwrap_or_default(), host.to_owned())
            })
            .collect()
    }

    fn read(files: &[(&str, &str)]) -> Vec<(PathBuf, FileRead)> {
        files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), Ok((*t).to_owned())))
            .collect()
    }

    #[test]
    fn a_rejected_update_keeps_the_admitted_version_and_names_the_field_line() {
        let mut a = Admission::new(crds());
        let first = a.apply(read(&[("a.yaml", &route("s", "s.io"))]), Reading::Final);
        assert!(
            first.errors.is_empty() && first.changed,
            "{:?}",
            first.errors
        );
        let bad = a.apply(
            read(&[("a.yaml", &route("s", "long.example.com"))]),
            Reading::Final,
        );
        let [e] = bad.errors.as_slice() else {
            panic!("{:?}", bad.errors)
        };
        assert_eq!((e.path.to_str(), e.line), (Some("a.yaml"), Some(9)), "{e}");
        assert!(e.message.contains("spec.hostnames[1]"), "{e}");
        assert!(
            e.message
                .ends_with("the previously admitted version stays in force"),
            "{e}"
        );
        assert!(!bad.changed);
        assert_eq!(routes(&a), [("s".to_owned(), "s.io".to_owned())]);
        // A new object that is rejected is simply not admitted.
        let other = a.apply(
            read(&[
                ("a.yaml", &route("s", "s1.io")),
                ("b.yaml", &route("t", "long.example.com")),
            ]),
            Reading::Final,
        );
        assert!(other.changed);
        assert!(
            other.errors[0].message.ends_with("not admitted"),
            "{:?}",
            other.errors
        );
        assert_eq!(routes(&a), [("s".to_owned(), "s1.io".to_owned())]);
    }

    #[test]
    fn a_file_that_does_not_parse_keeps_its_objects_while_others_change() {
        let mut a = Admission::new(crds());
        a.apply(
            read(&[
                ("a.yaml", &route("s", "s.io")),
                ("b.yaml", &route("t", "t.io")),
            ]),
            Reading::Final,
        );
        let r = a.apply(
            read(&[("a.yaml", "kind: [\n"), ("b.yaml", &route("t", "t1.io"))]),
            Reading::Final,
        );
        assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
        assert!(r.errors[0]
            .message
            .contains("previously admitted objects stay in force"));
        assert_eq!(
            routes(&a),
            [
                ("s".to_owned(), "s.io".to_owned()),
                ("t".to_owned(), "t1.io".to_owned())
            ]
        );
        // Deleting the file deletes its objects.
        let gone = a.apply(read(&[("b.yaml", &route("t", "t1.io"))]), Reading::Final);
        assert!(gone.changed && gone.errors.is_empty());
        assert_eq!(routes(&a), [("t".to_owned(), "t1.io".to_owned())]);
    }

    #[test]
    fn an_object_defined_twice_keeps_its_admitted_version() {
        let mut a = Admission::new(crds());
        a.apply(read(&[("a.yaml", &route("s", "s.io"))]), Reading::Final);
        let r = a.apply(
            read(&[
                ("a.yaml", &route("s", "s.io")),
                ("b.yaml", &route("s", "s2.io")),
            ]),
            Reading::Final,
        );
        let [e] = r.errors.as_slice() else {
            panic!("{:?}", r.errors)
        };
        assert!(
            e.message
                .contains("HTTPRoute default/s is defined more than once: a.yaml:1, b.yaml:1"),
            "{e}"
        );
        assert_eq!(routes(&a), [("s".to_owned(), "s.io".to_owned())]);
    }

    #[test]
    fn an_unchanged_reading_changes_nothing() {
        let mut a = Admission::new(crds());
        assert!(
            a.apply(read(&[("a.yaml", &route("s", "s.io"))]), Reading::Final)
                .changed
        );
        let again = a.apply(read(&[("a.yaml", &route("s", "s.io"))]), Reading::Final);
        assert!(!again.changed && again.errors.is_empty());
        assert_eq!(a.len(), 1);
    }
}
