//! Object verbs through the kube client: create, get, list with selectors, update conflicts,
//! patches of every type, server-side apply, the status subresource, generation, finalizers
//! and Leases.

use gateway_api::apis::experimental::httproutes::HttpRoute;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use crate::support::apiserver::ApiServer;

fn status_code(err: &kube::Error) -> u16 {
    match err {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn config_map(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"},
    }))
    .expect("config map")
}

fn route(name: &str, hostname: &str) -> HttpRoute {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [hostname]},
    }))
    .expect("route")
}

#[tokio::test]
async fn create_get_list_and_conflicts() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams::default();

    let created = api
        .create(&pp, &config_map("a", json!({"app": "x"})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert!(meta.uid.as_deref().is_some_and(|u| !u.is_empty()));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.generation, Some(1));
    let rv1: u64 = created.resource_version().unwrap().parse().unwrap();

    let again = api
        .create(&pp, &config_map("a", json!({})))
        .await
        .unwrap_err();
    assert_eq!(status_code(&again), 409);
    assert!(matches!(&again, kube::Error::Api(s) if s.reason == "AlreadyExists"));

    let mut generated = config_map("", json!({"app": "y"}));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let generated = api.create(&pp, &generated).await.unwrap();
    assert!(generated.name_any().starts_with("gen-") && generated.name_any().len() == 9);
    let rv2: u64 = generated.resource_version().unwrap().parse().unwrap();
    assert!(rv2 > rv1, "resourceVersion grows: {rv1} then {rv2}");

    let got = api.get("a").await.unwrap();
    assert_eq!(got.data.as_ref().unwrap()["k"], "v");
    assert_eq!(status_code(&api.get("missing").await.unwrap_err()), 404);

    let all = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(all.items.len(), 2);
    assert!(all
        .metadata
        .resource_version
        .is_some_and(|rv| rv.parse::<u64>().unwrap() >= rv2));
    let in_other_ns: Api<ConfigMap> = Api::namespaced(server.client(), "other");
    assert!(in_other_ns
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
    let everywhere: Api<ConfigMap> = Api::all(server.client());
    assert_eq!(
        everywhere
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );

    // Replace with the current resourceVersion succeeds; with the old one it conflicts.
    let mut fresh = got.clone();
    fresh.data = Some([("k".to_string(), "w".to_string())].into());
    let replaced = api.replace("a", &pp, &fresh).await.unwrap();
    assert_ne!(replaced.resource_version(), got.resource_version());
    let stale = api.replace("a", &pp, &fresh).await.unwrap_err();
    assert_eq!(status_code(&stale), 409);
    assert!(matches!(&stale, kube::Error::Api(s) if s.reason == "Conflict"));
}

#[tokio::test]
async fn label_and_field_selectors() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams::default();
    api.create(&pp, &config_map("a", json!({"app": "a", "tier": "web"})))
        .await
        .unwrap();
    api.create(&pp, &config_map("b", json!({"app": "b"})))
        .await
        .unwrap();
    api.create(&pp, &config_map("c", json!({}))).await.unwrap();

    let names = |selector: &str, field: &str| {
        let mut lp = ListParams::default();
        if !selector.is_empty() {
            lp = lp.labels(selector);
        }
        if !field.is_empty() {
            lp = lp.fields(field);
        }
        let api = api.clone();
        async move {
            let list = api.list(&lp).await.unwrap();
            list.items
                .iter()
                .map(|o| o.name_any())
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    assert_eq!(names("app=a", "").await, "a");
    assert_eq!(names("app==b", "").await, "b");
    assert_eq!(names("app!=a", "").await, "b,c");
    assert_eq!(names("app in (a, b)", "").await, "a,b");
    assert_eq!(names("app notin (a)", "").await, "b,c");
    assert_eq!(names("app", "").await, "a,b");
    assert_eq!(names("!app", "").await, "c");
    assert_eq!(names("app=a,tier=web", "").await, "a");
    assert_eq!(names("", "metadata.name=b").await, "b");
    assert_eq!(names("", "metadata.name!=b").await, "a,c");
    assert_eq!(names("app", "metadata.name=c").await, "");
}

#[tokio::test]
async fn patches_apply_status_and_generation() {
    let server = ApiServer::start().await;
    let api: Api<HttpRoute> = Api::default_namespaced(server.client());
    let created = api
        .create(&PostParams::default(), &route("r", "a.example"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    // Status writes change only the status and never the generation.
    let status = json!({"status": {"parents": [{
        "parentRef": {"name": "gw"}, "controllerName": "example.dev/c",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
            "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 1}]
    }]}, "spec": {"hostnames": ["ignored.example"]}});
    let patched = api
        .patch_status("r", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(1));
    assert_eq!(
        patched.spec.hostnames.as_deref(),
        Some(&["a.example".to_string()][..])
    );
    assert_eq!(patched.status.as_ref().unwrap().parents.len(), 1);

    // A spec change bumps the generation and keeps the status; status in the body is ignored.
    let spec = json!({"spec": {"hostnames": ["b.example"]}, "status": {"parents": []}});
    let patched = api
        .patch("r", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(2));
    assert_eq!(patched.status.as_ref().unwrap().parents.len(), 1);

    // A label change bumps nothing but the resourceVersion; an identical patch writes nothing.
    let labels = json!({"metadata": {"labels": {"x": "1"}}});
    let labelled = api
        .patch("r", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(2));
    let rv_before = server.resource_version();
    let same = api
        .patch("r", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    assert_eq!(same.resource_version(), labelled.resource_version());
    assert_eq!(server.resource_version(), rv_before);

    // Strategic merge and JSON patch.
    let strategic = json!({"spec": {"hostnames": ["c.example"]}});
    let p = api
        .patch("r", &PatchParams::default(), &Patch::Strategic(&strategic))
        .await
        .unwrap();
    assert_eq!(p.spec.hostnames.unwrap(), vec!["c.example".to_string()]);
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/hostnames/0", "value": "d.example"}
    ]))
    .unwrap();
    let p = api
        .patch("r", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .unwrap();
    assert_eq!(p.spec.hostnames.unwrap(), vec!["d.example".to_string()]);
    assert_eq!(p.metadata.generation, Some(4));

    // A merge patch carrying a stale resourceVersion conflicts.
    let stale = json!({"metadata": {"resourceVersion": created.resource_version()}});
    let err = api
        .patch("r", &PatchParams::default(), &Patch::Merge(&stale))
        .await
        .unwrap_err();
    assert_eq!(status_code(&err), 409);

    // Server-side apply creates a missing object, then merges applied fields.
    let ssa = PatchParams::apply("test-manager").force();
    let applied = api
        .patch("s", &ssa, &Patch::Apply(route("s", "s.example")))
        .await
        .unwrap();
    assert_eq!(applied.metadata.generation, Some(1));
    let mut changed = route("s", "t.example");
    changed.metadata.labels = Some([("l".to_string(), "v".to_string())].into());
    let applied = api.patch("s", &ssa, &Patch::Apply(&changed)).await.unwrap();
    assert_eq!(applied.metadata.generation, Some(2));
    assert_eq!(applied.labels()["l"], "v");
    // Fields a manager stops applying go, unless another manager applied them.
    let other = PatchParams::apply("other-manager");
    let mut others = route("s", "t.example");
    others.metadata.labels = Some([("m".to_string(), "w".to_string())].into());
    api.patch("s", &other, &Patch::Apply(&others))
        .await
        .unwrap();
    let applied = api
        .patch("s", &ssa, &Patch::Apply(route("s", "t.example")))
        .await
        .unwrap();
    assert_eq!(applied.labels().get("l"), None);
    assert_eq!(applied.labels()["m"], "w");
    assert_eq!(
        applied.spec.hostnames.unwrap(),
        vec!["t.example".to_string()]
    );
    // Apply without a field manager is refused.
    let raw =
        http::Request::patch("/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes/s")
            .header("Content-Type", "application/apply-patch+yaml")
            .body(serde_json::to_vec(&route("s", "t.example")).unwrap())
            .unwrap();
    let err = server.client().request_text(raw).await.unwrap_err();
    assert_eq!(status_code(&err), 422);
    let status_apply = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "s"}, "status": {"parents": []},
    });
    let applied = api
        .patch_status("s", &ssa, &Patch::Apply(&status_apply))
        .await
        .unwrap();
    assert!(applied.status.is_some());
    let mut missing = status_apply.clone();
    missing["metadata"]["name"] = json!("nope");
    let missing = api
        .patch_status("nope", &ssa, &Patch::Apply(&missing))
        .await;
    assert_eq!(status_code(&missing.unwrap_err()), 404);

    // Status replace through PUT /status.
    let mut current = api.get("s").await.unwrap();
    current.spec.hostnames = Some(vec!["ignored.example".into()]);
    let replaced = api
        .replace_status("s", &PostParams::default(), &current)
        .await
        .unwrap();
    assert_eq!(
        replaced.spec.hostnames.unwrap(),
        vec!["t.example".to_string()]
    );
}

