//! ingress-nginx's regex quirks through the pure translator: `use-regex` on one Ingress makes
//! every path of its host a case-insensitive regex prefix (other Ingresses' included, other
//! hosts not), longer paths first; `rewrite-target` turns regex on and rewrites the whole path
//! with the captures; each quirk's switch.

use super::*;
use crate::translate::ingress::regex::Quirks;

fn with_annotations(name: &str, notes: &str, spec: &str) -> String {
    format!(
        "metadata: {{name: {name}, namespace: ns, generation: 1, annotations: {{{notes}}}}}\nspec:\n  ingressClassName: edge\n{spec}"
    )
}

fn path(path: &str, kind: &str, port: u16) -> String {
    format!("      - {{path: '{path}', pathType: {kind}, backend: {{service: {{name: svc, port: {{number: {port}}}}}}}}}\n")
}

fn host(host: &str, paths: &[String]) -> String {
    format!(
        "  - host: {host}\n    http:\n      paths:\n{}",
        paths.concat()
    )
}

fn fixture() -> Vec<String> {
    let regex = with_annotations(
        "regex",
        "nginx.ingress.kubernetes.io/use-regex: 'true'",
        &format!(
            "  rules:\n{}",
            host(
                "a.test",
                &[path("/api", "Prefix", 1), path("/api/v[0-9]+", "Prefix", 2)]
            )
        ),
    );
    let plain = with_annotations(
        "plain",
        "",
        &format!(
            "  rules:\n{}{}",
            host(
                "a.test",
                &[path("/static", "Prefix", 3), path("/exact", "Exact", 7)]
            ),
            host("b.test", &[path("/static", "Prefix", 3)])
        ),
    );
    vec![regex, plain]
}

#[test]
fn use_regex_makes_every_path_of_the_host_a_case_insensitive_prefix_regex() {
    let t = run(
        &with(&[OURS], &fixture(), |_| {}),
        IngressOptions::default(),
    );
    let r = |host: &str, path: &str| routed(&t, 80, host, path);
    // Longer paths first (ingress-nginx sorts them so), whatever the order in the Ingress.
    assert_eq!(r("a.test", "/api/v1").as_deref(), Some("regex#1 ns/svc:2"));
    assert_eq!(
        r("a.test", "/API/V12/x").as_deref(),
        Some("regex#1 ns/svc:2")
    );
    assert_eq!(r("a.test", "/api/x").as_deref(), Some("regex#0 ns/svc:1"));
    assert_eq!(r("a.test", "/apix").as_deref(), Some("regex#0 ns/svc:1"));
    assert_eq!(r("a.test", "/x/api"), None);
    // The other Ingress's paths on the host are regex too: prefix (not by segment), and
    // Exact is a prefix as well, as nginx's `~* "^/exact"`.
    assert_eq!(
        r("a.test", "/staticfoo").as_deref(),
        Some("plain#0 ns/svc:3")
    );
    assert_eq!(
        r("a.test", "/Exact/more").as_deref(),
        Some("plain#1 ns/svc:7")
    );
    // Another host keeps plain paths.
    assert_eq!(
        r("b.test", "/static/x").as_deref(),
        Some("plain#2 ns/svc:3")
    );
    assert_eq!(r("b.test", "/staticfoo"), None);
    assert!(!status(&t, "regex").to_string().contains("Unsupported"));
    assert!(!status(&t, "plain").to_string().contains("Unsupported"));
}

#[test]
fn each_regex_quirk_has_its_switch() {
    let s = with(&[OURS], &fixture(), |_| {});
    let off = |quirks: Quirks| {
        run(
            &s,
            IngressOptions {
                quirks,
                ..IngressOptions::default()
            },
        )
    };
    let on = Quirks::default();
    let t = off(Quirks {
        host_wide_regex: false,
        ..on
    });
    assert_eq!(routed(&t, 80, "a.test", "/staticfoo"), None);
    assert_eq!(
        routed(&t, 80, "a.test", "/exact").as_deref(),
        Some("plain#1 ns/svc:7")
    );
    assert_eq!(routed(&t, 80, "a.test", "/exact/more"), None);
    let t = off(Quirks {
        regex_case_insensitive: false,
        ..on
    });
    assert_eq!(
        routed(&t, 80, "a.test", "/API/x").as_deref(),
        None,
        "case counts"
    );
    let t = off(Quirks {
        regex_prefix: false,
        ..on
    });
    assert_eq!(
        routed(&t, 80, "a.test", "/api/v1").as_deref(),
        Some("regex#1 ns/svc:2")
    );
    assert_eq!(routed(&t, 80, "a.test", "/api/v1/x"), None);
}

