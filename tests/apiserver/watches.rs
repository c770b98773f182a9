//! Watches through kube-runtime: the watcher's event order, reflector stores, relisting after
//! `410 Expired`, bookmarks, selector transitions, `timeoutSeconds` and metadata-only watches.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::ResourceExt;
use serde_json::json;

use crate::support::apiserver::ApiServer;

const STEP: Duration = Duration::from_secs(5);

fn config_map(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

fn describe(ev: &Result<watcher::Event<ConfigMap>, watcher::Error>) -> String {
    match ev {
        Ok(watcher::Event::Init) => "Init".into(),
        Ok(watcher::Event::InitApply(o)) => format!("InitApply:{}", o.name_any()),
        Ok(watcher::Event::InitDone) => "InitDone".into(),
        Ok(watcher::Event::Apply(o)) => format!("Apply:{}", o.name_any()),
        Ok(watcher::Event::Delete(o)) => format!("Delete:{}", o.name_any()),
        Err(_) => "Error".into(),
    }
}

/// Described events until (and including) one equal to `last`; at most 50 events and `STEP`
/// per event.
async fn events_until<S>(stream: &mut S, last: &str) -> Vec<String>
where
    S: Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin,
{
    let mut seen = Vec::new();
    for _ in 0..50 {
        let ev = tokio::time::timeout(STEP, stream.next())
            .await
            .unwrap_or_else(|_| panic!("no event within {STEP:?}; seen {seen:?}"))
            .expect("watcher streams never end");
        let d = describe(&ev);
        seen.push(d.clone());
        if d == last {
            return seen;
        }
    }
    panic!("{last} not seen in 50 events: {seen:?}");
}

#[tokio::test]
async fn watcher_sees_changes_in_order() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams::default();
    api.create(&pp, &config_map("before", json!({})))
        .await
        .unwrap();
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    assert_eq!(
        events_until(&mut stream, "InitDone").await,
        ["Init", "InitApply:before", "InitDone"]
    );

    api.create(&pp, &config_map("a", json!({}))).await.unwrap();
    let patch = json!({"data": {"x": "1"}});
    api.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        events_until(&mut stream, "Delete:a").await,
        ["Apply:a", "Apply:a", "Delete:a"]
    );
}

#[tokio::test]
async fn reflector_relists_after_expired_history() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams::default();
    for name in ["a", "b"] {
        api.create(&pp, &config_map(name, json!({}))).await.unwrap();
    }
    let (store, writer) = reflector::store();
    let mut stream = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .boxed();
    events_until(&mut stream, "InitDone").await;
    assert_eq!(store.state().len(), 2);

    // "b" goes without a DELETED event: the open watch gets 410 and the watcher relists.
    server.remove_unseen("configmaps", "default", "b").unwrap();
    api.create(&pp, &config_map("c", json!({}))).await.unwrap();
    let seen = events_until(&mut stream, "InitDone").await;
    assert_eq!(seen.first().map(String::as_str), Some("Error"), "{seen:?}");
    assert!(!seen.iter().any(|e| e == "Delete:b"), "{seen:?}");
    let mut names: Vec<String> = store.state().iter().map(|o| o.name_any()).collect();
    names.sort();
    assert_eq!(names, ["a", "c"]);
    let lists = server
        .requests()
        .iter()
        .filter(|r| {
            r.method == "GET"
                && r.path_and_query.contains("/configmaps")
                && !r.path_and_query.contains("watch=")
        })
        .count();
    assert_eq!(lists, 2, "one list at start, one after 410");
}

