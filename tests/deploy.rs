//! Offline validation of `deploy/`: every manifest deserializes into its typed Kubernetes or
//! Gateway API struct without losing a field (typed round trip), every kustomization lists
//! files and directories that exist, the ClusterRole covers every declared kind, and the
//! conversion webhook's Service, port, Secret and CRD permissions match the controller's.
//! The LICENSE file holds the license Cargo.toml names. The monitoring overlay's checks are in
//! `deploy/monitoring.rs` (with `deploy/operator.rs` and `deploy/promql.rs`), the production
//! settings (image, spread, budget, HPA, ports) in `deploy/production.rs`, and the strict
//! schema validation of every rendered overlay in `deploy/schema.rs`, rendered by the test
//! renderer of kustomizations (`support/kustomize.rs`) that `deploy/render.rs` checks against
//! `kubectl kustomize`.

#[path = "support/kustomize.rs"]
mod kustomize;
#[path = "deploy/monitoring.rs"]
mod monitoring;
#[path = "deploy/operator.rs"]
mod operator;
#[path = "deploy/production.rs"]
mod production;
#[path = "deploy/promql.rs"]
mod promql;
#[path = "deploy/render.rs"]
mod render;
#[path = "deploy/schema.rs"]
mod schema;

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("deploy dir readable")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

fn documents(path: &Path) -> Vec<Value> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(path).expect("readable");
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v| !v.is_null())
        .collect()
}

/// Every field of `original` must be present, with an equal value, in `round`; `where_` names
/// the path for the failure message.
fn assert_kept(original: &Value, round: &Value, where_: &str) {
    match (original, round) {
        (Value::Object(o), Value::Object(r)) => {
            for (k, v) in o {
                let next = format!("{where_}.{k}");
                let rv = r
                    .get(k)
                    .unwrap_or_else(|| panic!("field {next} was dropped by the typed struct"));
                assert_kept(v, rv, &next);
            }
        }
        (Value::Array(o), Value::Array(r)) => {
            assert_eq!(o.len(), r.len(), "{where_}: list length changed");
            for (i, (a, b)) in o.iter().zip(r).enumerate() {
                assert_kept(a, b, &format!("{where_}[{i}]"));
            }
        }
        (Value::Number(a), Value::Number(b)) => {
            assert_eq!(a.as_f64(), b.as_f64(), "{where_}: number changed")
        }
        (a, b) => assert_eq!(a, b, "{where_}: value changed"),
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(doc: &Value, where_: &str) {
    let typed: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{where_}: not a valid object: {e}"));
    let round = serde_json::to_value(&typed).expect("serializes");
    assert_kept(doc, &round, where_);
}

#[test]
fn every_manifest_round_trips_through_its_typed_struct() {
    use gateway_api::apis::standard::{gatewayclasses, gateways, httproutes};
    use k8s_openapi::api::rbac::v1 as rbac;
    use k8s_openapi::api::{apps::v1 as apps, core::v1 as core, discovery::v1 as disc};
    let mut files = Vec::new();
    yaml_files(&deploy_dir(), &mut files);
    assert!(files.len() >= 8, "deploy/ files: {files:?}");
    let mut kinds = std::collections::BTreeSet::new();
    for f in &files {
        for (i, doc) in documents(f).iter().enumerate() {
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            let where_ = format!("{}#{i} ({kind})", f.display());
            match kind.as_str() {
                "Kustomization" | "Component" => continue,
                "Namespace" => round_trip::<core::Namespace>(doc, &where_),
                "ServiceAccount" => round_trip::<core::ServiceAccount>(doc, &where_),
                "Service" => round_trip::<core::Service>(doc, &where_),
                "ClusterRole" => round_trip::<rbac::ClusterRole>(doc, &where_),
                "ClusterRoleBinding" => round_trip::<rbac::ClusterRoleBinding>(doc, &where_),
                "Role" => round_trip::<rbac::Role>(doc, &where_),
                "CustomResourceDefinition" => round_trip::<
                    k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
                >(doc, &where_),
                "RoleBinding" => round_trip::<rbac::RoleBinding>(doc, &where_),
                "Deployment" => round_trip::<apps::Deployment>(doc, &where_),
                "DaemonSet" => round_trip::<apps::DaemonSet>(doc, &where_),
                "EndpointSlice" => round_trip::<disc::EndpointSlice>(doc, &where_),
                "GatewayClass" => round_trip::<gatewayclasses::GatewayClass>(doc, &where_),
                "Gateway" => round_trip::<gateways::Gateway>(doc, &where_),
                "HTTPRoute" => round_trip::<httproutes::HttpRoute>(doc, &where_),
                "PodDisruptionBudget" => {
                    round_trip::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(doc, &where_)
                }
                "HorizontalPodAutoscaler" => round_trip::<
                    k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
                >(doc, &where_),
                "NetworkPolicy" => round_trip::<
                    k8s_openapi::api::networking::v1::NetworkPolicy,
                >(doc, &where_),
                // Prometheus Operator kinds: no Rust types, checked field by field.
                "ServiceMonitor" => operator::check_service_monitor(doc, &where_),
                "PrometheusRule" => operator::check_prometheus_rule(doc, &where_),
                other => panic!("{where_}: no typed check for kind {other}"),
            }
            kinds.insert(kind);
        }
    }
    for k in [
        "ClusterRole",
        "Deployment",
        "DaemonSet",
        "GatewayClass",
        "Gateway",
        "HTTPRoute",
    ] {
        assert!(kinds.contains(k), "no {k} in deploy/");
    }
}

#[test]
fn round_trip_check_catches_unknown_fields() {
    let doc: Value = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "x"}, "spec": {"finalizers": ["a"]}, "specc": 1});
    let r =
        std::panic::catch_unwind(|| round_trip::<k8s_openapi::api::core::v1::Namespace>(&doc, "t"));
    assert!(r.is_err(), "a misspelt field must be reported");
}

