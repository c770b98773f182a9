//! Which files a burst of change events touched, and whether those files can be read alone
//! instead of walking the whole directory again. A directory of thousands of manifests changes
//! one file at a time; reading only that file keeps a change's cost independent of the
//! directory's size. Whenever the events cannot say exactly which files changed (a directory
//! renamed or removed, a symlink, a file outside the directories last walked, a watch error),
//! the answer is "walk everything", which is always correct.

use std::collections::{BTreeSet, HashSet};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::admitted::FileRead;
use super::walk::{ignored_name, is_manifest, Walk};

/// The paths change events named since the last reading, or the need to walk everything.
#[derive(Debug, Default)]
pub struct Changes {
    paths: BTreeSet<PathBuf>,
    rescan: bool,
}

impl Changes {
    /// Records the paths of one event; an event without paths (or one the watcher says it
    /// lost track with) means the whole directory must be read.
    pub fn record(&mut self, event: &notify::Event) {
        if event.paths.is_empty() || event.need_rescan() {
            self.rescan = true;
        }
        self.paths.extend(event.paths.iter().cloned());
    }

    /// Asks for a reading of the whole directory (a watch error, a retry).
    pub fn rescan(&mut self) {
        self.rescan = true;
    }

    /// Takes what was recorded, leaving nothing: `None` when the directory must be walked.
    pub fn take(&mut self) -> Option<BTreeSet<PathBuf>> {
        let rescan = std::mem::take(&mut self.rescan);
        let paths = std::mem::take(&mut self.paths);
        (!rescan).then_some(paths)
    }
}

/// What the last walk of the directory looked like: enough to tell whether a changed path is
/// a plain manifest file of a directory already known.
#[derive(Debug, Default)]
pub struct Shape {
    dirs: HashSet<PathBuf>,
    /// False when the walk met a symlink or an error: a file may then be known under another
    /// name, so changes are always read by walking.
    simple: bool,
}

impl Shape {
    /// The shape of the tree `walk` found.
    pub fn of(walk: &Walk) -> Self {
        Self {
            dirs: walk.dirs.iter().cloned().collect(),
            simple: !walk.links && walk.errors.is_empty(),
        }
    }

    /// The changed manifest files among `paths`, each read now (`None`: removed), or `None`
    /// when only a walk can tell what changed. Paths that are not manifests (editor temp
    /// files, other extensions) are passed over, as a walk would.
    pub fn read(&self, paths: &BTreeSet<PathBuf>) -> Option<Vec<(PathBuf, Option<FileRead>)>> {
        if !self.simple {
            return None;
        }
        let mut changes = Vec::new();
        for path in paths {
            if self.dirs.contains(path) || !self.dirs.contains(path.parent()?) {
                return None; // a directory itself changed, or a path outside those walked
            }
            let meta = match std::fs::symlink_metadata(path) {
                Ok(meta) => Some(meta),
                Err(e) if e.kind() == ErrorKind::NotFound => None,
                Err(_) => return None, // a path that cannot be looked at
            };
            // A new directory (whatever its name: files created in it before the watch
            // reached it send no events of their own) or a symlink: only a walk can tell.
            if meta.as_ref().is_some_and(|m| !m.file_type().is_file()) {
                return None;
            }
            let name = path.file_name()?.to_string_lossy();
            if ignored_name(&name) || !is_manifest(path) {
                continue;
            }
            let read = meta.map(|_| read_text(path));
            changes.push((path.clone(), read));
        }
        Some(changes)
    }
}

/// A file's text, or why it could not be read.
pub fn read_text(path: &Path) -> FileRead {
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use notify::event::{CreateKind, EventKind, Flag};

    use super::*;
    use crate::provider::walk::walk;

    fn event(paths: &[&Path]) -> notify::Event {
        paths.iter().fold(
            notify::Event::new(EventKind::Create(CreateKind::File)),
            |e, p| e.add_path(p.to_path_buf()),
        )
    }

    #[test]
    fn plain_files_of_known_directories_are_read_alone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).expect("sub");
        std::fs::write(root.join("a.yaml"), "a").expect("a");
        std::fs::write(root.join("sub/b.yaml"), "b").expect("b");
        let shape = Shape::of(&walk(root).expect("walk"));

        let mut changes = Changes::default();
        std::fs::write(root.join("sub/b.yaml"), "b2").expect("b");
        std::fs::write(root.join("new.yml"), "n").expect("new");
        std::fs::remove_file(root.join("a.yaml")).expect("rm");
        changes.record(&event(&[
            &root.join("sub/b.yaml"),
            &root.join("new.yml"),
            &root.join("a.yaml"),
            &root.join(".b.yaml.swp"),
            &root.join("notes.txt"),
        ]));
        let paths = changes.take().expect("no rescan");
        let read = shape.read(&paths).expect("read alone");
        assert_eq!(
            read,
            vec![
                (root.join("a.yaml"), None),
                (root.join("new.yml"), Some(Ok("n".to_owned()))),
                (root.join("sub/b.yaml"), Some(Ok("b2".to_owned()))),
            ]
        );
        assert_eq!(changes.take(), Some(BTreeSet::new()), "taken once");
    }

    #[test]
    fn anything_else_asks_for_a_walk() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).expect("sub");
        let shape = Shape::of(&walk(root).expect("walk"));
        let one = |p: PathBuf| BTreeSet::from([p]);
        // A directory that changed, one not walked, a new directory.
        assert_eq!(shape.read(&one(root.join("sub"))), None);
        assert_eq!(shape.read(&one(root.join("other/x.yaml"))), None);
        std::fs::create_dir(root.join("new.yaml")).expect("dir");
        assert_eq!(shape.read(&one(root.join("new.yaml"))), None);
        // A new directory of any name: files written into it before it was watched send no
        // events, so it is walked.
        std::fs::create_dir(root.join("nested")).expect("dir");
        std::fs::write(root.join("nested/x.yaml"), "x").expect("x");
        assert_eq!(shape.read(&one(root.join("nested"))), None);
        // Events without paths, or after the watcher lost track.
        let mut changes = Changes::default();
        changes.record(&notify::Event::new(EventKind::Any));
        assert_eq!(changes.take(), None);
        changes.record(&event(&[&root.join("a.yaml")]).set_flag(Flag::Rescan));
        assert_eq!(changes.take(), None);
        // A tree with a symlink is always walked.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.join("sub"), root.join("link")).expect("link");
            let linked = Shape::of(&walk(root).expect("walk"));
            assert_eq!(linked.read(&one(root.join("sub/x.yaml"))), None);
        }
    }
}
