//! Documents of kinds the file provider does not read: skipped quietly when they belong to
//! someone else (a Deployment, a ConfigMap, a kind of another API group), an error naming the
//! file and line when they look meant for us but name no kind we know (`kind: HttpRoute`,
//! `edgeplane.dev/v1beta1 ProxyConfigs`), so a typo is never checked as "nothing wrong". Pure.

use std::fmt;
use std::path::Path;

use super::admitted::Applied;
use super::manifest::ManifestError;
use super::objects::FileKinds;
use super::parsed::ParsedFile;
use crate::admission::Crds;
use crate::kinds::KindSet;

/// API groups whose every kind edgeplane reads: any other kind written in them is a mistake
/// (unless the CRDs given with `--crds` define it).
pub const OWN_GROUPS: [&str; 2] = ["gateway.networking.k8s.io", "edgeplane.dev"];

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

impl SkippedKind {
    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }

    /// Why a document of this kind is an error rather than someone else's object, or `None`
    /// when it is skipped: its kind differs only in case from one `kinds` reads in its group
    /// (any group), or its group is one of [`OWN_GROUPS`] and neither `kinds` nor `crds`
    /// defines the kind.
    pub fn unknown<S: KindSet>(&self, kinds: &FileKinds<S>, crds: &Crds) -> Option<String> {
        let group = self.group();
        let read = kinds.kinds_of_group(group);
        if read.is_empty() {
            return None;
        }
        let shown = if group.is_empty() {
            "the core API group"
        } else {
            group
        };
        if let Some(k) = read.iter().find(|k| k.eq_ignore_ascii_case(&self.kind)) {
            return Some(format!(
                "unknown kind {} in {shown} (kinds are case-sensitive: did you mean {k}?); the object is ignored",
                self.kind
            ));
        }
        if OWN_GROUPS.contains(&group) && !crds.contains(&self.api_version, &self.kind) {
            return Some(format!(
                "unknown kind {} in {shown}: edgeplane reads {} there; the object is ignored",
                self.kind,
                read.join(", ")
            ));
        }
        None
    }
}

/// Records the documents of `file` whose kind is not read: an error at their line when the
/// kind looks meant for us ([`SkippedKind::unknown`]), else a skipped kind.
pub(super) fn sort_skipped<S: KindSet>(
    kinds: &FileKinds<S>,
    crds: &Crds,
    path: &Path,
    file: &ParsedFile,
    out: &mut Applied,
) {
    for (kind, line) in file.skipped() {
        match kind.unknown(kinds, crds) {
            Some(message) => out.errors.push(ManifestError::at(path, *line, message)),
            None => {
                out.skipped.insert(kind.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Snapshot;

    fn unknown(api_version: &str, kind: &str) -> Option<String> {
        let crds = crate::admission::builtin::crds();
        SkippedKind {
            api_version: api_version.into(),
            kind: kind.into(),
        }
        .unknown(FileKinds::<Snapshot>::snapshot(), &crds)
    }

    #[test]
    fn kinds_meant_for_us_are_errors_others_are_skipped() {
        let typo = unknown("gateway.networking.k8s.io/v1", "HttpRoute").unwrap();
        assert!(typo.contains("did you mean HTTPRoute?"), "{typo}");
        let made_up = unknown("gateway.networking.k8s.io/v1", "Route").unwrap();
        assert!(made_up.contains("HTTPRoute"), "{made_up}");
        assert!(unknown("edgeplane.dev/v1beta1", "ProxyConfigs").is_some());
        let core = unknown("v1", "service").unwrap();
        assert!(core.contains("the core API group"), "{core}");
        // Someone else's kinds, in groups we read from and in others.
        assert_eq!(unknown("v1", "Pod"), None);
        assert_eq!(unknown("apps/v1", "Deployment"), None);
        assert_eq!(
            unknown("gateway.networking.x-k8s.io/v1alpha1", "XMesh"),
            None
        );
        assert_eq!(unknown("example.com/v1", "HTTPRoute"), None);
    }
}
