//! Problems that appear and clear between two publications of the status, so that `serve`
//! names each one once when it appears and once when it clears instead of counting them on
//! every publication. Pure.

use std::collections::BTreeSet;

use super::{ObjectKind, Problem, StatusReport};

/// A problem and the object it is on (the problem's `object` may add a listener or parent).
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectProblem {
    pub kind: ObjectKind,
    pub namespace: Option<String>,
    pub name: String,
    pub problem: Problem,
}

/// What changed between two reports: problems of `after` that `before` did not have, and
/// problems of `before` that `after` no longer has (fixed, or its object is gone). A problem
/// whose reason or message changed is one that cleared and one that appeared.
#[derive(Debug, Default, PartialEq)]
pub struct ProblemChanges {
    pub appeared: Vec<ObjectProblem>,
    pub cleared: Vec<ObjectProblem>,
}

impl ProblemChanges {
    /// The changes from `before` to `after`, in report order.
    pub fn between(before: &StatusReport, after: &StatusReport) -> Self {
        ProblemSet::of(after).changes_from(&ProblemSet::of(before))
    }

    /// True when no problem appeared or cleared.
    pub fn is_empty(&self) -> bool {
        self.appeared.is_empty() && self.cleared.is_empty()
    }
}

/// The problems of one published report, kept until the next publication to compare with.
#[derive(Debug, Clone, Default)]
pub struct ProblemSet {
    problems: Vec<ObjectProblem>,
    keys: BTreeSet<String>,
}

impl ProblemSet {
    /// Every problem of `report`, in report order.
    pub fn of(report: &StatusReport) -> Self {
        let problems: Vec<ObjectProblem> = report
            .problems_by_object()
            .into_iter()
            .flat_map(|(e, problems)| {
                problems.into_iter().map(move |problem| ObjectProblem {
                    kind: e.kind,
                    namespace: e.namespace.as_deref().map(str::to_owned),
                    name: e.name.to_string(),
                    problem,
                })
            })
            .collect();
        let keys = problems.iter().map(key).collect();
        Self { problems, keys }
    }

    /// Number of problems.
    pub fn len(&self) -> usize {
        self.problems.len()
    }

    /// True without problems.
    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }

    /// What changed from `before` to this set.
    pub fn changes_from(&self, before: &ProblemSet) -> ProblemChanges {
        ProblemChanges {
            appeared: self
                .problems
                .iter()
                .filter(|p| !before.keys.contains(&key(p)))
                .cloned()
                .collect(),
            cleared: before
                .problems
                .iter()
                .filter(|p| !self.keys.contains(&key(p)))
                .cloned()
                .collect(),
        }
    }
}

/// Identity of a problem across publications: where it is and what it says (the time of its
/// condition is not part of it).
fn key(p: &ObjectProblem) -> String {
    let q = &p.problem;
    format!(
        "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}",
        q.object, q.condition, q.status, q.reason, q.message
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kinds::routes::RouteKindId;
    use crate::status::ObjectStatus;

    fn route(resolved: &str, time: &str) -> StatusReport {
        let status = json!({"parents": [{"parentRef": {"name": "gw"}, "controllerName": "x/y",
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": time},
                {"type": "ResolvedRefs", "status": resolved, "reason": "BackendNotFound", "message": "no Service", "lastTransitionTime": time}]}]});
        StatusReport {
            entries: vec![ObjectStatus::new(
                ObjectKind::Route(RouteKindId::HttpRoute),
                Some("ns"),
                "r",
                Some(1),
                status.into(),
            )],
        }
    }

    #[test]
    fn problems_appear_and_clear_once() {
        let fine = route("True", "2026-01-01T00:00:00Z");
        let broken = route("False", "2026-01-02T00:00:00Z");
        let changes = ProblemChanges::between(&fine, &broken);
        assert_eq!(changes.appeared.len(), 1);
        assert!(changes.cleared.is_empty());
        let p = &changes.appeared[0];
        assert_eq!(
            (p.kind, p.namespace.as_deref(), p.name.as_str()),
            (ObjectKind::Route(RouteKindId::HttpRoute), Some("ns"), "r")
        );
        assert_eq!(p.problem.condition, "ResolvedRefs");
        // Republished unchanged (a new time only): nothing to say.
        let again = route("False", "2026-01-03T00:00:00Z");
        assert!(ProblemChanges::between(&broken, &again).is_empty());
        let fixed = ProblemChanges::between(&again, &fine);
        assert!(fixed.appeared.is_empty());
        assert_eq!(fixed.cleared.len(), 1);
        // The object went away: its problem cleared.
        let gone = ProblemChanges::between(&broken, &StatusReport::default());
        assert_eq!(gone.cleared.len(), 1);
    }
}
