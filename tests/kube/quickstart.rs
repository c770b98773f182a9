//! The cluster quickstart of `docs/install.md` (between its `cluster-quickstart` markers), run
//! command by command against the API emulator: what `kubectl kustomize` renders is applied,
//! the binary runs with the rendered Deployment's own arguments and environment, the request
//! goes through the Gateway Service's EndpointSlice to the replica, and the uninstall leaves
//! nothing edgeplane made. The test plays the cluster's part where the emulator has none (the
//! kubelet starting and stopping the pod, the EndpointSlice controller, the cloud load
//! balancer, the namespace controller). Every command of the block must be one it knows, and
//! every step it knows must be in the block, so the doc cannot drift from what is checked.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::*;
use crate::support;
use crate::support::apiserver::{ApiServer, Kind};
use crate::support::echo::start_fleet;
use crate::T;

/// The address the test's "cloud load balancer" gives the Gateway Service.
const LB_IP: &str = "198.51.100.80";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The quickstart's commands: the non-comment lines of the fenced block between the markers.
fn quickstart_commands() -> Vec<String> {
    let doc = std::fs::read_to_string(root().join("docs/install.md")).expect("docs/install.md");
    let start = doc
        .find("<!-- cluster-quickstart:start -->")
        .expect("start marker");
    let end = doc
        .find("<!-- cluster-quickstart:end -->")
        .expect("end marker");
    assert!(start < end, "markers out of order");
    let block = &doc[start..end];
    assert!(block.contains("```sh"), "the quickstart is a sh block");
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("```"))
        .filter(|l| !l.starts_with("<!--"))
        .map(str::to_owned)
        .collect()
}

/// Renders a kustomization directory with `kubectl kustomize` (else `kustomize build`); `None`
/// when neither runs, which `CI=true` does not accept.
fn render(dir: &str) -> Option<Vec<Value>> {
    let path = root().join(dir);
    let attempts: [(&str, &[&str]); 2] = [("kubectl", &["kustomize"]), ("kustomize", &["build"])];
    for (tool, args) in attempts {
        let Ok(out) = Command::new(tool).args(args).arg(&path).output() else {
            continue;
        };
        assert!(
            out.status.success(),
            "{tool} {args:?} {dir}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let docs = serde_yaml_ng::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).expect("rendered YAML"))
            .filter(|v: &Value| !v.is_null())
            .collect();
        return Some(docs);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "kubectl (kustomize) is needed in CI (.ci/run installs it)"
    );
    eprintln!("neither kubectl nor kustomize runs: the quickstart was not run");
    None
}

/// Kinds the install applies that the emulator does not serve by default.
fn register_install_kinds(api: &ApiServer) {
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

fn meta<'a>(o: &'a Value, field: &str) -> &'a str {
    o["metadata"][field].as_str().unwrap_or_default()
}

/// `kubectl apply`: every object created or replaced.
fn apply(api: &ApiServer, objects: &[Value]) {
    for o in objects {
        api.insert(o.clone());
    }
}