#[test]
fn rewrite_target_rewrites_the_whole_path_with_the_captures() {
    let rewrite = |name: &str, target: &str, p: &str| {
        with_annotations(
            name,
            &format!("nginx.ingress.kubernetes.io/rewrite-target: '{target}'"),
            &format!(
                "  rules:\n{}",
                host(&format!("{name}.test"), &[path(p, "Prefix", 1)])
            ),
        )
    };
    let all = [
        rewrite("cap", "/v2/$2", "/svc(/|$)(.*)"),
        rewrite("whole", "/", "/old"),
        rewrite("same", "/same", "/same"),
    ];
    let new_path = |t: &Translation, host: &str, path: &str| {
        let rule = rule_of(t, host, path);
        let rewrite = rule.filters.rewrite.as_ref().expect("rewrite");
        let target = http::uri::PathAndQuery::from_maybe_shared(format!("{path}?q=1")).unwrap();
        let (out, _) = rewrite
            .apply(&rule.matcher.path, target, None)
            .expect("rewritten");
        out.to_string()
    };
    let t = run(&with(&[OURS], &all, |_| {}), IngressOptions::default());
    assert_eq!(new_path(&t, "cap.test", "/SVC/items/1"), "/v2/items/1?q=1");
    assert_eq!(new_path(&t, "cap.test", "/svc"), "/v2/?q=1");
    // Without captures the whole path is replaced too (nginx's `rewrite`), query kept.
    assert_eq!(new_path(&t, "whole.test", "/old/a/b"), "/?q=1");
    // A target equal to the path rewrites nothing, as ingress-nginx.
    assert!(rule_of(&t, "same.test", "/same/x")
        .filters
        .rewrite
        .is_none());
    for name in ["cap", "whole", "same"] {
        assert!(
            !status(&t, name).to_string().contains("Unsupported"),
            "{name}"
        );
    }
    // Switched off: the plain rewrite replaces the matched prefix, captures are reported.
    let t = run(
        &with(&[OURS], &all, |_| {}),
        IngressOptions {
            quirks: Quirks {
                rewrite_enables_regex: false,
                ..Quirks::default()
            },
            ..IngressOptions::default()
        },
    );
    assert_eq!(new_path(&t, "whole.test", "/old/a/b"), "/a/b?q=1");
    assert!(status(&t, "cap")
        .to_string()
        .contains("captures need regex paths"));
}

/// Another Ingress turning `use-regex`, `canary` or `server-alias` on or off changes how an
/// unchanged Ingress is served: the incremental translation sees it as a fresh one does.
#[test]
fn incremental_translations_follow_the_other_ingresses_of_the_host() {
    let plain = with_annotations(
        "plain",
        "",
        &format!(
            "  rules:\n{}",
            host("a.test", &[path("/static", "Prefix", 3)])
        ),
    );
    let other = |notes: &str| {
        with_annotations(
            "other",
            notes,
            &format!(
                "  rules:\n{}",
                host("a.test", &[path("/static", "Prefix", 1)])
            ),
        )
    };
    let steps = [
        vec![plain.clone(), other("")],
        vec![plain.clone(), other("nginx.ingress.kubernetes.io/use-regex: 'true'")],
        vec![plain.clone(), other("nginx.ingress.kubernetes.io/canary: 'true', nginx.ingress.kubernetes.io/canary-weight: '100'")],
        vec![plain.clone(), other("nginx.ingress.kubernetes.io/server-alias: b.test")],
        vec![plain],
    ];
    let opts = options(PortMap::default());
    let mut memory = crate::translate::Incremental::default();
    let mut tables = Vec::new();
    for (i, ingresses) in steps.iter().enumerate() {
        let s = with(&[OURS], ingresses, |_| {});
        let cached = memory.translate(&s, &opts, &Default::default());
        let fresh = translate(&s, &opts);
        let table = serde_json::to_value(&cached.table).expect("table");
        assert_eq!(
            table,
            serde_json::to_value(&fresh.table).expect("table"),
            "step {i}"
        );
        tables.push(table);
    }
    // Each step changed what is served.
    for i in 1..tables.len() {
        assert_ne!(tables[i - 1], tables[i], "step {i}");
    }
}
