//! The cluster's part around the API emulator for `quickstart.rs`: rendering a
//! kustomization (the test renderer, `support/kustomize.rs`), `kubectl apply` and `delete` of what it renders, the
//! pod the kubelet would run for the rendered Deployment, where the load balancer sends a
//! Gateway Service's traffic (its EndpointSlice), and the namespace controller's cleanup.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::harness::gateway_service;
use crate::support;
use crate::support::apiserver::{ApiServer, Kind};
use crate::T;

/// The repository's root.
pub fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Renders a kustomization directory (relative to the repository's root) as
/// `kubectl kustomize` does, with the test renderer: no kubectl needed.
pub fn render(dir: &str) -> Vec<Value> {
    support::kustomize::render(&root().join(dir))
}

/// Kinds the install applies that the emulator does not serve by default.
pub fn register_install_kinds(api: &ApiServer) {
    for (group, version, plural, kind, namespaced) in [
        ("", "v1", "serviceaccounts", "ServiceAccount", true),
        ("apps", "v1", "deployments", "Deployment", true),
        (
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
        ),
        ("rbac.authorization.k8s.io", "v1", "roles", "Role", true),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "RoleBinding",
            true,
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "ClusterRole",
            false,
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
        ),
    ] {
        api.register(Kind::new(group, version, plural, kind, namespaced, false));
    }
}

pub fn meta<'a>(o: &'a Value, field: &str) -> &'a str {
    o["metadata"][field].as_str().unwrap_or_default()
}

/// `kubectl apply`: every object created or replaced.
pub fn apply(api: &ApiServer, objects: &[Value]) {
    for o in objects {
        api.insert(o.clone());
    }
}

/// Whether `o` (as rendered) is still stored.
pub fn stored(api: &ApiServer, o: &Value) -> bool {
    api.shared().write(|store| {
        let Some(kind) = store.kinds.kind_of(o) else {
            return false;
        };
        let ns = if kind.namespaced {
            meta(o, "namespace")
        } else {
            ""
        };
        store.get(&kind, ns, meta(o, "name")).is_ok()
    })
}

/// `kubectl delete`: a DELETE for each object, finalizers honoured.
pub fn delete(api: &ApiServer, o: &Value) {
    api.shared().write(|store| {
        let kind = store.kinds.kind_of(o).expect("a served kind");
        let ns = if kind.namespaced {
            meta(o, "namespace")
        } else {
            ""
        };
        let _ = store.delete(&kind, ns, meta(o, "name"), &Value::Null);
    });
}

/// Every stored object, as `kind namespace/name`.
pub fn everything(api: &ApiServer) -> Vec<String> {
    let store = api.shared().store();
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for kind in store.kinds.iter() {
        if !seen.insert(kind.resource()) {
            continue;
        }
        for o in store.list(kind, None) {
            out.push(format!(
                "{} {}/{}",
                kind.kind,
                meta(&o, "namespace"),
                meta(&o, "name")
            ));
        }
    }
    out
}

/// The replica the kubelet would run for the rendered Deployment: its container's args and
/// environment, `$(VAR)` expanded, with the pod's IP a loopback address of its own.
pub struct Pod {
    pub child: tokio::process::Child,
    pub ip: IpAddr,
    pub admin: SocketAddr,
    pub grace: Duration,
}