/// Whether `o` (as rendered) is still stored.
fn stored(api: &ApiServer, o: &Value) -> bool {
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
fn delete(api: &ApiServer, o: &Value) {
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
fn everything(api: &ApiServer) -> Vec<String> {
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
struct Pod {
    child: tokio::process::Child,
    ip: IpAddr,
    admin: SocketAddr,
    grace: Duration,
}

fn start_pod(api: &ApiServer, deployment: &Value, kubeconfig: &Path) -> Pod {
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
    let _ = api;
    Pod {
        child,
        ip,
        admin,
        grace: Duration::from_secs(grace),
    }
}

async fn admin_status(admin: SocketAddr, path: &str) -> Option<u16> {
    let client = support::client::h1_client();
    support::client::send(
        &client,
        support::client::get(admin, &admin.to_string(), path),
    )
    .await
    .ok()
    .map(|r| r.status.as_u16())
}

fn condition_true(conditions: &Value, ty: &str) -> bool {
    cond(conditions, ty).is_some_and(|c| c["status"] == "True")
}

/// The command's single-quoted `-H` header value and its URL (with `$ADDR` replaced).
fn curl_parts(cmd: &str, addr: &str) -> (String, String) {
    let header = cmd
        .split("-H '")
        .nth(1)
        .and_then(|h| h.split('\'').next())
        .expect("curl -H 'Name: value'");
    let url = cmd
        .split_whitespace()
        .last()
        .expect("a URL")
        .trim_matches('"')
        .replace("$ADDR", addr);
    (header.to_owned(), url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_cluster_quickstart_installs_serves_and_uninstalls() {
    let commands = quickstart_commands();
    let Some(install) = render("deploy") else {
        return;
    };
    let example = render("deploy/example").expect("deploy/example renders");
    let version = env!("CARGO_PKG_VERSION");

    let api = ApiServer::start().await;
    register_install_kinds(&api);
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let echoes = start_fleet(&["echo-6c8d-xyz12"]).await;
    let deployment = install
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("the Deployment")
        .clone();
    let mut pod: Option<Pod> = None;
    let mut addr: Option<String> = None;
    let mut done = Vec::new();

    for cmd in &commands {
        let step = match cmd.as_str() {
            c if c.starts_with("kubectl apply --server-side -f https://github.com/kubernetes-sigs/gateway-api/releases/download/")
                && c.ends_with("/standard-install.yaml") =>
            {
                // The emulator serves the Gateway API kinds already; the version is the one
                // the conformance suite replays.
                assert!(c.contains("/v1.6.1/"), "{c}");
                "gateway-api-crds"
            }
            c if c.starts_with("docker build ") => {
                // The tag the manifests' image component gives `edgeplane`.
                assert!(c.ends_with(&format!(" -t edgeplane:{version} .")), "{c}");
                assert!(c.contains("--build-arg EDGEPLANE_COMMIT="), "{c}");
                "image"
            }
            c if c.starts_with("kind load docker-image ") => {
                assert_eq!(c, format!("kind load docker-image edgeplane:{version}"));
                "load"
            }
            "kubectl apply -k deploy/" => {
                apply(&api, &install);
                "install"
            }
            "kubectl -n edgeplane-system rollout status deployment/edgeplane --timeout=120s" => {
                // The kubelet starts the pod; the rollout is done once it is ready.
                let p = start_pod(&api, &deployment, &kubeconfig);
                let probe = deployment["spec"]["template"]["spec"]["containers"][0]
                    ["readinessProbe"]["httpGet"]["path"]
                    .as_str()
                    .expect("a readiness probe")
                    .to_owned();
                let deadline = Instant::now() + T * 3;
                while admin_status(p.admin, &probe).await != Some(200) && Instant::now() < deadline
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                assert_eq!(admin_status(p.admin, &probe).await, Some(200), "{probe}");
                // The EndpointSlice controller lists the ready pod behind edgeplane-webhook.
                api.insert(replicas_slice(&[p.ip], &[]));
                pod = Some(p);
                "rollout"
            }
            "kubectl apply -k deploy/example" => {
                apply(&api, &example);
                // The echo Deployment's pod, as the EndpointSlice controller lists it.
                let svc = api.object("services", "default", "echo").expect("Service echo");
                let echo = echoes[0].addr;
                api.insert(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"namespace": "default", "name": "echo-x1",
                        "labels": {"kubernetes.io/service-name": "echo"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "echo",
                            "uid": svc["metadata"]["uid"], "controller": true}]},
                    "addressType": "IPv4",
                    "ports": [{"name": "http", "port": echo.port(), "protocol": "TCP"}],
                    "endpoints": [{"addresses": [echo.ip().to_string()],
                        "conditions": {"ready": true}}]}));
                "example"
            }
            "kubectl wait --for=condition=Programmed gateway/web --timeout=120s" => {
                let svc = gateway_service_for(&api).await;
                // The cloud load balancer takes the LoadBalancer Service and reports its IP.
                assert_eq!(svc["spec"]["type"], "LoadBalancer", "{svc}");
                let mut with_lb = svc.clone();
                with_lb["status"] = json!({"loadBalancer": {"ingress": [{"ip": LB_IP}]}});
                api.insert(with_lb);
                let programmed = api
                    .wait_until(T * 3, |a| {
                        a.object("gateways", "default", "web")
                            .is_some_and(|g| condition_true(&g["status"]["conditions"], "Programmed"))
                    })
                    .await;
                assert!(programmed, "{:?}", api.object("gateways", "default", "web"));
                "wait"
            }
            "kubectl get gateway,httproute" => {
                let gw = api.object("gateways", "default", "web").expect("Gateway web");
                assert!(condition_true(&gw["status"]["conditions"], "Accepted"), "{gw}");
                let accepted = api
                    .wait_until(T, |a| {
                        a.object("httproutes", "default", "echo").is_some_and(|r| {
                            let c = &r["status"]["parents"][0]["conditions"];
                            condition_true(c, "Accepted") && condition_true(c, "ResolvedRefs")
                        })
                    })
                    .await;
                assert!(accepted, "{:?}", api.object("httproutes", "default", "echo"));
                "get"
            }
            "ADDR=$(kubectl get gateway web -o jsonpath='{.status.addresses[0].value}')" => {
                let got = api
                    .wait_until(T, |a| {
                        a.object("gateways", "default", "web")
                            .is_some_and(|g| g["status"]["addresses"][0]["value"] == LB_IP)
                    })
                    .await;
                assert!(got, "{:?}", api.object("gateways", "default", "web"));
                addr = Some(LB_IP.to_owned());
                "addr"
            }
            c if c.starts_with("curl ") => {
                let addr = addr.as_deref().expect("ADDR set before curl");
                let (header, url) = curl_parts(c, addr);
                let host = header.strip_prefix("Host: ").expect("a Host header");
                let rest = url
                    .strip_prefix(&format!("http://{addr}"))
                    .unwrap_or_else(|| panic!("{url} is not the Gateway's address"));
                let (port, path) = match rest.split_once('/') {
                    Some(("", path)) => (80, format!("/{path}")),
                    other => panic!("unexpected URL {url}: {other:?}"),
                };
                let target = endpoint_for(&api, port);
                let deadline = Instant::now() + T;
                let client = support::client::h1_client();
                let mut last = None;
                while Instant::now() < deadline {
                    let r = support::client::send(&client, support::client::get(target, host, &path))
                        .await;
                    if let Ok(r) = &r {
                        if r.status == 200 {
                            last = Some(r.json());
                            break;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let body = last.expect("the documented curl is answered 200");
                assert_eq!(body["path"], path.as_str(), "{body}");
                assert_eq!(body["host"], host, "{body}");
                assert_eq!(body["pod"], echoes[0].pod.as_str(), "{body}");
                // Without the Host header the request matches no route.
                let r = support::client::send(&client, support::client::get(target, LB_IP, &path))
                    .await
                    .expect("an answer");
                assert_eq!(r.status, 404);
                "curl"
            }
            "kubectl delete -k deploy/example" => {
                for o in &example {
                    delete(&api, o);
                }
                // kubectl waits until each object is gone: the controller deletes the Gateway's
                // Service, then removes its finalizer.
                let gone = api
                    .wait_until(T * 3, |a| example.iter().all(|o| !stored(a, o)))
                    .await;
                assert!(gone, "left: {:?}", everything(&api));
                let cleaned = api
                    .wait_until(T, |a| {
                        gateway_service(a, "default", "web").is_none()
                            && a.object("gatewayclasses", "", "edgeplane").is_some_and(|c| {
                                c["metadata"]["finalizers"]
                                    .as_array()
                                    .is_none_or(|f| f.is_empty())
                            })
                    })
                    .await;
                assert!(cleaned, "left: {:?}", everything(&api));
                "uninstall-example"
            }
            "kubectl delete -k deploy/" => {
                for o in &install {
                    if o["kind"] == "Deployment" {
                        // The kubelet stops the pod: SIGTERM, exit within the grace period.
                        let mut p = pod.take().expect("the pod runs");
                        let pid = p.child.id().expect("pid").to_string();
                        let term = Command::new("kill").args(["-TERM", &pid]).status();
                        assert!(term.is_ok_and(|s| s.success()));
                        let exit = tokio::time::timeout(p.grace, p.child.wait())
                            .await
                            .expect("exits within terminationGracePeriodSeconds")
                            .expect("exit status");
                        assert_eq!(exit.code(), Some(0));
                    }
                    delete(&api, o);
                    if o["kind"] == "Namespace" {
                        // The namespace controller deletes what is in it.
                        remove_namespace_contents(&api, meta(o, "name"));
                    }
                }
                let gone = api
                    .wait_until(T, |a| install.iter().all(|o| !stored(a, o)))
                    .await;
                assert!(gone, "left: {:?}", everything(&api));
                "uninstall"
            }
            other => panic!("docs/install.md's quickstart has a command this test does not run: {other}"),
        };
        done.push(step);
    }
    assert_eq!(
        done,
        [
            "gateway-api-crds",
            "image",
            "load",
            "install",
            "rollout",
            "example",
            "wait",
            "get",
            "addr",
            "curl",
            "uninstall-example",
            "uninstall",
        ],
        "the quickstart's steps, in order"
    );
    // Nothing edgeplane made is left; Events expire on their own.
    let left: Vec<String> = everything(&api)
        .into_iter()
        .filter(|o| !o.starts_with("Event "))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Waits for the Gateway Service of `default/web` and returns it.
async fn gateway_service_for(api: &ApiServer) -> Value {
    let mut found = None;
    api.wait_until(T * 3, |a| {
        found = gateway_service(a, "default", "web");
        found.is_some()
    })
    .await;
    found.expect("the controller made the Gateway's Service")
}

/// Where the load balancer sends a connection to the Gateway Service's `port`: the endpoint
/// its EndpointSlice lists for that port.
fn endpoint_for(api: &ApiServer, port: u16) -> SocketAddr {
    let svc = gateway_service(api, "default", "web").expect("the Gateway Service");
    let name = svc["spec"]["ports"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["port"] == port))
        .and_then(|p| p["name"].as_str())
        .expect("a Service port for the URL's port")
        .to_owned();
    let svc_name = meta(&svc, "name").to_owned();
    let slice = api
        .objects("endpointslices")
        .into_iter()
        .find(|s| {
            s["metadata"]["namespace"] == "default"
                && s["metadata"]["labels"]["kubernetes.io/service-name"] == svc_name.as_str()
        })
        .expect("the Gateway Service's EndpointSlice");
    let target = slice["ports"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name.as_str()))
        .and_then(|p| p["port"].as_u64())
        .expect("the slice's port");
    let ip: IpAddr = slice["endpoints"][0]["addresses"][0]
        .as_str()
        .and_then(|a| a.parse().ok())
        .expect("a ready replica's address");
    SocketAddr::new(ip, u16::try_from(target).expect("a port"))
}

/// Deletes every namespaced object in `ns`, as the namespace controller does.
fn remove_namespace_contents(api: &ApiServer, ns: &str) {
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