#[test]
fn kustomizations_list_existing_files() {
    let mut files = Vec::new();
    yaml_files(&deploy_dir(), &mut files);
    let kustomizations: Vec<_> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "kustomization.yaml"))
        .collect();
    assert!(
        kustomizations
            .iter()
            .any(|k| k.parent() == Some(&deploy_dir())),
        "deploy/kustomization.yaml is missing"
    );
    for k in kustomizations {
        let dir = k.parent().expect("has a parent");
        let doc = &documents(k)[0];
        let component = doc["kind"] == "Component";
        let resources = doc["resources"].as_array().cloned().unwrap_or_default();
        assert!(
            component || !resources.is_empty(),
            "{}: no resources",
            k.display()
        );
        let components = doc["components"].as_array().into_iter().flatten();
        for r in resources.iter().chain(components) {
            let p = dir.join(r.as_str().expect("string entry"));
            let ok = p.is_file() || p.join("kustomization.yaml").is_file();
            assert!(
                ok,
                "{}: lists {} which does not exist",
                k.display(),
                p.display()
            );
        }
        for generator in doc["configMapGenerator"].as_array().into_iter().flatten() {
            for f in generator["files"].as_array().expect("generator files") {
                let p = dir.join(f.as_str().expect("string entry"));
                assert!(
                    p.is_file(),
                    "{}: generates from {}, which does not exist",
                    k.display(),
                    p.display()
                );
            }
        }
    }
    // The standalone example is not for a cluster: no kustomization reaches it.
    let top = &documents(&deploy_dir().join("kustomization.yaml"))[0];
    let listed = top["resources"].as_array().expect("resources list");
    assert!(listed.iter().all(|r| r.as_str() != Some("standalone")));
}

/// The ClusterRole lets the controller list and watch every kind its `Snapshot` declares, and
/// get the objects of referenced kinds, so a new kind cannot ship without its permission.
#[test]
fn the_cluster_role_covers_every_declared_kind() {
    use edgeplane::kinds::{KindSet, WatchMode};
    use edgeplane::snapshot::Snapshot;

    let rbac = deploy_dir().join("base/rbac.yaml");
    let role = documents(&rbac)
        .into_iter()
        .find(|d| d["kind"] == "ClusterRole")
        .expect("a ClusterRole in deploy/base/rbac.yaml");
    let allows = |group: &str, resource: &str, verb: &str| {
        let has = |rule: &Value, field: &str, want: &str| {
            rule[field]
                .as_array()
                .is_some_and(|v| v.iter().any(|x| x == want || x == "*"))
        };
        role["rules"].as_array().is_some_and(|rules| {
            rules.iter().any(|r| {
                has(r, "apiGroups", group) && has(r, "resources", resource) && has(r, "verbs", verb)
            })
        })
    };
    for kind in Snapshot::describe() {
        let mut verbs = vec!["list", "watch"];
        if kind.watch == WatchMode::Referenced {
            verbs.push("get");
        }
        for verb in verbs {
            assert!(
                allows(&kind.group, &kind.plural, verb),
                "{}: the ClusterRole does not allow {verb} on {} (group {:?}) for Snapshot::{}",
                rbac.display(),
                kind.plural,
                kind.group,
                kind.field
            );
        }
    }
}

