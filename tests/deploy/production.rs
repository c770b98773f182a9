//! What a production install expects of `deploy/`: the image set in one place (the
//! `deploy/image` component) and used by every workload, replicas spread over nodes and zones
//! with a PodDisruptionBudget and a surge-only rolling update, the HPA overlay owning the
//! replica count, and the ports the Dockerfile and the NetworkPolicy name being the ones the
//! controller serves.

use std::path::Path;

use serde_json::Value;

use super::{deploy_dir, documents, flag, yaml_files};

/// The kustomization directories that install or run the edgeplane image.
const WORKLOAD_ROOTS: [&str; 3] = ["deployment", "daemonset", "example"];

#[test]
fn the_image_is_set_in_one_place() {
    let component = &documents(&deploy_dir().join("image/kustomization.yaml"))[0];
    assert_eq!(component["kind"], "Component");
    assert_eq!(
        component["images"],
        serde_json::json!([{"name": "edgeplane", "newTag": env!("CARGO_PKG_VERSION")}]),
        "the image's tag is the crate's version"
    );
    let mut files = Vec::new();
    yaml_files(&deploy_dir(), &mut files);
    let mut images = 0;
    for f in &files {
        for doc in documents(f) {
            if doc["kind"] == "Kustomization" {
                assert!(
                    doc.get("images").is_none(),
                    "{}: images are set in deploy/image only",
                    f.display()
                );
            }
            let containers = doc["spec"]["template"]["spec"]["containers"].as_array();
            for c in containers.into_iter().flatten() {
                // Untagged, so that the component (or a user's overlay) decides.
                assert_eq!(c["image"], "edgeplane", "{}", f.display());
                images += 1;
            }
        }
    }
    assert!(images >= 3, "workloads found: {images}");
    for root in WORKLOAD_ROOTS {
        let k = &documents(&deploy_dir().join(root).join("kustomization.yaml"))[0];
        assert!(
            k["components"]
                .as_array()
                .is_some_and(|c| c.iter().any(|x| x == "../image")),
            "deploy/{root} does not include the image component"
        );
    }
}

fn deployment() -> Value {
    documents(&deploy_dir().join("deployment/deployment.yaml")).remove(0)
}

#[test]
fn replicas_spread_over_nodes_and_zones_and_a_budget_keeps_all_but_one() {
    let d = deployment();
    let pod_labels = &d["spec"]["template"]["metadata"]["labels"];
    let replicas = d["spec"]["replicas"].as_u64().expect("a replica count");
    assert!(replicas >= 2, "one replica cannot survive a node drain");
    let rolling = &d["spec"]["strategy"]["rollingUpdate"];
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(
        rolling["maxUnavailable"], 0,
        "a rollout never has fewer ready replicas"
    );
    assert_eq!(rolling["maxSurge"], 1);
    let spread = d["spec"]["template"]["spec"]["topologySpreadConstraints"]
        .as_array()
        .expect("topologySpreadConstraints");
    let keys: Vec<&str> = spread
        .iter()
        .filter_map(|c| c["topologyKey"].as_str())
        .collect();
    assert_eq!(
        keys,
        ["kubernetes.io/hostname", "topology.kubernetes.io/zone"]
    );
    for c in spread {
        assert_eq!(c["labelSelector"]["matchLabels"], *pod_labels);
        // Soft: a single-node or single-zone cluster still schedules every replica.
        assert_eq!(c["whenUnsatisfiable"], "ScheduleAnyway");
    }

    let k = &documents(&deploy_dir().join("deployment/kustomization.yaml"))[0];
    assert_eq!(
        k["resources"],
        serde_json::json!(["deployment.yaml", "pdb.yaml"])
    );
    let pdb = &documents(&deploy_dir().join("deployment/pdb.yaml"))[0];
    assert_eq!(pdb["kind"], "PodDisruptionBudget");
    assert_eq!(pdb["metadata"]["namespace"], d["metadata"]["namespace"]);
    assert_eq!(pdb["spec"]["selector"]["matchLabels"], *pod_labels);
    let max_unavailable = pdb["spec"]["maxUnavailable"].as_u64().expect("a count");
    assert!(max_unavailable >= 1 && max_unavailable < replicas);
}

