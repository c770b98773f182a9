//! The objects of a config directory as an API server would hold them. Every document is
//! defaulted and validated against its CRD before it is admitted; an object that is rejected,
//! defined twice, or part of a file that does not parse keeps its last admitted version, as a
//! rejected `kubectl apply` leaves the stored object unchanged. Pure: callers read the files.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::lines::field_line;
use super::manifest::{parse_documents_for, ManifestError};
use super::objects::{FileKinds, Object};
use super::parsed::{Definition, ParsedFile, Written};
use super::skipped::sort_skipped;
pub use super::skipped::SkippedKind;
use crate::admission::Crds;
use crate::kinds::KindSet;
use crate::snapshot::Snapshot;
pub use key::ObjectKey;
pub use reading::{Applied, FileRead, Reading, Taken};

mod key;
mod queries;
mod reading;

/// Which objects a reading settles again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every object: each standing problem is reported again.
    All,
    /// The objects the changed files defined before or define now.
    Touched,
}

/// The documents of files parsed during one reading, by file and [`Definition::position`];
/// each is taken by the admission of its definition.
type Fresh = HashMap<Arc<Path>, Vec<Option<Written>>>;

/// Why a document was not admitted, and the field the first error is about.
struct Rejected {
    field: Option<String>,
    message: String,
}

/// An admitted object, with what it was admitted from.
struct AdmittedObject<S> {
    /// The file it was read from, shared with the file's entry.
    path: Arc<Path>,
    /// The digest of the document it was admitted from ([`Definition::digest`]).
    digest: [u8; 20],
    object: Object<S>,
}

/// A new version of an object and, for a kind with transition rules, its defaulted document
/// as compact JSON (`oldSelf` of the version after it).
type Admitted<S> = (AdmittedObject<S>, Option<Box<str>>);

/// A file's last parse as the state holds it.
type Held = Box<ParsedFile>;

