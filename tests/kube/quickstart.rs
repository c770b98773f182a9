//! The cluster quickstart of `docs/install.md` (between its `cluster-quickstart` markers), run
//! command by command against the API emulator: what `kubectl apply -k` would apply (rendered
//! by the test renderer, `support/kustomize.rs`) is applied,
//! the binary runs with the rendered Deployment's own arguments and environment, the request
//! goes through the Gateway Service's EndpointSlice to the replica, and the uninstall leaves
//! nothing edgeplane made. The test plays the cluster's part where the emulator has none (the
//! kubelet starting and stopping the pod, the EndpointSlice controller, the cloud load
//! balancer, the namespace controller). Every command of the block must be one it knows, and
//! every step it knows must be in the block, so the doc cannot drift from what is checked.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cluster::*;
use crate::harness::*;
use crate::support;
use crate::support::apiserver::ApiServer;
use crate::support::echo::start_fleet;
use crate::T;

/// The address the test's "cloud load balancer" gives the Gateway Service.
const LB_IP: &str = "198.51.100.80";

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
    let install = render("deploy");
    let example = render("deploy/example");
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
                let p = start_pod(&deployment, &kubeconfig);
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
                let target = endpoint_for(&api, port).await;
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
                }
                // The namespace controller empties the deleted namespace once its pods are
                // gone (a terminating namespace takes no new objects meanwhile).
                for ns in install.iter().filter(|o| o["kind"] == "Namespace") {
                    remove_namespace_contents(&api, meta(ns, "name"));
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
