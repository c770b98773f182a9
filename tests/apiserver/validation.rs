//! Server-side field validation of Gateway API objects, as the API server does it with the
//! CRDs installed: `fieldValidation=Strict` (kubectl's default) refuses an unknown field with
//! the API server's words and stores nothing; the default `Warn` drops it and says so in a
//! `Warning` header.

use http_body_util::BodyExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{json, Value};

use crate::support::apiserver::ApiServer;

const ROUTES: &str = "/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes";

/// A route whose rule misspells `backendRefs`.
fn misspelt(name: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "rules": [{"backendRef": [{"name": "svc", "port": 80}]}],
        },
    })
}

/// One raw request: (status, `Warning` headers, body as JSON).
async fn send(
    server: &ApiServer,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Vec<String>, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .expect("request");
    let response = server.client().send(request).await.expect("response");
    let code = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        code,
        warnings,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn strict_field_validation_refuses_unknown_fields_and_warn_drops_them() {
    let server = ApiServer::start().await;
    let json = "application/json";

    let uri = format!("{ROUTES}?fieldValidation=Strict");
    let (code, _, status) = send(&server, "POST", &uri, json, &misspelt("strict")).await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        "HTTPRoute in version \"v1\" cannot be handled as a HTTPRoute: strict decoding error: \
         unknown field \"spec.rules[0].backendRef\""
    );
    let (code, _, _) = send(
        &server,
        "GET",
        &format!("{ROUTES}/strict"),
        json,
        &Value::Null,
    )
    .await;
    assert_eq!(code, 404, "a refused object is not stored");

    // Without the parameter (Warn), the field is dropped and named in a Warning header.
    let (code, warnings, created) = send(&server, "POST", ROUTES, json, &misspelt("warn")).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        warnings,
        ["299 - \"unknown field \\\"spec.rules[0].backendRef\\\"\""]
    );
    assert_eq!(created["spec"]["rules"], json!([{}]), "{created}");

    // An update and a merge patch are held to the same rule.
    let mut update = misspelt("warn");
    update["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"].clone();
    let (code, _, status) = send(
        &server,
        "PUT",
        &format!("{ROUTES}/warn?fieldValidation=Strict"),
        json,
        &update,
    )
    .await;
    assert_eq!(code, 400, "{status}");
    let merge = json!({"spec": {"hostname": ["a.example"]}});
    let uri = format!("{ROUTES}/warn?fieldValidation=Strict");
    let (code, _, status) = send(
        &server,
        "PATCH",
        &uri,
        "application/merge-patch+json",
        &merge,
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .ends_with("unknown field \"spec.hostname\""),
        "{status}"
    );
    let (code, _, _) = send(
        &server,
        "PATCH",
        &format!("{ROUTES}/warn?fieldValidation=Ignore"),
        "application/merge-patch+json",
        &merge,
    )
    .await;
    assert_eq!(code, 200);
    let uri = format!("{ROUTES}/warn?fieldValidation=Sloppy");
    let (code, _, _) = send(
        &server,
        "PATCH",
        &uri,
        "application/merge-patch+json",
        &merge,
    )
    .await;
    assert_eq!(code, 400, "an unknown directive is refused");

    // Server-side apply through the kube client, as `kubectl apply --server-side` sends it.
    let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute");
    let api: Api<DynamicObject> =
        Api::namespaced_with(server.client(), "default", &ApiResource::from_gvk(&gvk));
    let mut applied = misspelt("applied");
    applied["spec"]["parentRef"] = applied["spec"]["parentRefs"].take();
    applied["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("parentRefs");
    let params = PatchParams::apply("test").validation_strict();
    let err = api
        .patch("applied", &params, &Patch::Apply(&applied))
        .await
        .expect_err("strict apply refuses unknown fields");
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err:?}");
    };
    assert_eq!(status.code, 400);
    assert_eq!(
        status.message,
        "failed to create typed patch object (default/applied; gateway.networking.k8s.io/v1, \
         Kind=HTTPRoute): .spec.parentRef: field not declared in schema, \
         .spec.rules[0].backendRef: field not declared in schema"
    );
    // A valid route is admitted under Strict.
    let mut valid = misspelt("valid");
    valid["spec"]["rules"] = json!([{"backendRefs": [{"name": "svc", "port": 80}]}]);
    api.patch("valid", &params, &Patch::Apply(&valid))
        .await
        .expect("a valid route is applied");
}
