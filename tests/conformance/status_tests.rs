//! Unit tests of the status matchers: route parents compared as upstream compares them, and
//! stricter on `sectionName`.

use super::*;
use serde_json::json;

#[test]
fn conditions_and_generations_are_checked() {
    let holder = json!({"conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": 2},
    ]});
    assert_eq!(cond(&holder, "Accepted", "True", "Accepted"), Ok(()));
    assert_eq!(cond(&holder, "Accepted", "", ""), Ok(()));
    assert!(cond(&holder, "Accepted", "False", "").is_err());
    assert!(cond(&holder, "Accepted", "True", "Other").is_err());
    assert!(cond(&holder, "Programmed", "True", "").is_err());
    assert_eq!(observed(&holder, 2), Ok(()));
    assert!(observed(&holder, 1).is_err());
}

fn parent(group: Option<&str>, ns: Option<&str>, section: Option<&str>) -> Value {
    let mut r = json!({"name": "gw"});
    if let Some(g) = group {
        r["group"] = json!(g);
        r["kind"] = json!("Gateway");
    }
    if let Some(n) = ns {
        r["namespace"] = json!(n);
    }
    if let Some(s) = section {
        r["sectionName"] = json!(s);
    }
    json!({"parentRef": r, "controllerName": DEFAULT_CONTROLLER_NAME, "conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": 1}]})
}

/// A parent matches on controller, group, kind, name, namespace (as required), section
/// and conditions.
#[test]
fn parents_match_like_upstream() {
    let want = Parent::gateway("infra", "gw", &[Cond("Accepted", "True", "Accepted")]);
    let full = parent(Some(GROUP), Some("infra"), None);
    assert_eq!(want.mismatch(&full, true), None);
    assert_eq!(want.mismatch(&parent(Some(GROUP), None, None), false), None);
    assert!(want
        .mismatch(&parent(Some(GROUP), None, None), true)
        .is_some());
    assert!(want
        .mismatch(&parent(None, Some("infra"), None), false)
        .is_some());
    assert!(want
        .mismatch(&parent(Some(GROUP), Some("other"), None), false)
        .is_some());
    let mut other = full.clone();
    other["controllerName"] = json!("example.com/other");
    assert!(want.mismatch(&other, false).is_some());
    // sectionName is compared exactly, in both directions.
    let section = want.clone().section("http");
    assert!(section.mismatch(&full, false).is_some());
    assert_eq!(
        section.mismatch(&parent(Some(GROUP), None, Some("http")), false),
        None
    );
    assert!(section
        .mismatch(&parent(Some(GROUP), None, Some("https")), false)
        .is_some());
    assert!(want
        .mismatch(&parent(Some(GROUP), Some("infra"), Some("http")), false)
        .is_some());
    let refused = Parent::gateway("infra", "gw", &[Cond("Accepted", "False", "")]);
    assert!(refused.mismatch(&full, false).is_some());
}
