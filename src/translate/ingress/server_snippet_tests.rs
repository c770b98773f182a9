//! `server-snippet` at server level through the pure translator: the oldest Ingress of a host
//! that sets it gives the header edits of every path of the host, later ones are reported, and
//! without the quirk each Ingress's snippet stays on its own paths.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{HeaderMap, Method};
use serde_json::Value;

use crate::kinds::routes::RouteKindId;
use crate::status::ObjectKind;
use crate::table::RequestView;
use crate::translate::ingress::policy_tests::with;
use crate::translate::testing::options;
use crate::translate::{translate, PortMap, Translation};

/// Ingress `name` created at `second`, host `a.test` path `path` (and `b.test` `/`), with a
/// `server-snippet` when given.
fn ingress(name: &str, second: u32, path: &str, snippet: Option<&str>) -> String {
    let notes = snippet
        .map(|s| format!("annotations: {{nginx.ingress.kubernetes.io/server-snippet: {s:?}}}, "))
        .unwrap_or_default();
    format!(
        "metadata: {{name: {name}, namespace: ns, generation: 1, {notes}\
         creationTimestamp: \"2026-01-01T00:00:{second:02}Z\"}}\nspec:\n  ingressClassName: edge\n  \
         rules:\n  - host: a.test\n    http: {{paths: [{{path: {path}, pathType: Prefix, \
         backend: {{service: {{name: svc, port: {{number: 8080}}}}}}}}]}}\n  \
         - host: {name}.test\n    http: {{paths: [{{path: /, pathType: Prefix, \
         backend: {{service: {{name: svc, port: {{number: 8080}}}}}}}}]}}"
    )
}

fn run(ingresses: &[String], from_oldest: bool) -> Translation {
    let mut s = with(&ingresses[0], &[]);
    for extra in &ingresses[1..] {
        s.ingresses
            .push(Arc::new(serde_yaml_ng::from_str(extra).expect("Ingress")));
    }
    let mut o = options(PortMap::default());
    o.ingress.quirks.server_annotations_from_oldest = from_oldest;
    translate(&s, &o)
}

/// The response headers the rule for `host` and `path` sets.
fn set_on(t: &Translation, host: &str, path: &str) -> Value {
    let addr: SocketAddr = ([127, 0, 0, 9], 80).into();
    let headers = HeaderMap::new();
    let view = RequestView {
        host,
        path,
        query: None,
        method: &Method::GET,
        headers: &headers,
    };
    let listener = t.table.listeners.get(&addr).expect("listener");
    let rule = listener.route(&view).expect("rule");
    serde_json::to_value(rule.filters.response_headers.as_deref()).expect("JSON")["set"].clone()
}

#[test]
fn the_oldest_snippet_of_a_host_applies_to_every_path_of_the_host() {
    let t = run(
        &[
            ingress(
                "old",
                1,
                "/old",
                Some("more_set_headers \"X-Server: old\";"),
            ),
            ingress(
                "new",
                2,
                "/new",
                Some("more_set_headers \"X-Server: new\";"),
            ),
            ingress("plain", 3, "/plain", None),
        ],
        true,
    );
    for path in ["/old", "/new", "/plain"] {
        assert_eq!(
            set_on(&t, "a.test", path),
            serde_json::json!([["x-server", "old"]]),
            "{path}"
        );
    }
    // Each Ingress's other host is its own server.
    assert_eq!(
        set_on(&t, "new.test", "/"),
        serde_json::json!([["x-server", "new"]])
    );
    assert_eq!(set_on(&t, "plain.test", "/"), Value::Null);
    let status = t
        .status
        .get(ObjectKind::Route(RouteKindId::Ingress), Some("ns"), "new")
        .map(|e| e.status.to_json().to_string())
        .unwrap_or_default();
    assert!(
        status.contains("server-snippet is not applied to host a.test: Ingress ns/old, older"),
        "{status}"
    );
}

#[test]
fn without_the_quirk_each_snippet_stays_on_its_own_paths() {
    let t = run(
        &[
            ingress(
                "old",
                1,
                "/old",
                Some("more_set_headers \"X-Server: old\";"),
            ),
            ingress("plain", 3, "/plain", None),
        ],
        false,
    );
    assert_eq!(
        set_on(&t, "a.test", "/old"),
        serde_json::json!([["x-server", "old"]])
    );
    assert_eq!(set_on(&t, "a.test", "/plain"), Value::Null);
}
