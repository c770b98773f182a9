//! Manifests named on the command line (`check -f PATH`): files and directories read once,
//! every file admitted together, so an object defined twice across them is found. A file named
//! explicitly is read whatever its extension; a directory is walked as `serve` walks it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::admitted::{Admission, Reading, SkippedKind, Taken};
use super::changed::read_text;
use super::manifest::ManifestError;
use super::walk::walk;
use crate::admission::Crds;
use crate::snapshot::Snapshot;

/// What one reading of the named paths found.
#[derive(Debug)]
pub struct PathsLoad {
    pub snapshot: Snapshot,
    /// Kinds the product does not read (someone else's objects).
    pub skipped: Vec<SkippedKind>,
    /// Files that did not parse, objects that were not admitted, unknown kinds of our groups.
    pub errors: Vec<ManifestError>,
    /// Manifest files read.
    pub files: usize,
    /// Documents in them, of every kind.
    pub documents: usize,
    /// Objects admitted.
    pub admitted: usize,
}

/// Reads every file of `paths` (a file, or a directory read recursively) once and admits its
/// objects through `crds`. Fails only when a path does not exist or a directory cannot be
/// listed; every other problem is an entry of `errors`.
pub fn load_paths(paths: &[PathBuf], crds: Arc<Crds>) -> Result<PathsLoad, ManifestError> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|e| ManifestError {
            path: path.clone(),
            line: None,
            column: None,
            message: e.to_string(),
        })?;
        let found = if meta.is_dir() {
            let w = walk(path)?;
            errors.extend(w.errors);
            w.files
        } else {
            vec![path.clone()]
        };
        // A file named twice (or named and inside a named directory) is read once.
        for f in found {
            if seen.insert(std::fs::canonicalize(&f).unwrap_or_else(|_| f.clone())) {
                files.push(f);
            }
        }
    }
    let count = files.len();
    let taken = files
        .into_iter()
        .map(|p: PathBuf| {
            let text = read_text(Path::new(&p));
            (p, Taken::Read(text))
        })
        .collect();
    let mut admission = Admission::new(crds);
    let applied = admission.apply(taken, Reading::Final);
    errors.extend(applied.errors);
    Ok(PathsLoad {
        snapshot: admission.snapshot(),
        skipped: applied.skipped.into_iter().collect(),
        errors,
        files: count,
        documents: admission.documents(),
        admitted: admission.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_directories_are_read_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let class = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: c}\nspec: {controllerName: x/y}\n";
        std::fs::write(dir.path().join("a.yaml"), class).unwrap();
        // Any extension, when named.
        let other = dir.path().join("svc.txt");
        std::fs::write(&other, "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HttpRoute\nmetadata: {name: r}\n").unwrap();
        let crds = crate::admission::builtin::crds();
        let paths = [
            dir.path().to_owned(),
            dir.path().join("a.yaml"),
            other.clone(),
        ];
        let load = load_paths(&paths, crds.clone()).unwrap();
        assert_eq!((load.files, load.documents, load.admitted), (2, 3, 2));
        assert_eq!(load.snapshot.gateway_classes.len(), 1);
        assert_eq!(load.errors.len(), 1, "{:?}", load.errors);
        let e = load.errors[0].to_string();
        assert!(e.contains("svc.txt:5") && e.contains("HttpRoute"), "{e}");
        let missing = load_paths(&[dir.path().join("absent")], crds).unwrap_err();
        assert!(missing.to_string().contains("absent"), "{missing}");
    }
}
