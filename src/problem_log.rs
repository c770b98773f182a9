//! Problems named in the log where they happen: each problem of the published status (a
//! condition Accepted, ResolvedRefs or Programmed `False`, Conflicted `True`...) is logged once
//! as a warning when a publication first has it, and once at info level when a publication no
//! longer has it; republishing an unchanged status logs nothing. In standalone mode each line
//! names the file and line the object was read from.

use std::fmt;
use std::sync::Arc;

use crate::status::problems::{ObjectProblem, ProblemChanges};

/// Finds where an object was read from (`path:line`), by API group, kind, namespace and name.
pub type Locate = dyn Fn(&str, &str, Option<&str>, &str) -> Option<String> + Send + Sync;

/// Where objects come from, for log lines; empty when the provider cannot say (a cluster).
#[derive(Clone, Default)]
pub struct Sources(Option<Arc<Locate>>);

impl Sources {
    /// Objects located by `locate`.
    pub fn new(locate: Arc<Locate>) -> Self {
        Self(Some(locate))
    }

    fn of(&self, p: &ObjectProblem) -> Option<String> {
        let locate = self.0.as_ref()?;
        let api_version = p.kind.api_version();
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        locate(group, p.kind.as_str(), p.namespace.as_deref(), &p.name)
    }
}

impl fmt::Debug for Sources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Sources(located)"
        } else {
            "Sources(none)"
        })
    }
}

/// Logs every problem that appeared (warn) or cleared (info), with where its object was read
/// from when `sources` knows.
pub fn log_changes(changes: &ProblemChanges, sources: &Sources) {
    for p in &changes.appeared {
        let q = &p.problem;
        let source = sources.of(p).unwrap_or_default();
        tracing::warn!(
            object = %q.object,
            condition = %q.condition,
            reason = %q.reason,
            source = %source,
            "problem: {q}"
        );
    }
    for p in &changes.cleared {
        let q = &p.problem;
        let source = sources.of(p).unwrap_or_default();
        tracing::info!(
            object = %q.object,
            condition = %q.condition,
            reason = %q.reason,
            source = %source,
            "problem cleared: {q}"
        );
    }
}