#[tokio::test]
async fn delete_waits_for_finalizers() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut cm = config_map("f", json!({}));
    cm.metadata.finalizers = Some(vec!["example.dev/hold".into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();

    let pending = api.delete("f", &DeleteParams::default()).await.unwrap();
    let pending = pending
        .left()
        .expect("the object comes back while finalizers remain");
    assert!(pending.metadata.deletion_timestamp.is_some());
    let still = api.get("f").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());

    let clear = json!({"metadata": {"finalizers": null}});
    api.patch("f", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    assert_eq!(status_code(&api.get("f").await.unwrap_err()), 404);

    api.create(&PostParams::default(), &config_map("g", json!({})))
        .await
        .unwrap();
    api.delete("g", &DeleteParams::default()).await.unwrap();
    assert_eq!(status_code(&api.get("g").await.unwrap_err()), 404);
    assert_eq!(
        status_code(&api.delete("g", &DeleteParams::default()).await.unwrap_err()),
        404
    );

    for name in ["h1", "h2", "keep"] {
        let labels = if name == "keep" {
            json!({})
        } else {
            json!({"batch": "h"})
        };
        api.create(&PostParams::default(), &config_map(name, labels))
            .await
            .unwrap();
    }
    let selected = ListParams::default().labels("batch=h");
    api.delete_collection(&DeleteParams::default(), &selected)
        .await
        .unwrap();
    let left = api.list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = left.items.iter().map(|o| o.name_any()).collect();
    assert_eq!(names, ["keep"]);
}

#[tokio::test]
async fn owner_references_cascade() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let owner = api
        .create(&PostParams::default(), &config_map("owner", json!({})))
        .await
        .unwrap();
    let dependent: ConfigMap = serde_json::from_value(json!({"metadata": {
        "name": "dependent",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner.metadata.uid.unwrap()}],
    }}))
    .unwrap();
    api.create(&PostParams::default(), &dependent)
        .await
        .unwrap();
    api.delete("owner", &DeleteParams::default()).await.unwrap();
    assert_eq!(status_code(&api.get("dependent").await.unwrap_err()), 404);
}

#[tokio::test]
async fn lease_replace_conflicts() {
    let server = ApiServer::start().await;
    let api: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "edgeplane"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &lease).await.unwrap();
    assert_eq!(
        status_code(
            &api.create(&PostParams::default(), &lease)
                .await
                .unwrap_err()
        ),
        409
    );

    // Two candidates read the same version; the first replace wins, the second conflicts.
    let mut first = created.clone();
    first.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let mut second = created.clone();
    second.spec.as_mut().unwrap().holder_identity = Some("c".into());
    api.replace("edgeplane", &PostParams::default(), &first)
        .await
        .unwrap();
    let err = api
        .replace("edgeplane", &PostParams::default(), &second)
        .await
        .unwrap_err();
    assert_eq!(status_code(&err), 409);
    let holder = api
        .get("edgeplane")
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder.as_deref(), Some("b"));
}