#[tokio::test]
async fn raw_watch_bookmarks_selectors_and_timeout() {
    let server = ApiServer::start().await;
    server.set_bookmark_interval(Duration::from_millis(100));
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams::default();
    api.create(&pp, &config_map("m", json!({"sel": "no"})))
        .await
        .unwrap();
    let start_rv = server.resource_version().to_string();

    let wp = WatchParams::default().labels("sel=yes").timeout(2);
    let mut stream = api.watch(&wp, &start_rv).await.unwrap().boxed();
    let relabel = |v: &str| json!({"metadata": {"labels": {"sel": v}}});
    api.patch("m", &PatchParams::default(), &Patch::Merge(&relabel("yes")))
        .await
        .unwrap();
    api.patch("m", &PatchParams::default(), &Patch::Merge(&relabel("no")))
        .await
        .unwrap();

    let mut seen = Vec::new();
    let mut bookmark_rv = None;
    let mut ended = false;
    let started = std::time::Instant::now();
    for _ in 0..100 {
        match tokio::time::timeout(STEP, stream.next())
            .await
            .expect("event or end")
        {
            None => {
                ended = true;
                break;
            }
            Some(Ok(WatchEvent::Added(o))) => seen.push(format!("ADDED:{}", o.name_any())),
            Some(Ok(WatchEvent::Modified(o))) => seen.push(format!("MODIFIED:{}", o.name_any())),
            Some(Ok(WatchEvent::Deleted(o))) => seen.push(format!("DELETED:{}", o.name_any())),
            Some(Ok(WatchEvent::Bookmark(b))) => bookmark_rv = Some(b.metadata.resource_version),
            Some(other) => panic!("unexpected {other:?}"),
        }
    }
    // Entering the selection is ADDED, leaving it DELETED; the stream ends at timeoutSeconds.
    assert!(ended && started.elapsed() >= Duration::from_millis(1900));
    assert_eq!(seen, ["ADDED:m", "DELETED:m"]);
    let bookmark_rv: u64 = bookmark_rv.expect("a bookmark within 2 s").parse().unwrap();
    assert!(bookmark_rv >= start_rv.parse().unwrap());

    // resourceVersion "0" starts with the current objects.
    let mut stream = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(STEP, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(first, WatchEvent::Added(o) if o.name_any() == "m"));
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_a_bookmark() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &config_map("s", json!({})))
        .await
        .unwrap();
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher(api.clone(), config).boxed();
    assert_eq!(
        events_until(&mut stream, "InitDone").await,
        ["InitApply:s", "InitDone"]
    );
    api.create(&PostParams::default(), &config_map("t", json!({})))
        .await
        .unwrap();
    assert_eq!(events_until(&mut stream, "Apply:t").await, ["Apply:t"]);
}

#[tokio::test]
async fn metadata_watcher_gets_metadata_only() {
    let server = ApiServer::start().await;
    server.insert(
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "cert", "namespace": "default", "labels": {"a": "b"}},
        "data": {"tls.crt": "c2VjcmV0"}}),
    );
    let api: Api<Secret> = Api::default_namespaced(server.client());
    let metadata: Api<PartialObjectMeta<Secret>> = Api::default_namespaced(server.client());
    let mut stream = watcher(metadata, watcher::Config::default()).boxed();
    let mut applied = Vec::new();
    for _ in 0..10 {
        let ev = tokio::time::timeout(STEP, stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let watcher::Event::InitApply(meta) = ev {
            applied.push(meta.labels().clone());
        } else if matches!(ev, watcher::Event::InitDone) {
            break;
        }
    }
    assert_eq!(applied, [[("a".to_string(), "b".to_string())].into()]);

    // On the wire: PartialObjectMetadata without the secret's data.
    let meta = api.get_metadata("cert").await.unwrap();
    assert_eq!(meta.types.unwrap().kind, "PartialObjectMetadata");
    let raw = http::Request::get("/api/v1/namespaces/default/secrets")
        .header(
            "Accept",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )
        .body(Vec::new())
        .unwrap();
    let text = server.client().request_text(raw).await.unwrap();
    assert!(
        text.contains("PartialObjectMetadataList") && !text.contains("c2VjcmV0"),
        "{text}"
    );
}
