//! Status reports: sorting, sealing (revisions and transition times carried), and the
//! conditions each object kind gets.

use super::*;
use crate::kinds::routes::RouteKindId;
use serde_json::{json, Value};

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";

fn entry(status: Value) -> StatusReport {
    StatusReport {
        entries: vec![ObjectStatus::new(
            ObjectKind::Gateway,
            Some("ns"),
            "gw",
            Some(1),
            status.into(),
        )],
    }
}

fn gateway(programmed: &str, time: &str) -> StatusReport {
    entry(json!({"conditions": [
            {"type": "Accepted", "status": "True", "lastTransitionTime": time},
            {"type": "Programmed", "status": programmed, "lastTransitionTime": time}],
            "listeners": [{"name": "http", "attachedRoutes": 0, "supportedKinds": [],
                "conditions": [{"type": "Accepted", "status": "True", "lastTransitionTime": time}]}]}))
}

#[test]
fn transition_time_moves_only_on_status_change() {
    let prev = SealedReport::from(gateway("True", T0));
    let next = gateway("False", T1).seal(&prev);
    let s = next.entries[0].status.to_json();
    assert_eq!(s["conditions"][0]["lastTransitionTime"], T0);
    assert_eq!(s["conditions"][1]["lastTransitionTime"], T1);
    assert_eq!(s["listeners"][0]["conditions"][0]["lastTransitionTime"], T0);
}

#[test]
fn revisions_change_with_the_status_only() {
    let first = SealedReport::from(gateway("True", T0));
    let same = gateway("True", T1).seal(&first);
    let changed = gateway("False", T1).seal(&same);
    let revision = |r: &SealedReport| r.entries_with_revisions().next().unwrap().1;
    assert_eq!(revision(&first), revision(&same), "only times differed");
    assert_ne!(revision(&same), revision(&changed));
    let forked = gateway("False", T1).seal(&same);
    assert_ne!(
        revision(&changed),
        revision(&forked),
        "unique in the process"
    );
}

