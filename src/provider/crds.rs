//! CustomResourceDefinitions read from files (`--crds`), for standalone mode and `check` to
//! default and validate objects as the API server of a cluster with those CRDs would. The
//! built-in schemas (Gateway API and edgeplane.dev kinds) are always registered first; a CRD
//! file for the same kind replaces its built-in schema.

use std::path::{Path, PathBuf};

use crate::admission::{builtin, Crds};

use super::manifest::{parse_values, ManifestError};
use super::walk::walk;

/// `path` itself when it is a file, else the manifest files below it (see [`walk`]: hidden
/// files skipped, symlinks followed once); a symlink loop is an error.
fn manifest_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), ManifestError> {
    if !path.is_dir() {
        out.push(path.to_owned());
        return Ok(());
    }
    let found = walk(path)?;
    if let Some(e) = found.errors.into_iter().next() {
        return Err(e);
    }
    out.extend(found.files);
    Ok(())
}

/// The built-in Gateway API schemas plus every CustomResourceDefinition found in `paths`
/// (files or directories; documents of other kinds are ignored). Returns the names of the
/// CRDs read from files. Any file that does not parse, or a CRD the engine cannot use, is an
/// error naming the file and line.
pub fn load_crds(paths: &[PathBuf]) -> Result<(Crds, Vec<String>), ManifestError> {
    let mut crds = Crds::new();
    builtin::register(&mut crds).map_err(|e| ManifestError {
        path: PathBuf::from("<built-in>"),
        line: None,
        column: None,
        message: e.to_string(),
    })?;
    let mut files = Vec::new();
    for p in paths {
        manifest_files(p, &mut files)?;
    }
    let mut names = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| ManifestError {
            path: file.clone(),
            line: None,
            column: None,
            message: e.to_string(),
        })?;
        // Other documents (kustomizations, policies) are not CRDs and are passed over.
        for raw in parse_values(&file, &text)? {
            let is_crd = raw.value["apiVersion"].as_str() == Some("apiextensions.k8s.io/v1")
                && raw.value["kind"].as_str() == Some("CustomResourceDefinition");
            if is_crd {
                let name = crds
                    .register(&raw.value)
                    .map_err(|e| ManifestError::at(&file, raw.line, e.to_string()))?;
                names.push(name);
            }
        }
    }
    Ok((crds, names))
}