/// Every permission the ClusterRole and the namespaced Role grant, as `(role kind, group,
/// resource, verb, resourceNames)`: exactly the list below, which says why each is needed. A
/// wildcard or a new permission fails here until it is reviewed and listed (least privilege,
/// docs/security.md).
#[test]
fn the_roles_grant_nothing_beyond_what_the_controller_uses() {
    let rbac = deploy_dir().join("base/rbac.yaml");
    let mut granted = std::collections::BTreeSet::new();
    for doc in documents(&rbac) {
        let role = doc["kind"].as_str().unwrap_or_default().to_owned();
        if role != "ClusterRole" && role != "Role" {
            continue;
        }
        for rule in doc["rules"].as_array().expect("rules") {
            let list = |field: &str| -> Vec<String> {
                rule[field]
                    .as_array()
                    .unwrap_or_else(|| panic!("{role} rule without {field}: {rule}"))
                    .iter()
                    .map(|v| v.as_str().expect("a string").to_owned())
                    .collect()
            };
            assert!(
                rule.get("nonResourceURLs").is_none(),
                "unexpected rule shape in {role}: {rule}"
            );
            let names = if rule.get("resourceNames").is_some() {
                list("resourceNames").join(",")
            } else {
                String::new()
            };
            for group in list("apiGroups") {
                for resource in list("resources") {
                    for verb in list("verbs") {
                        granted.insert((
                            role.clone(),
                            group.clone(),
                            resource.clone(),
                            verb,
                            names.clone(),
                        ));
                    }
                }
            }
        }
    }
    let gw = "gateway.networking.k8s.io";
    let mut expected = std::collections::BTreeSet::new();
    let mut named = |role: &str, group: &str, resources: &[&str], verbs: &[&str], names: &str| {
        for r in resources {
            for v in verbs {
                expected.insert((
                    role.to_owned(),
                    group.to_owned(),
                    (*r).to_owned(),
                    (*v).to_owned(),
                    names.to_owned(),
                ));
            }
        }
    };
    // edgeplane's CRDs (caBundle) and the webhook certificate's Secret, by name only.
    let crds = edgeplane::provider::kube::WebhookCertOptions::new("ns", ("ns", "svc"))
        .crds
        .join(",");
    named(
        "ClusterRole",
        "apiextensions.k8s.io",
        &["customresourcedefinitions"],
        &["get", "list", "watch", "patch"],
        &crds,
    );
    named(
        "Role",
        "",
        &["secrets"],
        &["update"],
        edgeplane::provider::kube::crd_bundle::DEFAULT_SECRET,
    );
    let mut grant = |role: &str, group: &str, resources: &[&str], verbs: &[&str]| {
        named(role, group, resources, verbs, "")
    };
    // Read what the translator reads (Secrets: metadata watched, referenced ones fetched).
    let read = ["get", "list", "watch"];
    grant(
        "ClusterRole",
        gw,
        &[
            "gatewayclasses",
            "gateways",
            "listenersets",
            "httproutes",
            "grpcroutes",
            "tlsroutes",
            "tcproutes",
            "udproutes",
            "referencegrants",
            "backendtlspolicies",
        ],
        &read,
    );
    grant(
        "ClusterRole",
        "",
        &["namespaces", "services", "secrets", "configmaps"],
        &read,
    );
    grant(
        "ClusterRole",
        "discovery.k8s.io",
        &["endpointslices"],
        &["list", "watch"],
    );
    // Ingresses and IngressClasses, and the Ingress status the leader writes.
    grant(
        "ClusterRole",
        "networking.k8s.io",
        &["ingresses", "ingressclasses"],
        &read,
    );
    grant(
        "ClusterRole",
        "networking.k8s.io",
        &["ingresses/status"],
        &["patch", "update"],
    );
    // Each Gateway's Service in the Gateway's namespace (created, patched, deleted: the
    // keeper in provider/kube/gateway_service.rs) and its EndpointSlices (created, replaced,
    // deleted).
    grant(
        "ClusterRole",
        "",
        &["services"],
        &["create", "patch", "delete"],
    );
    grant(
        "ClusterRole",
        "discovery.k8s.io",
        &["endpointslices"],
        &["create", "update", "delete"],
    );
    // Status of the objects the controller owns, and finalizers (a patch of the object).
    grant(
        "ClusterRole",
        gw,
        &[
            "gatewayclasses/status",
            "gateways/status",
            "listenersets/status",
            "httproutes/status",
            "grpcroutes/status",
            "tlsroutes/status",
            "tcproutes/status",
            "udproutes/status",
            "backendtlspolicies/status",
        ],
        &["patch", "update"],
    );
    grant(
        "ClusterRole",
        gw,
        &["gatewayclasses", "gateways"],
        &["patch"],
    );
    grant(
        "ClusterRole",
        gw,
        &["gatewayclasses/finalizers", "gateways/finalizers"],
        &["update"],
    );
    grant(
        "ClusterRole",
        "events.k8s.io",
        &["events"],
        &["create", "patch"],
    );
    // edgeplane's own kinds, and the TrafficPolicy status the leader writes.
    grant(
        "ClusterRole",
        "edgeplane.dev",
        &["proxyconfigs", "trafficpolicies"],
        &read,
    );
    grant(
        "ClusterRole",
        "edgeplane.dev",
        &["trafficpolicies/status"],
        &["patch", "update"],
    );
    // In the controller's namespace only: the leader Lease.
    grant(
        "Role",
        "coordination.k8s.io",
        &["leases"],
        &["get", "create", "update"],
    );
    // The webhook certificate's Secret is created once (create cannot be limited by name).
    grant("Role", "", &["secrets"], &["create"]);
    let extra: Vec<_> = granted.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&granted).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{}: granted but not listed here {extra:?}; listed but not granted {missing:?}",
        rbac.display()
    );
}

