//! The manifest files below a directory: recursive, in name order, following symlinks (mounted
//! ConfigMaps are made of them) at most once per target. Directories are tracked by canonical
//! path, so a symlink back to an ancestor (`loop -> .`) is reported as a loop instead of being
//! walked again, and a directory or file reached through several links is read once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::manifest::ManifestError;

/// Directories nested deeper than this are not read (a tree this deep is a mistake).
const MAX_DEPTH: usize = 32;

/// What a walk found: the manifest files to read, and the links it refused to follow.
#[derive(Debug, Default)]
pub struct Walk {
    /// Manifest files in walk order (names sorted within each directory).
    pub files: Vec<PathBuf>,
    /// Symlink loops and over-deep directories, each naming the path; the rest of the tree
    /// was walked.
    pub errors: Vec<ManifestError>,
    /// Every directory walked, the root included, as reached (not canonical).
    pub dirs: Vec<PathBuf>,
    /// Whether any entry was a symlink: then a file may be known under another name than the
    /// one a change is reported for.
    pub links: bool,
}

/// Walks `root`. Fails only when `root` itself cannot be listed.
pub fn walk(root: &Path) -> Result<Walk, ManifestError> {
    let canonical = std::fs::canonicalize(root).map_err(|e| io_error(root, &e))?;
    let mut w = Walker {
        out: Walk::default(),
        dirs: HashSet::from([canonical.clone()]),
        files: HashSet::new(),
        ancestors: vec![canonical],
    };
    w.dir(root, 0)?;
    Ok(w.out)
}

struct Walker {
    out: Walk,
    /// Canonical paths of the directories entered so far.
    dirs: HashSet<PathBuf>,
    /// Canonical paths of the files listed so far.
    files: HashSet<PathBuf>,
    /// Canonical paths of the directories being walked, root first.
    ancestors: Vec<PathBuf>,
}

impl Walker {
    fn dir(&mut self, dir: &Path, depth: usize) -> Result<(), ManifestError> {
        self.out.dirs.push(dir.to_owned());
        let mut entries: Vec<(String, PathBuf, Option<std::fs::FileType>)> = std::fs::read_dir(dir)
            .map_err(|e| io_error(dir, &e))?
            .filter_map(Result::ok)
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (name, e.path(), e.file_type().ok())
            })
            .filter(|(name, _, _)| !ignored_name(name))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, path, kind) in entries {
            // A plain file's canonical path is its name in the canonical directory: no
            // `stat` or `realpath` per file, which is most of a walk of thousands of files.
            if let (Some(kind), Some(here), Some(name)) =
                (kind, self.ancestors.last(), path.file_name())
            {
                if kind.is_file() {
                    if is_manifest(&path) && self.files.insert(here.join(name)) {
                        self.out.files.push(path);
                    }
                    continue;
                }
            }
            self.out.links |= kind.is_none_or(|k| k.is_symlink());
            // Follows symlinks, as in mounted ConfigMaps (`x.yaml -> ..data/x.yaml`).
            let Ok(meta) = std::fs::metadata(&path) else {
                continue; // a dangling link, or a file deleted while we list
            };
            let Ok(canonical) = std::fs::canonicalize(&path) else {
                continue;
            };
            if meta.is_dir() {
                self.enter(path, canonical, depth + 1);
            } else if meta.is_file() && is_manifest(&path) && self.files.insert(canonical) {
                self.out.files.push(path);
            }
        }
        Ok(())
    }

    fn enter(&mut self, path: PathBuf, canonical: PathBuf, depth: usize) {
        if let Some(target) = self.ancestors.iter().find(|a| **a == canonical) {
            let message = format!(
                "symlink loop: the directory is {}, which contains it; not followed",
                target.display()
            );
            self.out.errors.push(error(&path, message));
            return;
        }
        if !self.dirs.insert(canonical.clone()) {
            return; // reached through another link already
        }
        if depth > MAX_DEPTH {
            let message = format!("nested more than {MAX_DEPTH} directories deep; not read");
            self.out.errors.push(error(&path, message));
            return;
        }
        self.ancestors.push(canonical);
        if let Err(e) = self.dir(&path, depth) {
            self.out.errors.push(e);
        }
        self.ancestors.pop();
    }
}

fn error(path: &Path, message: String) -> ManifestError {
    ManifestError {
        path: path.to_owned(),
        line: None,
        column: None,
        message,
    }
}

pub(super) fn io_error(path: &Path, e: &std::io::Error) -> ManifestError {
    error(path, e.to_string())
}

/// Hidden files and the temporary files of editors (`.x.swp`, `x~`, `#x#`) are never read.
pub fn ignored_name(name: &str) -> bool {
    name.starts_with('.')
        || name.starts_with('#')
        || name.ends_with('~')
        || name.ends_with(".swp")
        || name.ends_with(".swx")
        || name.ends_with(".tmp")
}

/// True for the extensions read: `.yaml`, `.yml`, `.json`.
pub fn is_manifest(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editor_and_hidden_files_are_ignored() {
        for n in [
            ".x.yaml",
            "x.yaml~",
            "#x.yaml#",
            ".x.yaml.swp",
            "x.yaml.tmp",
        ] {
            assert!(ignored_name(n), "{n}");
        }
        assert!(!ignored_name("x.yaml"));
        assert!(is_manifest(Path::new("a/b.yml")));
        assert!(is_manifest(Path::new("b.json")));
        assert!(!is_manifest(Path::new("b.txt")));
    }

    #[cfg(unix)]
    #[test]
    fn links_are_followed_once_and_loops_reported() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/a.yaml"), "").unwrap();
        symlink(d.join("sub"), d.join("again")).unwrap();
        symlink("a.yaml", d.join("sub/b.yaml")).unwrap();
        symlink(".", d.join("sub/loop")).unwrap();
        symlink("..", d.join("sub/up")).unwrap();
        let w = walk(d).unwrap();
        let files: Vec<_> = w.files.iter().map(|f| f.strip_prefix(d).unwrap()).collect();
        assert_eq!(files, [Path::new("again/a.yaml")]);
        let mut loops: Vec<_> = w
            .errors
            .iter()
            .map(|e| e.path.strip_prefix(d).unwrap().to_owned())
            .collect();
        loops.sort();
        assert_eq!(
            loops,
            [Path::new("again/loop"), Path::new("again/up")],
            "{:?}",
            w.errors
        );
    }
}
