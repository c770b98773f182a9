//! A kind added through the one declaration (`edgeplane::kinds!`) and nothing else: a custom
//! resource of a test group is read from a config directory by the file provider (CRD
//! defaults and validation included) and watched through the production kube client against
//! the API emulator, together with a metadata-only kind and a kind fetched only when
//! referenced.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgeplane::admission::Crds;
use edgeplane::kinds::{KindSet, Wanted, WatchMode};
use edgeplane::metrics::Metrics;
use edgeplane::provider::file::{watch_dir, ConfigDir};
use edgeplane::provider::kube::watch::{reflectors, run_snapshots, Trigger};
use edgeplane::provider::kube::RetryPolicy;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::ByteString;
use kube::{CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::watch;

use support::apiserver::ApiServer;

const T: Duration = Duration::from_secs(10);

/// The throwaway kind: nothing in the product knows it.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize)]
#[kube(
    group = "test.edgeplane.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    schema = "disabled"
)]
pub struct WidgetSpec {
    pub size: Option<u32>,
    /// A Secret this widget needs: the only Secrets a cluster snapshot fetches.
    pub secret: Option<String>,
}

edgeplane::kinds! {
    /// What a translator of widgets would read.
    #[derive(Debug, Clone, Default)]
    pub struct Widgets {
        kinds {
            widgets: Widget { watched_if(edgeplane::kinds::not_being_deleted) },
            namespaces: Namespace { metadata_only },
            secrets: Secret { referenced(widget_secrets) },
        }
        pub note: Option<String>,
    }
}

fn widget_secrets(s: &Widgets) -> Wanted {
    s.widgets
        .iter()
        .filter_map(|w| Some((w.namespace()?, w.spec.secret.clone()?)))
        .collect()
}

/// Sorted names of objects.
fn names<K: kube::Resource>(objects: &[Arc<K>]) -> Vec<String> {
    let mut n: Vec<String> = objects.iter().map(|o| o.name_any()).collect();
    n.sort();
    n
}

/// A tiny CRD for the admission step: `size` defaults to 3 and is at most 10.
fn widget_crds() -> Arc<Crds> {
    let mut crds = Crds::new();
    crds.register(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.test.edgeplane.dev"},
        "spec": {"group": "test.edgeplane.dev", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    "size": {"type": "integer", "default": 3, "maximum": 10},
                    "secret": {"type": "string"}}}}}}}]}
    }))
    .unwrap();
    Arc::new(crds)
}

fn widget_yaml(name: &str, size: Option<u32>) -> String {
    let size = size.map_or(String::new(), |s| format!("\n  size: {s}"));
    format!("apiVersion: test.edgeplane.dev/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n  secret: key{size}\n")
}

fn write(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
}

#[test]
fn the_declaration_lists_the_kinds_as_the_providers_read_them() {
    let kinds = Widgets::describe();
    let summary: Vec<_> = kinds
        .iter()
        .map(|k| (k.field, k.group.as_str(), k.kind.as_str(), k.watch))
        .collect();
    assert_eq!(
        summary,
        [
            (
                "widgets",
                "test.edgeplane.dev",
                "Widget",
                WatchMode::Objects
            ),
            ("namespaces", "", "Namespace", WatchMode::Metadata),
            ("secrets", "", "Secret", WatchMode::Referenced),
        ]
    );
    assert!(kinds[0].namespaced && !kinds[1].namespaced);
    assert_eq!(kinds[0].plural, "widgets");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_kind_is_read_from_a_config_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "widgets.yaml",
        &format!(
            "{}---\n{}---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: web\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: not-declared\n",
            widget_yaml("small", None),
            widget_yaml("big", Some(7)),
        ),
    );
    // Refused by the CRD (size above 10): reported with its file and line, not admitted.
    write(d, "bad.yaml", &widget_yaml("huge", Some(50)));

    let mut config = ConfigDir::<Widgets>::for_kinds(d, widget_crds());
    let first = config.load().unwrap();
    let s = &first.snapshot;
    assert_eq!(names(&s.widgets), ["big", "small"]);
    let small = s.widgets.iter().find(|w| w.name_any() == "small").unwrap();
    assert_eq!(small.spec.size, Some(3), "the CRD's default applies");
    assert_eq!(small.namespace().as_deref(), Some("default"));
    assert_eq!(names(&s.namespaces), ["web"]);
    assert_eq!(s.len(), 3);
    let skipped: Vec<String> = first.skipped.iter().map(ToString::to_string).collect();
    assert_eq!(skipped, ["v1 Service"]);
    let [e] = first.errors.as_slice() else {
        panic!("{:?}", first.errors)
    };
    assert!(e.path.ends_with("bad.yaml"), "{e}");
    assert_eq!(e.line, Some(7), "the line of spec.size: {e}");
    assert!(e.message.contains("spec.size"), "{e}");

    // The same declaration drives the watch of the directory.
    let (tx, mut rx) = watch::channel(Arc::new(first.snapshot));
    let _watcher = watch_dir(config, tx, Metrics::new()).unwrap();
    write(d, "bad.yaml", &widget_yaml("huge", Some(9)));
    let deadline = Instant::now() + T;
    while names(&rx.borrow().widgets) != ["big", "huge", "small"] {
        assert!(Instant::now() < deadline, "the fixed widget never arrived");
        let _ = tokio::time::timeout(Duration::from_millis(200), rx.changed()).await;
    }
}