/// The webhook Service in the controller's namespace sends port 443 to the container port the
/// Deployment and the DaemonSet open for `--webhook-addr`; the CRDs' `clientConfig` names it.
#[test]
fn the_webhook_service_reaches_the_webhook_port_of_every_workload() {
    let svc = documents(&deploy_dir().join("base/webhook-service.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "Service")
        .expect("the webhook Service");
    assert_eq!(svc["metadata"]["namespace"], "edgeplane-system");
    assert_eq!(svc["metadata"]["name"], "edgeplane-webhook");
    let port = &svc["spec"]["ports"][0];
    assert_eq!(port["port"], 443);
    let target = port["targetPort"].as_str().expect("a named target port");
    let base = &documents(&deploy_dir().join("base/kustomization.yaml"))[0];
    assert!(base["resources"]
        .as_array()
        .is_some_and(|r| r.iter().any(|x| x == "webhook-service.yaml")));
    for file in ["deployment/deployment.yaml", "daemonset/daemonset.yaml"] {
        let workload = &documents(&deploy_dir().join(file))[0];
        let pod = &workload["spec"]["template"];
        assert_eq!(
            svc["spec"]["selector"]["app.kubernetes.io/name"],
            pod["metadata"]["labels"]["app.kubernetes.io/name"],
            "{file}"
        );
        let container = &pod["spec"]["containers"][0];
        let opened = container["ports"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == target))
            .unwrap_or_else(|| panic!("{file}: no container port {target}"));
        let listen = flag(container, "--webhook-addr").unwrap_or("0.0.0.0:9443");
        let port: u16 = listen
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .expect("--webhook-addr has a port");
        assert_eq!(opened["containerPort"], port, "{file}");
    }
}

/// The value of `--{name}=` in a container's args.
fn flag<'a>(container: &'a Value, name: &str) -> Option<&'a str> {
    let prefix = format!("{name}=");
    container["args"]
        .as_array()?
        .iter()
        .find_map(|x| x.as_str()?.strip_prefix(prefix.as_str()))
}

