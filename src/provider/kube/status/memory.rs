//! What the status writer remembers between passes, per object it tracks: the
//! `resourceVersion` and report revision it last compared, and the status it last wrote, so a
//! comparison whose answer is known is skipped and a write the cache has not shown yet is not
//! repeated. Apart from the writer so that this bookkeeping, the part with rules of its own, is
//! read and tested without a client.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::ObjectReference;
use serde_json::Value;

use crate::status::diff::StatusPatch;
use crate::status::{ObjectKind, ObjectStatus, Revision};

/// An object whose status the writer tracks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct ObjectKey {
    pub(super) kind: ObjectKind,
    pub(super) namespace: Option<String>,
    pub(super) name: String,
}

impl ObjectKey {
    pub(super) fn of(entry: &ObjectStatus) -> Self {
        Self {
            kind: entry.kind,
            namespace: entry.namespace.as_deref().map(str::to_owned),
            name: entry.name.to_string(),
        }
    }
}

/// What the writer last settled for one object.
#[derive(Debug)]
pub(super) struct Settled {
    /// The object's `resourceVersion` when it was compared or written.
    version: Option<String>,
    /// Revision of the computed status it was compared with; `None` for a route released.
    revision: Option<Revision>,
    /// The status part of the patch written at `version`, if one was.
    wrote: Option<Value>,
}

/// What the writer remembers per object, while the object is in the report (or a route still
/// carries our entries): enough to skip a comparison whose answer is known, and a write the
/// cache has not shown yet.
#[derive(Debug, Default)]
pub(super) struct Memory {
    objects: HashMap<ObjectKey, Settled>,
}

impl Memory {
    /// True when the object (by `resourceVersion`) and its computed status (by revision) are
    /// those last settled: comparing them again would give the same answer.
    pub(super) fn unchanged(
        &self,
        key: &ObjectKey,
        version: &Option<String>,
        revision: Option<Revision>,
    ) -> bool {
        self.objects
            .get(key)
            .is_some_and(|s| s.version == *version && s.revision == revision)
    }

    /// The object already carries its computed status.
    pub(super) fn matched(
        &mut self,
        key: ObjectKey,
        version: Option<String>,
        revision: Option<Revision>,
    ) {
        let settled = Settled {
            version,
            revision,
            wrote: None,
        };
        self.objects.insert(key, settled);
    }

    /// True when `status` was already written against this very `version`: the cache is
    /// behind, not the object, so the write is not repeated.
    pub(super) fn already_written(
        &mut self,
        key: &ObjectKey,
        version: &Option<String>,
        revision: Option<Revision>,
        status: &Value,
    ) -> bool {
        let Some(s) = self.objects.get_mut(key) else {
            return false;
        };
        let same = s.version == *version && s.wrote.as_ref() == Some(status);
        if same {
            s.revision = revision;
        }
        same
    }

    /// `status` was written against `version`.
    pub(super) fn wrote(&mut self, w: Write) {
        let settled = Settled {
            version: w.version,
            revision: w.revision,
            wrote: Some(w.patch.status().clone()),
        };
        self.objects.insert(w.key, settled);
    }

    pub(super) fn retain(&mut self, live: &HashSet<ObjectKey>) {
        self.objects.retain(|k, _| live.contains(k));
    }

    pub(super) fn clear(&mut self) {
        self.objects.clear();
    }
}

/// One planned write.
pub(super) struct Write {
    pub(super) key: ObjectKey,
    pub(super) revision: Option<Revision>,
    pub(super) version: Option<String>,
    pub(super) patch: StatusPatch,
    pub(super) reference: ObjectReference,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::routes::RouteKindId;
    use crate::status::{SealedReport, StatusBody, StatusReport};
    use serde_json::json;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            kind: ObjectKind::Route(RouteKindId::HttpRoute),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    /// Two different revisions of one entry, as sealing hands them out.
    fn revisions() -> (Revision, Revision) {
        let report = |accepted: &str| StatusReport {
            entries: vec![ObjectStatus::new(
                ObjectKind::GatewayClass,
                None,
                "c",
                Some(1),
                StatusBody::from(
                    json!({"conditions": [{"type": "Accepted", "status": accepted,
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
                ),
            )],
        };
        let first = SealedReport::from(report("True"));
        let second = report("False").seal(&first);
        let revision = |r: &SealedReport| r.entries_with_revisions().next().map(|e| e.1);
        (revision(&first).unwrap(), revision(&second).unwrap())
    }

    #[test]
    fn memory_skips_known_answers_and_repeated_writes() {
        let (r1, r2) = revisions();
        let v = |s: &str| Some(s.to_owned());
        let mut m = Memory::default();
        assert!(!m.unchanged(&key("a"), &v("1"), Some(r1)));
        m.matched(key("a"), v("1"), Some(r1));
        assert!(m.unchanged(&key("a"), &v("1"), Some(r1)));
        assert!(
            !m.unchanged(&key("a"), &v("2"), Some(r1)),
            "the object changed"
        );
        assert!(
            !m.unchanged(&key("a"), &v("1"), Some(r2)),
            "the status changed"
        );

        let status = json!({"parents": []});
        let reference = ObjectReference::default();
        let patch = StatusPatch {
            body: json!({"status": status}),
            notable: Vec::new(),
        };
        let (revision, version) = (Some(r1), v("1"));
        let (key_b, patch_b) = (key("b"), patch.clone());
        m.wrote(Write {
            key: key_b,
            revision,
            version,
            patch: patch_b,
            reference,
        });
        // The cache still shows version 1: the same write is not sent again, whatever the
        // revision, and the new revision is remembered.
        assert!(m.already_written(&key("b"), &v("1"), Some(r2), &status));
        assert!(m.unchanged(&key("b"), &v("1"), Some(r2)));
        assert!(!m.already_written(&key("b"), &v("2"), Some(r2), &status));
        assert!(!m.already_written(&key("b"), &v("1"), Some(r2), &json!({})));

        m.retain(&HashSet::from([key("b")]));
        assert!(
            !m.unchanged(&key("a"), &v("1"), Some(r1)),
            "gone from the report"
        );
        m.clear();
        assert!(!m.unchanged(&key("b"), &v("1"), Some(r2)));
    }
}
