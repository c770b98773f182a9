//! Discovery documents built from the kind table: `/version`, `/api`, `/apis`,
//! `/apis/{group}`, `/api/v1` and `/apis/{group}/{version}`, plus the aggregated (v2) form of
//! `/api` and `/apis` when the client asks for it in `Accept`.

use serde_json::{json, Value};

use super::kinds::{version_priority, Kind};
use super::store::Store;

const JSON: &str = "application/json";
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const STATUS_VERBS: [&str; 3] = ["get", "patch", "update"];

/// A document and its content type.
pub type Doc = (String, Value);

fn wants_aggregated(accept: &str) -> bool {
    accept.contains("as=APIGroupDiscoveryList")
}

pub fn version() -> Doc {
    let doc = json!({
        "major": "1",
        "minor": "34",
        "gitVersion": "v1.34.0",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    });
    (JSON.into(), doc)
}

/// Groups other than core, each with its versions in preference order.
fn api_groups(store: &Store) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for k in store.kinds.iter().filter(|k| !k.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == k.group) {
            Some((_, versions)) if !versions.contains(&k.version) => {
                versions.push(k.version.clone())
            }
            Some(_) => {}
            None => groups.push((k.group.clone(), vec![k.version.clone()])),
        }
    }
    for (_, versions) in &mut groups {
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    groups.sort();
    groups
}

fn group_doc(group: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv),
    })
}

/// `/api`: the core versions, or the aggregated core group.
pub fn core_versions(store: &Store, accept: &str) -> Doc {
    if wants_aggregated(accept) {
        let items = vec![aggregated_group(store, "", &["v1".to_string()])];
        return (AGGREGATED.into(), aggregated_list(items));
    }
    let doc = json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    });
    (JSON.into(), doc)
}

/// `/apis`: every group, or the aggregated list of groups with their resources.
pub fn groups(store: &Store, accept: &str) -> Doc {
    let groups = api_groups(store);
    if wants_aggregated(accept) {
        let items = groups
            .iter()
            .map(|(g, versions)| aggregated_group(store, g, versions))
            .collect();
        return (AGGREGATED.into(), aggregated_list(items));
    }
    let docs: Vec<Value> = groups.iter().map(|(g, v)| group_doc(g, v)).collect();
    (
        JSON.into(),
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": docs}),
    )
}

/// `/apis/{group}`.
pub fn group(store: &Store, group: &str) -> Option<Doc> {
    let groups = api_groups(store);
    let (_, versions) = groups.iter().find(|(g, _)| g == group)?;
    Some((JSON.into(), group_doc(group, versions)))
}

fn kinds_at<'a>(
    store: &'a Store,
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'a Kind> {
    store
        .kinds
        .iter()
        .filter(move |k| k.group == group && k.version == version)
}

/// `/api/v1` and `/apis/{group}/{version}`: an APIResourceList with `x/status` entries.
pub fn resources(store: &Store, group: &str, version: &str) -> Option<Doc> {
    let mut resources = Vec::new();
    for k in kinds_at(store, group, version) {
        resources.push(json!({
            "name": k.plural,
            "singularName": k.singular(),
            "namespaced": k.namespaced,
            "kind": k.kind,
            "verbs": VERBS,
        }));
        if k.status {
            resources.push(json!({
                "name": format!("{}/status", k.plural),
                "singularName": "",
                "namespaced": k.namespaced,
                "kind": k.kind,
                "verbs": STATUS_VERBS,
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let doc = json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    });
    Some((JSON.into(), doc))
}

fn aggregated_list(items: Vec<Value>) -> Value {
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

fn aggregated_group(store: &Store, group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = kinds_at(store, group, v)
                .map(|k| {
                    let response_kind = json!({"group": group, "version": v, "kind": k.kind});
                    let subresources: Vec<Value> = if k.status {
                        vec![json!({
                            "subresource": "status",
                            "responseKind": response_kind,
                            "verbs": STATUS_VERBS,
                        })]
                    } else {
                        Vec::new()
                    };
                    json!({
                        "resource": k.plural,
                        "responseKind": response_kind,
                        "scope": if k.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": k.singular(),
                        "verbs": VERBS,
                        "subresources": subresources,
                    })
                })
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": group}, "versions": versions})
}