/// Waits until the latest snapshot satisfies `ok`.
async fn wait_for(
    rx: &mut watch::Receiver<Arc<Widgets>>,
    what: &str,
    ok: impl Fn(&Widgets) -> bool,
) {
    let deadline = Instant::now() + T;
    loop {
        if ok(&rx.borrow_and_update()) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: last {:?}", rx.borrow());
        let _ = tokio::time::timeout(Duration::from_millis(200), rx.changed()).await;
    }
}

fn widget(ns: &str, name: &str, secret: &str) -> serde_json::Value {
    json!({"apiVersion": "test.edgeplane.dev/v1", "kind": "Widget",
        "metadata": {"namespace": ns, "name": name}, "spec": {"secret": secret}})
}

fn secret(ns: &str, name: &str, value: &str) -> serde_json::Value {
    let data = serde_json::to_value(ByteString(value.as_bytes().to_vec())).unwrap();
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": ns, "name": name},
        "data": {"value": data}})
}

fn secret_value(s: &Widgets, name: &str) -> Option<String> {
    let secret = s.secrets.iter().find(|x| x.name_any() == name)?;
    let bytes = &secret.data.as_ref()?.get("value")?.0;
    String::from_utf8(bytes.clone()).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_kind_is_watched_through_the_kube_client() {
    let api = ApiServer::start().await;
    api.register_declared::<Widgets>();
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "web", "labels": {"team": "a"}}}));
    api.insert(widget("web", "one", "one-key"));
    api.insert(secret("web", "one-key", "first"));
    api.insert(secret("web", "unrelated", "never fetched"));

    let trigger = Trigger::default();
    let started = reflectors::<Widgets>(
        &api.client(),
        RetryPolicy::default(),
        &trigger,
        &Metrics::new(),
    );
    let mut tasks: Vec<_> = started.tasks.into_iter().map(tokio::spawn).collect();
    let (tx, mut rx) = watch::channel(Arc::new(Widgets::default()));
    tasks.push(tokio::spawn(run_snapshots(
        started.stores.clone(),
        trigger,
        tx,
        Duration::from_secs(300),
        |s: &mut Widgets| s.note = Some("finished".into()),
    )));

    wait_for(&mut rx, "first widget", |s| names(&s.widgets) == ["one"]).await;
    {
        let s = rx.borrow();
        assert_eq!(s.note.as_deref(), Some("finished"));
        assert_eq!(secret_value(&s, "one-key").as_deref(), Some("first"));
        assert_eq!(names(&s.secrets), ["one-key"], "only referenced Secrets");
        let web = &s.namespaces[0];
        assert_eq!(web.labels()["team"], "a");
        assert!(web.spec.is_none(), "metadata only");
    }
    let fetched = |api: &ApiServer, name: &str| {
        api.requests()
            .iter()
            .filter(|r| {
                r.method == "GET" && r.path_and_query.ends_with(&format!("/secrets/{name}"))
            })
            .count()
    };
    assert_eq!(fetched(&api, "unrelated"), 0);

    // Changes arrive through the watch: a new widget, its Secret, a Secret rotation.
    api.insert(widget("web", "two", "two-key"));
    api.insert(secret("web", "two-key", "second"));
    wait_for(&mut rx, "second widget and its Secret", |s| {
        names(&s.widgets) == ["one", "two"]
            && secret_value(s, "two-key").as_deref() == Some("second")
    })
    .await;
    api.insert(secret("web", "one-key", "rotated"));
    wait_for(&mut rx, "rotated Secret", |s| {
        secret_value(s, "one-key").as_deref() == Some("rotated")
    })
    .await;
    assert_eq!(fetched(&api, "unrelated"), 0);

    // A deleted widget leaves, and its Secret with it; the typed store agrees.
    api.remove("widgets.test.edgeplane.dev", "web", "one")
        .unwrap();
    wait_for(&mut rx, "widget deleted", |s| {
        names(&s.widgets) == ["two"] && names(&s.secrets) == ["two-key"]
    })
    .await;
    assert_eq!(names(&started.stores.of::<Widget>().state()), ["two"]);

    for t in tasks {
        t.abort();
    }
}