pub fn start_pod(deployment: &Value, kubeconfig: &Path) -> Pod {
    let spec = &deployment["spec"]["template"]["spec"];
    let container = &spec["containers"][0];
    let ip = support::net::loopback_ip();
    let mut env: Vec<(String, String)> = Vec::new();
    for e in container["env"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().expect("env name").to_owned();
        let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            Some("status.podIP") => ip.to_string(),
            Some("metadata.name") => "edgeplane-7d9f-abcde".to_owned(),
            Some("metadata.namespace") => meta(deployment, "namespace").to_owned(),
            Some(other) => panic!("no downward API value for {other}"),
            None => e["value"].as_str().unwrap_or_default().to_owned(),
        };
        env.push((name, value));
    }
    let expand = |arg: &str| {
        env.iter()
            .fold(arg.to_owned(), |a, (k, v)| a.replace(&format!("$({k})"), v))
    };
    let args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| expand(a.as_str().expect("string arg")))
        // Loopback only in tests: the wildcard bind and the dashboard's 127.0.0.1 become the
        // pod's own loopback address.
        .map(|a| a.replace("=0.0.0.0", &format!("={ip}")))
        .map(|a| a.replace("=127.0.0.1:", &format!("={ip}:")))
        .collect();
    let admin = args
        .iter()
        .find_map(|a| a.strip_prefix("--admin-addr="))
        .expect("--admin-addr")
        .parse()
        .expect("admin address");
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_edgeplane"))
        .args(&args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "edgeplane=warn")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .kill_on_drop(true)
        .spawn()
        .expect("start edgeplane");
    let grace = spec["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
    Pod {
        child,
        ip,
        admin,
        grace: Duration::from_secs(grace),
    }
}

pub async fn admin_status(admin: SocketAddr, path: &str) -> Option<u16> {
    let client = support::client::h1_client();
    support::client::send(
        &client,
        support::client::get(admin, &admin.to_string(), path),
    )
    .await
    .ok()
    .map(|r| r.status.as_u16())
}

/// Waits for the Gateway Service of `default/web` and returns it.
pub async fn gateway_service_for(api: &ApiServer) -> Value {
    let mut found = None;
    api.wait_until(T * 3, |a| {
        found = gateway_service(a, "default", "web");
        found.is_some()
    })
    .await;
    found.expect("the controller made the Gateway's Service")
}

/// Where the load balancer sends a connection to the Gateway Service's `port`: the endpoint
/// its EndpointSlice lists for that port, once the leader has listed a ready replica there
/// (waited for at most `T`: the slice is written after the Service, apart from the Gateway's
/// status).
pub async fn endpoint_for(api: &ApiServer, port: u16) -> SocketAddr {
    let mut found = None;
    api.wait_until(T, |a| {
        found = listed_endpoint(a, port);
        found.is_some()
    })
    .await;
    found.expect("a ready replica in the Gateway Service's EndpointSlice")
}

/// The endpoint the Gateway Service's EndpointSlice lists for `port`, if it lists one yet.
fn listed_endpoint(api: &ApiServer, port: u16) -> Option<SocketAddr> {
    let svc = gateway_service(api, "default", "web")?;
    let ports = svc["spec"]["ports"].as_array()?;
    let name = ports.iter().find(|p| p["port"] == port)?["name"].as_str()?;
    let svc_name = meta(&svc, "name");
    let slice = api.objects("endpointslices").into_iter().find(|s| {
        s["metadata"]["namespace"] == "default"
            && s["metadata"]["labels"]["kubernetes.io/service-name"] == svc_name
    })?;
    let slice_ports = slice["ports"].as_array()?;
    let target = slice_ports.iter().find(|p| p["name"] == name)?["port"].as_u64()?;
    let ip: IpAddr = slice["endpoints"][0]["addresses"][0]
        .as_str()?
        .parse()
        .ok()?;
    Some(SocketAddr::new(ip, u16::try_from(target).ok()?))
}

/// Deletes every namespaced object in `ns`, as the namespace controller does.
pub fn remove_namespace_contents(api: &ApiServer, ns: &str) {
    api.shared().write(|store| {
        let kinds: Vec<Kind> = store
            .kinds
            .iter()
            .filter(|k| k.namespaced)
            .cloned()
            .collect();
        for kind in kinds {
            for o in store.list(&kind, Some(ns)) {
                let name = meta(&o, "name").to_owned();
                let _ = store.delete(&kind, ns, &name, &Value::Null);
            }
        }
    });
}