/// Sealing finds each object's previous entry alike whether the reports are sorted (walked
/// side by side) or not (looked up through an index): the same times carried, and a
/// revision kept exactly for the entries whose status stayed.
#[test]
fn sorted_and_unsorted_reports_seal_alike() {
    let report = |names: &[(&str, &str, &str)]| StatusReport {
        entries: names
            .iter()
            .map(|&(ns, name, programmed)| {
                let mut e = gateway(programmed, if programmed == "True" { T0 } else { T1 });
                let mut e = e.entries.remove(0);
                e.namespace = Some(ns.into());
                e.name = name.into();
                e
            })
            .collect(),
    };
    let before = [
        ("a", "g1", "True"),
        ("a", "g2", "True"),
        ("b", "g1", "True"),
        ("c", "g0", "False"),
    ];
    let after = [
        ("a", "g0", "True"),
        ("a", "g2", "False"),
        ("b", "g1", "True"),
        ("c", "g0", "True"),
    ];
    let seal = |before: StatusReport, after: StatusReport| {
        let first = SealedReport::from(before);
        let next = after.seal(&first);
        let kept: Vec<Revision> = first.entries_with_revisions().map(|(_, r)| r).collect();
        let mut out: Vec<(String, Value, bool)> = next
            .entries_with_revisions()
            .map(|(e, r)| {
                (
                    e.label(),
                    e.status.to_json().into_owned(),
                    kept.contains(&r),
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    };
    let walked = seal(report(&before), report(&after));
    let (mut shuffled_before, mut shuffled_after) = (before, after);
    shuffled_before.reverse();
    shuffled_after.swap(0, 3);
    assert_eq!(walked, seal(report(&shuffled_before), report(&after)));
    assert_eq!(walked, seal(report(&before), report(&shuffled_after)));
    let kept: Vec<bool> = walked.iter().map(|e| e.2).collect();
    assert_eq!(kept, [false, false, true, false], "{walked:#?}");
    // c/g0: Accepted stayed True (its time carried), Programmed became True now.
    assert_eq!(walked[3].1["conditions"][0]["lastTransitionTime"], T1);
    assert_eq!(walked[3].1["conditions"][1]["lastTransitionTime"], T0);
}

/// Entries holding the very names of their predecessors (as the routes the translator carries
/// over do) are matched by pointer; over a chain of reports, strictly sorted, with an object
/// listed twice or unsorted, sealing gives what it gives for copies with names of their own:
/// the same statuses, times and kept revisions.
#[test]
fn shared_names_seal_as_copies_do() {
    let mut rng = fastrand::Rng::with_seed(5);
    let status = |programmed: bool| {
        let mut g = gateway(["False", "True"][usize::from(programmed)], T0);
        g.entries.remove(0).status
    };
    let copy = |e: &ObjectStatus| ObjectStatus {
        namespace: e.namespace.as_deref().map(Arc::from),
        name: Arc::from(&*e.name),
        ..e.clone()
    };
    let seen = |r: &SealedReport, before: &SealedReport| -> Vec<(String, Value, bool)> {
        let kept: Vec<Revision> = before.entries_with_revisions().map(|(_, r)| r).collect();
        r.entries_with_revisions()
            .map(|(e, r)| {
                let json = e.status.to_json().into_owned();
                (e.label(), json, kept.contains(&r))
            })
            .collect()
    };
    let (mut shared, mut copied) = (SealedReport::default(), SealedReport::default());
    for step in 0..300 {
        let mut next: Vec<ObjectStatus> = Vec::new();
        for e in shared.entries.iter() {
            match rng.u8(..10) {
                0 => {}
                1 | 2 => next.push(ObjectStatus {
                    status: status(rng.bool()),
                    ..e.clone()
                }),
                _ => next.push(e.clone()),
            }
        }
        for _ in 0..rng.usize(..4) {
            let (ns, name) = (["a", "b"][rng.usize(..2)], format!("g{}", rng.u8(..40)));
            let entry = ObjectStatus::new(
                ObjectKind::Gateway,
                Some(ns),
                &name,
                Some(1),
                status(rng.bool()),
            );
            next.push(entry);
        }
        next.sort_by(|a, b| id(a).cmp(&id(b)));
        match rng.u8(..8) {
            0 => rng.shuffle(&mut next),
            1 => {}
            _ => next.dedup_by(|a, b| id(a) == id(b)),
        }
        let a = StatusReport {
            entries: next.clone(),
        }
        .seal(&shared);
        let b = StatusReport {
            entries: next.iter().map(copy).collect(),
        }
        .seal(&copied);
        assert_eq!(seen(&a, &shared), seen(&b, &copied), "step {step}");
        (shared, copied) = (a, b);
    }
}

/// Sorting around a sorted range gives what a full sort gives, whatever surrounds it.
#[test]
fn sorting_around_a_sorted_range_equals_a_full_sort() {
    let mut rng = fastrand::Rng::with_seed(5);
    let entry = |rng: &mut fastrand::Rng, kind: ObjectKind| {
        let name = format!("n{}", rng.u8(..6));
        let mut e = ObjectStatus::new(kind, Some("ns"), &name, Some(1), json!({}).into());
        e.generation = Some(rng.i64(..1000));
        e
    };
    let route = ObjectKind::Route(RouteKindId::HttpRoute);
    let kinds = [
        ObjectKind::GatewayClass,
        ObjectKind::Gateway,
        route,
        ObjectKind::TrafficPolicy,
    ];
    for _ in 0..200 {
        let mut block: Vec<ObjectStatus> = (0..rng.usize(..8))
            .map(|_| entry(&mut rng, route))
            .collect();
        block.sort_by(|a, b| id(a).cmp(&id(b)));
        let mut entries = Vec::new();
        for _ in 0..rng.usize(..4) {
            let kind = kinds[rng.usize(..4)];
            entries.push(entry(&mut rng, kind));
        }
        let range = entries.len()..entries.len() + block.len();
        entries.extend(block);
        for _ in 0..rng.usize(..4) {
            let kind = kinds[rng.usize(..4)];
            entries.push(entry(&mut rng, kind));
        }
        let mut full = StatusReport { entries };
        let mut around = full.clone();
        full.sort();
        around.sort_around(range);
        assert_eq!(around, full);
    }
}

#[test]
fn problems_name_the_listener() {
    let r = entry(
        json!({"conditions": [{"type": "Accepted", "status": "True", "lastTransitionTime": T0}],
            "listeners": [{"name": "https", "attachedRoutes": 0, "supportedKinds": [], "conditions": [
                {"type": "Accepted", "status": "False", "reason": "UnsupportedProtocol", "message": "m", "lastTransitionTime": T0},
                {"type": "Conflicted", "status": "False", "reason": "NoConflicts", "lastTransitionTime": T0}]}]}),
    );
    let p = r.problems();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].object, "Gateway ns/gw listener https");
    assert_eq!(p[0].reason, "UnsupportedProtocol");
}

/// Routes sharing one status `Arc` are reported as walking each would report them: a shared
/// status without problems hides no other entry's problem, and one with a problem is reported
/// for every route holding it, each under its own name.
#[test]
fn shared_route_statuses_report_their_problems_per_route() {
    let status = |accepted: &str| {
        let v = json!({"parents": [{"controllerName": "c/d", "parentRef": {"name": "gw"},
            "conditions": [{"type": "Accepted", "status": accepted, "reason": "NotAllowedByListeners",
                "message": "", "lastTransitionTime": T0}]}]});
        StatusBody::Route(Arc::new(serde_json::from_value(v).unwrap()))
    };
    let (fine, broken) = (status("True"), status("False"));
    let kind = ObjectKind::Route(RouteKindId::HttpRoute);
    let holders = [&fine, &fine, &broken, &fine, &broken, &broken, &fine];
    let report = StatusReport {
        entries: holders
            .iter()
            .enumerate()
            .map(|(i, s)| {
                ObjectStatus::new(kind, Some("ns"), &format!("r{i}"), Some(1), (*s).clone())
            })
            .collect(),
    };
    let named: Vec<String> = report
        .problems_by_object()
        .iter()
        .flat_map(|(_, problems)| problems.iter().map(|p| p.object.clone()))
        .collect();
    let walked: Vec<String> = report.problems().into_iter().map(|p| p.object).collect();
    assert_eq!(named, walked);
    assert_eq!(
        named,
        [
            "HTTPRoute ns/r2 parent gw",
            "HTTPRoute ns/r4 parent gw",
            "HTTPRoute ns/r5 parent gw"
        ]
    );
}

#[test]
fn entries_serialize_with_their_api_version_and_read_back() {
    let r = gateway("True", T0);
    let text = serde_json::to_string(&r).unwrap();
    assert!(
            text.starts_with(r#"[{"apiVersion":"gateway.networking.k8s.io/v1","kind":"Gateway","namespace":"ns","name":"gw","generation":1,"status":"#),
            "{text}"
        );
    let back: StatusReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
    assert!(back.get(ObjectKind::Gateway, Some("ns"), "gw").is_some());
    assert!(back
        .get(ObjectKind::Route(RouteKindId::HttpRoute), Some("ns"), "gw")
        .is_none());
}
