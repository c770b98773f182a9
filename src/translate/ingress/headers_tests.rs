//! Header snippets parsed strictly, and `custom-headers` and the snippets through the pure
//! translator as the served rule's header modifiers; `enable-access-log` as its flag.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{HeaderMap, Method};

use super::*;
use crate::table::{RequestView, RouteRule};
use crate::translate::ingress::policy_tests::{status_text, with};
use crate::translate::testing::options;
use crate::translate::{translate, PortMap, Translation};

#[test]
fn header_directives_become_header_modifiers() {
    let edits = snippet(
        "# headers\nmore_set_headers \"X-A: 1\" 'X-B: two words';\n\
         more_set_input_headers \"X-In: y\" \"X-Gone:\";\n\
         proxy_set_header X-Up \"v\"; proxy_set_header X-Drop \"\";\n\
         add_header X-Frame-Options DENY always;\nmore_set_headers \"x-a: 2\";",
    )
    .expect("served");
    assert_eq!(
        edits.filters(),
        vec![
            json!({"type": "RequestHeaderModifier", "requestHeaderModifier": {
                "set": [{"name": "X-In", "value": "y"}, {"name": "X-Up", "value": "v"}],
                "remove": ["X-Drop", "X-Gone"]}}),
            json!({"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                "set": [{"name": "x-a", "value": "2"}, {"name": "X-B", "value": "two words"}],
                "add": [{"name": "X-Frame-Options", "value": "DENY"}]}}),
        ]
    );
}

#[test]
fn anything_else_refuses_the_snippet_naming_the_directive() {
    for (text, named) in [
        (
            "proxy_pass http://x; more_set_headers \"X: y\";",
            "\"proxy_pass\" is refused",
        ),
        ("proxy_set_header X-Real-IP $remote_addr;", "nginx variable"),
        ("location /a { return 403; }", "block"),
        ("more_set_headers -s 404 \"X: y\";", "option -s"),
        ("add_header X y", "does not end with ';'"),
        ("add_header X y sometimes;", "not always"),
        ("more_set_headers \"X: y;", "quote is not closed"),
        ("proxy_set_header X;", "needs a name and a value"),
    ] {
        let why = snippet(text).expect_err(text);
        assert!(why.contains(named), "{text}: {why}");
    }
}

fn ingress(annotations: &[(&str, &str)]) -> String {
    let notes: Vec<String> = annotations
        .iter()
        .map(|(k, v)| format!("nginx.ingress.kubernetes.io/{k}: {v:?}"))
        .collect();
    format!(
        "metadata: {{name: a, namespace: ns, generation: 1, annotations: {{{}}}}}\nspec:\n  \
         ingressClassName: edge\n  rules: [{{http: {{paths: [{{path: /, pathType: Prefix, \
         backend: {{service: {{name: svc, port: {{number: 8080}}}}}}}}]}}}}]",
        notes.join(", ")
    )
}

fn rule(t: &Translation) -> Arc<RouteRule> {
    let addr: SocketAddr = ([127, 0, 0, 9], 80).into();
    let headers = HeaderMap::new();
    let view = RequestView {
        host: "a.test",
        path: "/",
        query: None,
        method: &Method::GET,
        headers: &headers,
    };
    let listener = t.table.listeners.get(&addr).expect("listener");
    listener.route(&view).expect("rule").clone()
}

fn run(annotations: &[(&str, &str)], config_map: Option<&str>) -> Translation {
    let mut s = with(&ingress(annotations), &[]);
    if let Some(yaml) = config_map {
        s.config_maps = vec![Arc::new(serde_yaml_ng::from_str(yaml).expect("ConfigMap"))];
    }
    translate(&s, &options(PortMap::default()))
}

const HEADERS: &str =
    "metadata: {name: hdrs, namespace: ns}\ndata: {X-Served-By: edge, X-Env: prod}";

#[test]
fn custom_headers_and_snippets_are_the_rule_s_header_modifiers() {
    let notes = [
        ("custom-headers", "ns/hdrs"),
        (
            "configuration-snippet",
            "more_set_input_headers \"X-Tenant: a\";",
        ),
        ("x-forwarded-prefix", "/app"),
    ];
    let t = run(&notes, Some(HEADERS));
    let r = rule(&t);
    let response = serde_json::to_value(r.filters.response_headers.as_deref()).expect("JSON");
    assert_eq!(
        response["set"],
        json!([["x-env", "prod"], ["x-served-by", "edge"]])
    );
    let request = serde_json::to_value(r.filters.request_headers.as_deref()).expect("JSON");
    assert_eq!(
        request["set"],
        json!([["x-forwarded-prefix", "/app"], ["x-tenant", "a"]])
    );
    assert!(
        !status_text(&t).contains("Unsupported"),
        "{}",
        status_text(&t)
    );
}

#[test]
fn add_header_without_always_adds_on_success_only() {
    let snippet =
        "add_header X-Ok yes; add_header X-All yes always; more_set_headers \"X-Set: 1\";";
    let t = run(&[("configuration-snippet", snippet)], None);
    let r = rule(&t);
    let response = serde_json::to_value(r.filters.response_headers.as_deref()).expect("JSON");
    assert_eq!(response["add"], json!([["x-all", "yes"]]), "{response}");
    assert_eq!(
        response["addOnSuccess"],
        json!([["x-ok", "yes"]]),
        "{response}"
    );
    assert_eq!(response["set"], json!([["x-set", "1"]]), "{response}");
    // The Gateway API form adds both (convert reports the difference).
    let edits = super::snippet(snippet).expect("served");
    assert_eq!(edits.added_on_success(), ["X-Ok"]);
}

#[test]
fn a_missing_config_map_or_refused_snippet_is_reported_and_the_rule_serves() {
    let notes = [
        ("custom-headers", "hdrs"),
        ("server-snippet", "if ($host = a) { return 403; }"),
    ];
    let t = run(&notes, None);
    let r = rule(&t);
    assert!(r.filters.response_headers.is_none());
    let status = status_text(&t);
    assert!(status.contains("ConfigMap ns/hdrs not found"), "{status}");
    assert!(status.contains("server-snippet"), "{status}");
    assert!(status.contains("the snippet is not applied"), "{status}");
    let t = run(&[("custom-headers", "other/hdrs")], Some(HEADERS));
    assert!(status_text(&t).contains("not a ConfigMap of the Ingress's namespace"));
}

#[test]
fn the_custom_headers_config_map_is_wanted_from_the_cluster() {
    use crate::snapshot::TranslatorRules;
    let s = with(&ingress(&[("custom-headers", "ns/hdrs")]), &[]);
    assert!(s
        .referenced_config_maps()
        .contains(&("ns".to_owned(), "hdrs".to_owned())));
}

#[test]
fn enable_access_log_false_marks_the_rule() {
    assert!(
        rule(&run(&[("enable-access-log", "false")], None))
            .filters
            .access_log_off
    );
    assert!(
        !rule(&run(&[("enable-access-log", "true")], None))
            .filters
            .access_log_off
    );
    let t = run(&[("enable-access-log", "no")], None);
    assert!(!rule(&t).filters.access_log_off);
    assert!(status_text(&t).contains("enable-access-log"));
}