/// The admission state of a config directory across reloads, for the kinds of `S`.
pub struct Admission<S = Snapshot> {
    crds: Arc<Crds>,
    kinds: FileKinds<S>,
    /// Boxed, as `admitted` is.
    files: BTreeMap<Arc<Path>, Held>,
    /// Boxed: a map node holds eleven entries, most of them half full, so a large entry
    /// costs its size about twice over.
    admitted: BTreeMap<ObjectKey, Box<AdmittedObject<S>>>,
    /// The admitted objects of kinds with transition rules (few are: most objects never need
    /// it), each after defaulting, as compact JSON: `oldSelf` of its next version.
    olds: BTreeMap<ObjectKey, Box<str>>,
    /// Every admitted object in its snapshot field, in key order: what [`collect`]ing
    /// `admitted` gives. A reading of some files puts in place only the objects it admitted
    /// anew or deleted, so taking a snapshot copies a list of pointers rather than sorting
    /// every object into its field again.
    ///
    /// [`collect`]: super::objects::collect
    snapshot: S,
    /// The files defining each object that is not defined exactly once, in the file of its
    /// admitted version: defined twice, or only in files whose version was rejected. Every
    /// other object is defined in its admitted version's file alone, so a reading of some
    /// files finds every definition of the objects it touches in those files, the admitted
    /// versions' files and these, without a walk over every file.
    scattered: BTreeMap<ObjectKey, Box<[Arc<Path>]>>,
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
            olds: BTreeMap::new(),
            snapshot: S::default(),
            scattered: BTreeMap::new(),
        }
    }

    /// Applies one complete reading of the directory: every manifest file with its text, or
    /// [`Taken::Held`] for a file known to be unchanged; files not listed were removed. A file
    /// whose text did not change is not parsed again; an unchanged document is not admitted
    /// again. Every object is settled again, so every standing problem is reported.
    pub fn apply(&mut self, files_read: Vec<(PathBuf, Taken)>, reading: Reading) -> Applied {
        let listed: BTreeSet<&Path> = files_read.iter().map(|(p, _)| p.as_path()).collect();
        let removed: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| !listed.contains(&***p))
            .map(|p| p.to_path_buf())
            .collect();
        let changes = files_read
            .into_iter()
            .map(|(p, t)| (p, Some(t)))
            .chain(removed.into_iter().map(|p| (p, None)))
            .collect();
        self.settle(changes, reading, Scope::All)
    }

    /// Applies the changes of some files only (`None`: the file was removed); every other file
    /// is as last read. Only the objects those files defined before or define now are settled
    /// again, so a change costs in proportion to the files it touches.
    pub fn apply_changes(
        &mut self,
        changes: Vec<(PathBuf, Option<FileRead>)>,
        reading: Reading,
    ) -> Applied {
        let changes = changes
            .into_iter()
            .map(|(p, read)| (p, read.map(Taken::Read)))
            .collect();
        self.settle(changes, reading, Scope::Touched)
    }

    fn settle(
        &mut self,
        changes: Vec<(PathBuf, Option<Taken>)>,
        reading: Reading,
        scope: Scope,
    ) -> Applied {
        let mut out = Applied::default();
        // A reading of every object settles them all: it lists none.
        let listing = scope == Scope::Touched;
        let mut touched = BTreeSet::new();
        // The files whose definitions this reading changed (parsed anew, or removed).
        let mut reparsed = BTreeSet::new();
        // The documents of the files parsed by this reading, for their admission.
        let mut fresh = Fresh::new();
        for (path, change) in changes {
            // The path keeps its shared copy while the file stays.
            let (shared, previous) = match self.files.remove_entry(path.as_path()) {
                Some((shared, previous)) => (shared, Some(previous)),
                None => (Arc::from(path.as_path()), None),
            };
            let parsed = match change {
                None => {
                    let gone = previous.iter().flat_map(|p| &p.definitions);
                    touched.extend(gone.filter(|_| listing).map(|d| d.key.clone()));
                    reparsed.insert(shared.clone());
                    None
                }
                Some(Taken::Held) => previous,
                Some(Taken::Read(read)) => {
                    let before: Vec<ObjectKey> = previous
                        .iter()
                        .filter(|_| listing)
                        .flat_map(|p| p.definitions.iter().map(|d| d.key.clone()))
                        .collect();
                    // Only a new parse changes the file's definitions.
                    match self.take(&path, read, previous, reading, &mut out) {
                        Ok((parsed, documents)) => {
                            fresh.insert(shared.clone(), documents.into_iter().map(Some).collect());
                            if listing {
                                sort_skipped(&self.kinds, &self.crds, &shared, &parsed, &mut out);
                            }
                            touched.extend(before);
                            reparsed.insert(shared.clone());
                            let now = parsed.definitions.iter().filter(|_| listing);
                            touched.extend(now.map(|d| d.key.clone()));
                            Some(parsed)
                        }
                        Err(kept) => kept,
                    }
                }
            };
            if let Some(p) = parsed {
                self.files.insert(shared, p);
            }
        }
        let keys = match scope {
            Scope::All => None,
            Scope::Touched => Some((&touched, &reparsed)),
        };
        let moved = self.admit_definitions(keys, &mut fresh, &mut out);
        self.place(moved, scope);
        match scope {
            Scope::All => self.drop_texts(None),
            Scope::Touched => self.drop_texts(Some(&fresh)),
        }
        out
    }

    /// Admits the objects of `keys` (every object: `None`) as the files now define them: an
    /// object defined once is admitted (or keeps its previous version when rejected, with the
    /// error in `out`), one defined in several places keeps its previous version, and one no
    /// longer defined is deleted. Returns the keys whose admitted object changed.
    fn admit_definitions(
        &mut self,
        scope: Option<(&BTreeSet<ObjectKey>, &BTreeSet<Arc<Path>>)>,
        fresh: &mut Fresh,
        out: &mut Applied,
    ) -> Vec<ObjectKey> {
        let mut moved = Vec::new();
        let keys = scope.map(|(keys, _)| keys);
        let definitions = match scope {
            Some((keys, reparsed)) => {
                let within = self.defining(keys, reparsed);
                definitions(&self.files, Some(keys), Some(&within))
            }
            None => {
                self.scattered.clear();
                definitions(&self.files, None, None)
            }
        };
        if keys.is_none() {
            for (path, file) in &self.files {
                sort_skipped(&self.kinds, &self.crds, path, file, out);
            }
        }
        // Objects of the scope without a definition now were deleted.
        let deleted: Vec<ObjectKey> = match keys {
            Some(keys) => keys
                .iter()
                .filter(|k| !definitions.contains_key(k))
                .cloned()
                .collect(),
            None => self
                .admitted
                .keys()
                .filter(|k| !definitions.contains_key(k))
                .cloned()
                .collect(),
        };
        for key in deleted {
            self.olds.remove(&key);
            self.scattered.remove(&key);
            if self.admitted.remove(&key).is_some() {
                out.changed = true;
                moved.push(key);
            }
        }
        for (key, defs) in definitions {
            let previous = self.admitted.remove(key);
            let settled = if let [(path, doc)] = defs.as_slice() {
                match self.admit(path, doc, previous.as_deref(), fresh) {
                    Ok(None) => previous,
                    Ok(Some((new, old))) => {
                        out.changed = true;
                        moved.push(key.clone());
                        match old {
                            Some(old) => self.olds.insert(key.clone(), old),
                            None => self.olds.remove(key),
                        };
                        Some(Box::new(new))
                    }
                    Err(rejected) => {
                        let line = rejected
                            .field
                            .and_then(|f| self.field_line(path, doc, &f))
                            .unwrap_or(doc.line());
                        let message = kept_message(rejected.message, previous.is_some());
                        out.errors.push(ManifestError::at(path, line, message));
                        previous
                    }
                }
            } else {
                let places: Vec<String> = defs
                    .iter()
                    .map(|(p, d)| format!("{}:{}", p.display(), d.line()))
                    .collect();
                let (path, doc) = defs[0];
                let message = format!("{key} is defined more than once: {}", places.join(", "));
                out.errors.push(ManifestError::at(
                    path,
                    doc.line(),
                    kept_message(message, previous.is_some()),
                ));
                previous
            };
            let alone = match (defs.as_slice(), &settled) {
                ([(path, _)], Some(object)) => object.path == **path,
                _ => false,
            };
            if alone {
                self.scattered.remove(key);
            } else {
                let mut places: Vec<Arc<Path>> = defs.iter().map(|(p, _)| (*p).clone()).collect();
                places.dedup();
                self.scattered
                    .insert(key.clone(), places.into_boxed_slice());
            }
            if let Some(object) = settled {
                self.admitted.insert(key.clone(), object);
            }
        }
        moved
    }

    /// The files that may define an object of `keys`: those whose definitions this reading
    /// changed (`reparsed`), the admitted versions' files and the objects' scattered places.
    fn defining<'a>(
        &'a self,
        keys: &BTreeSet<ObjectKey>,
        reparsed: &'a BTreeSet<Arc<Path>>,
    ) -> BTreeSet<&'a Path> {
        let mut within: BTreeSet<&Path> = reparsed.iter().map(|p| &**p).collect();
        for key in keys {
            match self.scattered.get(key) {
                Some(places) => within.extend(places.iter().map(|p| &**p)),
                None => within.extend(self.admitted.get(key).map(|a| &*a.path)),
            }
        }
        within
    }

    /// Brings the held snapshot to the admitted objects after the objects of `moved` changed:
    /// each put in its place for a reading of some files, the whole snapshot collected anew
    /// for a reading of every file (most objects may have moved) or when a place cannot be
    /// found.
    fn place(&mut self, moved: Vec<ObjectKey>, scope: Scope) {
        if moved.is_empty() {
            return;
        }
        let (admitted, kinds, snapshot) = (&self.admitted, &self.kinds, &mut self.snapshot);
        let placed = scope == Scope::Touched
            && moved.iter().all(|key| {
                let object = admitted.get(key).map(|a| &a.object);
                kinds.place(
                    snapshot,
                    (key.group(), key.kind()),
                    (key.namespace(), key.name()),
                    object,
                )
            });
        if !placed {
            self.snapshot =
                super::objects::collect(self.admitted.values().map(|a| a.object.clone()));
        }
    }

    /// The file `path` as this reading takes it: `Ok` with a new parse when its text changed;
    /// `Err` with its previous parse (if any) when unchanged, when it looks half-written in a
    /// tentative reading (listed as unsettled), or when it does not parse or cannot be read
    /// (an error in `out`).
    fn take(
        &self,
        path: &Path,
        read: FileRead,
        previous: Option<Held>,
        reading: Reading,
        out: &mut Applied,
    ) -> Result<(Held, Vec<Written>), Option<Held>> {
        let tentative = reading == Reading::Tentative;
        let kept = match read {
            Ok(text) if previous.as_ref().is_some_and(|p| p.parsed_from(&text)) => previous,
            Ok(text) if tentative && emptied(previous.as_deref(), &text) => {
                out.unsettled.push(path.to_owned());
                previous
            }
            Ok(text) => match parse_documents_for(&self.kinds, path, &text) {
                Ok(documents) => {
                    let (parsed, written) = ParsedFile::new(&self.kinds, text, documents);
                    return Ok((Box::new(parsed), written));
                }
                Err(_) if tentative => {
                    out.unsettled.push(path.to_owned());
                    previous
                }
                Err(e) => {
                    out.errors.push(kept_file(e, previous.is_some()));
                    previous
                }
            },
            Err(_) if tentative => {
                out.unsettled.push(path.to_owned());
                previous
            }
            Err(message) => {
                out.errors.push(ManifestError {
                    path: path.to_owned(),
                    line: None,
                    column: None,
                    message: kept_message(message, previous.is_some()),
                });
                previous
            }
        };
        Err(kept)
    }

    /// Admits one definition: `Ok(None)` when it is the previous version unchanged, else the
    /// new version and, for a kind with transition rules, its defaulted document (compact
    /// JSON) to keep for the next version's admission.
    fn admit(
        &self,
        path: &Arc<Path>,
        def: &Definition,
        previous: Option<&AdmittedObject<S>>,
        fresh: &mut Fresh,
    ) -> Result<Option<Admitted<S>>, Rejected> {
        if previous.is_some_and(|p| p.path == *path && p.digest == def.digest) {
            return Ok(None);
        }
        let internal = |e: serde_json::Error| Rejected {
            field: None,
            message: format!("internal error: a stored document does not parse: {e}"),
        };
        let written = self.written(path, def, fresh).ok_or_else(|| Rejected {
            field: None,
            message: "internal error: a held file no longer parses".to_owned(),
        })?;
        let mut defaulted = written.document().map_err(internal)?;
        let old: Option<Value> = previous
            .and(self.olds.get(&def.key))
            .map(|old| serde_json::from_str(old))
            .transpose()
            .map_err(internal)?;
        let rejected = |r: crate::admission::Rejection| Rejected {
            field: r.errors.first().map(|e| e.field.clone()),
            message: r.to_string(),
        };
        self.crds
            .admit(&mut defaulted.value, old.as_ref())
            .map_err(rejected)?;
        // An edgeplane object written at an older version is stored (and read) as v1beta1.
        if crate::kinds::crd::needs_storage_conversion(&defaulted.value) {
            let stored = crate::kinds::crd::STORAGE_API_VERSION;
            defaulted.value =
                crate::kinds::crd::convert(defaulted.value.take(), stored).map_err(|e| {
                    Rejected {
                        field: None,
                        message: e.to_string(),
                    }
                })?;
            defaulted.api_version = stored.to_owned();
            self.crds
                .admit(&mut defaulted.value, old.as_ref())
                .map_err(rejected)?;
        }
        let object = self.kinds.decode(&defaulted).map_err(|message| Rejected {
            field: None,
            message,
        })?;
        let old = self
            .crds
            .reads_old(&defaulted.api_version, &defaulted.kind)
            .then(|| serde_json::to_string(&defaulted.value).map(String::into_boxed_str))
            .transpose()
            .map_err(internal)?;
        let admitted = AdmittedObject {
            path: path.clone(),
            digest: def.digest,
            object,
        };
        Ok(Some((admitted, old)))
    }

    /// The document of `def`: parsed by this reading, else parsed again from its file's
    /// text (every document of that file at once, for the file's other definitions).
    fn written(&self, path: &Arc<Path>, def: &Definition, fresh: &mut Fresh) -> Option<Written> {
        if !fresh.contains_key(&**path) {
            let documents = self.files.get(&**path)?.documents(&self.kinds, path);
            fresh.insert(path.clone(), documents.into_iter().map(Some).collect());
        }
        fresh.get_mut(&**path)?.get_mut(def.position())?.take()
    }

    /// The line of `field` of `doc` in its file's text, when it can be found.
    fn field_line(&self, path: &Path, doc: &Definition, field: &str) -> Option<usize> {
        let file = self.files.get(path)?;
        let prefix = file.field_prefix(doc.position())?;
        field_line(file.text()?, doc.index(), &format!("{prefix}{field}"))
    }

    /// Drops the texts of the files (of `paths`; every file: `None`) whose every definition
    /// is admitted as it is now: only a change of the file, read anew, concerns them again.
    fn drop_texts(&mut self, paths: Option<&Fresh>) {
        let admitted = &self.admitted;
        let settled = |path: &Arc<Path>, file: &ParsedFile| {
            file.text().is_some()
                && file.definitions.iter().all(|d| {
                    admitted
                        .get(&d.key)
                        .is_some_and(|a| a.path == *path && a.digest == d.digest)
                })
        };
        match paths {
            None => {
                for (path, file) in self.files.iter_mut() {
                    if settled(path, file) {
                        file.drop_text();
                    }
                }
            }
            Some(paths) => {
                for path in paths.keys() {
                    let file = self.files.get(&**path);
                    if file.is_some_and(|f| settled(path, f)) {
                        if let Some(file) = self.files.get_mut(&**path) {
                            file.drop_text();
                        }
                    }
                }
            }
        }
    }
}

/// Every definition of the objects of `keys` (of every object when `None`) in the parsed
/// files (those of `within` only, when given: they must hold every such definition), in file
/// order.
fn definitions<'a>(
    files: &'a BTreeMap<Arc<Path>, Held>,
    keys: Option<&BTreeSet<ObjectKey>>,
    within: Option<&BTreeSet<&Path>>,
) -> BTreeMap<&'a ObjectKey, Vec<(&'a Arc<Path>, &'a Definition)>> {
    let mut definitions: BTreeMap<&ObjectKey, Vec<(&Arc<Path>, &Definition)>> = BTreeMap::new();
    let listed: Box<dyn Iterator<Item = (&Arc<Path>, &Held)>> = match within {
        Some(within) => Box::new(within.iter().filter_map(|p| files.get_key_value(*p))),
        None => Box::new(files.iter()),
    };
    for (path, file) in listed {
        let wanted = file
            .definitions
            .iter()
            .filter(|d| keys.is_none_or(|k| k.contains(&d.key)));
        for def in wanted {
            definitions.entry(&def.key).or_default().push((path, def));
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
mod tests;