/// Neither workload binds the admin server or the webhook on a wildcard address (with
/// `hostNetwork` that would be every address of the node): both name the pod IP, which the
/// downward API puts in `POD_IP`; the dashboard stays on loopback. The opt-in NetworkPolicy
/// opens the webhook port to one source range only.
#[test]
fn admin_and_webhook_bind_the_pod_ip_not_a_wildcard() {
    let mut host_network = false;
    for file in ["deployment/deployment.yaml", "daemonset/daemonset.yaml"] {
        let workload = &documents(&deploy_dir().join(file))[0];
        let pod = &workload["spec"]["template"]["spec"];
        host_network |= pod["hostNetwork"] == true;
        let container = &pod["containers"][0];
        for name in ["--admin-addr", "--webhook-addr"] {
            // Absent, the flag's default would apply: the webhook's is 0.0.0.0.
            let value = flag(container, name).unwrap_or_else(|| panic!("{file}: no {name}"));
            let host = value.rsplit_once(':').map(|(h, _)| h).unwrap_or(value);
            assert_eq!(host, "$(POD_IP)", "{file}: {name}={value}");
        }
        // The dashboard holds the whole configuration: loopback only, for port-forward.
        assert_eq!(
            flag(container, "--dashboard-addr"),
            Some("127.0.0.1:9902"),
            "{file}"
        );
        let pod_ip = container["env"]
            .as_array()
            .and_then(|e| e.iter().find(|v| v["name"] == "POD_IP"))
            .unwrap_or_else(|| panic!("{file}: no POD_IP"));
        assert_eq!(
            pod_ip["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP",
            "{file}"
        );
        let args = serde_json::to_string(&container["args"]).unwrap();
        assert!(
            !args.contains("-addr=0.0.0.0") && !args.contains("-addr=[::]"),
            "{args}"
        );
    }
    assert!(host_network, "the DaemonSet runs on host networking");
    let policy = &documents(&deploy_dir().join("networkpolicy/webhook-networkpolicy.yaml"))[0];
    let webhook_rules: Vec<&Value> = policy["spec"]["ingress"]
        .as_array()
        .expect("ingress rules")
        .iter()
        .filter(|r| {
            r["ports"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["port"] == 9443))
        })
        .collect();
    assert_eq!(webhook_rules.len(), 1, "{webhook_rules:?}");
    assert!(
        webhook_rules[0]["from"][0]["ipBlock"]["cidr"].is_string(),
        "the webhook port is open to one source range only"
    );
}

/// The install applies the CRDs the types generate (`crds/edgeplane.yaml`, through the
/// `crds/` kustomization), so a change of the types cannot ship without them; they convert
/// through the webhook Service.
#[test]
fn the_install_carries_the_generated_crds() {
    let crds_dir = deploy_dir().join("../crds");
    let base = &documents(&deploy_dir().join("base/kustomization.yaml"))[0];
    assert!(base["resources"]
        .as_array()
        .is_some_and(|r| r.iter().any(|x| x == "../../crds")));
    let listed = &documents(&crds_dir.join("kustomization.yaml"))[0];
    assert_eq!(listed["resources"], serde_json::json!(["edgeplane.yaml"]));
    let generated = edgeplane::kinds::crd::generate::crds_yaml().expect("CRDs generate");
    let on_disk = std::fs::read_to_string(crds_dir.join("edgeplane.yaml")).expect("CRDs file");
    assert!(on_disk == generated, "crds/edgeplane.yaml is out of date");
    let svc = &documents(&deploy_dir().join("base/webhook-service.yaml"))[0];
    let crds = documents(&crds_dir.join("edgeplane.yaml"));
    assert_eq!(crds.len(), 2);
    for (i, crd) in crds.iter().enumerate() {
        round_trip::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(crd, &format!("crds/edgeplane.yaml#{i}"));
        let service = &crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"];
        assert_eq!(service["namespace"], svc["metadata"]["namespace"]);
        assert_eq!(service["name"], svc["metadata"]["name"]);
        assert_eq!(service["port"], svc["spec"]["ports"][0]["port"]);
        assert_eq!(service["path"], edgeplane::webhook::CONVERT_PATH);
    }
}

#[test]
fn the_license_file_is_the_license_cargo_toml_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let named = manifest
        .lines()
        .find_map(|l| l.strip_prefix("license = "))
        .map(|v| v.trim_matches('"'))
        .expect("Cargo.toml names a license");
    let text = std::fs::read_to_string(root.join("LICENSE")).expect("a LICENSE file");
    let heading: Vec<&str> = text.split_whitespace().take(4).collect();
    let expected = match named {
        "Apache-2.0" => ["Apache", "License", "Version", "2.0,"],
        other => panic!("no LICENSE heading known for {other}"),
    };
    assert_eq!(heading, expected, "LICENSE does not hold {named}");
    assert!(text.contains("TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION"));
}