#[test]
fn the_hpa_overlay_scales_the_deployment_and_owns_its_replica_count() {
    let k = &documents(&deploy_dir().join("hpa/kustomization.yaml"))[0];
    let top = &documents(&deploy_dir().join("kustomization.yaml"))[0];
    // The same install as deploy/, plus the HPA.
    let same: Vec<String> = top["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| format!("../{}", r.as_str().expect("a path")))
        .chain(["hpa.yaml".to_owned()])
        .collect();
    assert_eq!(k["resources"], serde_json::json!(same));
    let patch = k["patches"][0]["patch"].as_str().expect("a patch");
    assert!(patch.contains("op: remove") && patch.contains("path: /spec/replicas"));
    let hpa = &documents(&deploy_dir().join("hpa/hpa.yaml"))[0];
    let d = deployment();
    assert_eq!(hpa["spec"]["scaleTargetRef"]["kind"], "Deployment");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], d["metadata"]["name"]);
    assert_eq!(hpa["metadata"]["namespace"], d["metadata"]["namespace"]);
    assert!(hpa["spec"]["minReplicas"].as_u64() >= Some(2));
    // Utilization is relative to the request: without one the HPA cannot scale.
    assert!(
        d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"].is_string()
    );
}

/// The Dockerfile exposes the admin and webhook ports the workloads bind and the first
/// Gateway listener target port the controller hands out.
#[test]
fn the_dockerfile_exposes_the_ports_edgeplane_serves() {
    let dockerfile =
        std::fs::read_to_string(deploy_dir().join("../Dockerfile")).expect("Dockerfile");
    let exposed: Vec<&str> = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("EXPOSE "))
        .flat_map(str::split_whitespace)
        .collect();
    let d = deployment();
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    let port_of = |name: &str| {
        let addr = flag(container, name).unwrap_or_else(|| panic!("no {name}"));
        addr.rsplit_once(':').expect("a port").1.to_owned()
    };
    let defaults = edgeplane::provider::kube::KubeOptions::new("c", "ns", "pod");
    let want = [
        format!("{}/tcp", port_of("--admin-addr")),
        format!("{}/tcp", port_of("--webhook-addr")),
        format!("{}/tcp", defaults.port_base),
    ];
    assert_eq!(exposed, want);
    assert!(
        flag(container, "--gateway-port-base").is_none(),
        "the default applies"
    );
}

/// The NetworkPolicy opens exactly the ports the replicas serve: the webhook (to one source
/// range), the admin port, and the Gateway target port range the controller allocates from.
#[test]
fn the_network_policy_opens_the_ports_the_replicas_serve() {
    let policy = &documents(&deploy_dir().join("networkpolicy/webhook-networkpolicy.yaml"))[0];
    let defaults = edgeplane::provider::kube::KubeOptions::new("c", "ns", "pod");
    let last = u32::from(defaults.port_base) + u32::from(defaults.port_count) - 1;
    let open: Vec<Value> = policy["spec"]["ingress"]
        .as_array()
        .expect("rules")
        .iter()
        .flat_map(|r| r["ports"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(
        open,
        serde_json::json!([
            {"protocol": "TCP", "port": 9443},
            {"protocol": "TCP", "port": 9901},
            {"protocol": "TCP", "port": defaults.port_base, "endPort": last},
            {"protocol": "UDP", "port": defaults.port_base, "endPort": last},
        ])
        .as_array()
        .cloned()
        .unwrap_or_default()
    );
    let d = deployment();
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    for (name, port) in [("--webhook-addr", "9443"), ("--admin-addr", "9901")] {
        assert!(
            flag(container, name).is_some_and(|a| a.ends_with(&format!(":{port}"))),
            "{name}"
        );
    }
    assert!(Path::new(&deploy_dir().join("networkpolicy/kustomization.yaml")).is_file());
}
