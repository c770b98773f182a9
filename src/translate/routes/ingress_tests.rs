//! The lowering of an Ingress to an HTTPRoute: hosts, rules and their hosts, path types.

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;

use super::{lower, lowered_rules};
use crate::translate::routes::http_like::HttpLike;

fn ingress(spec: serde_json::Value) -> Ingress {
    serde_json::from_value(json!({
        "metadata": {"name": "i", "namespace": "ns",
                     "annotations": {"edgeplane.dev/serving-gateway": "gns/gw"}},
        "spec": spec,
    }))
    .expect("Ingress")
}

#[test]
fn rules_paths_and_default_backend_lower_in_order_with_their_hosts() {
    let svc = json!({"service": {"name": "s", "port": {"number": 80}}});
    let i = ingress(json!({
        "defaultBackend": svc,
        "rules": [
            {"host": "a.test", "http": {"paths": [
                {"path": "/x", "pathType": "Exact", "backend": svc},
                {"path": "/y", "pathType": "ImplementationSpecific", "backend": svc}]}},
            {"http": {"paths": [{"pathType": "Prefix", "backend": svc}]}},
        ],
    }));
    let hosts = i.rule_hosts();
    assert_eq!(hosts, ["a.test", "a.test", "*", "a.test", "*"]);
    let route = lower(&i);
    let spec = serde_json::to_value(&route.spec).expect("spec");
    assert_eq!(spec["hostnames"], json!(["*", "a.test"]));
    assert_eq!(spec["parentRefs"][0]["name"], "gw");
    assert_eq!(spec["parentRefs"][0]["namespace"], "gns");
    let rules = spec["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 5);
    assert_eq!(
        rules[0]["matches"][0]["path"],
        json!({"type": "Exact", "value": "/x"})
    );
    assert_eq!(
        rules[1]["matches"][0]["path"],
        json!({"type": "PathPrefix", "value": "/y"})
    );
    assert_eq!(
        rules[2]["matches"][0]["path"],
        json!({"type": "PathPrefix", "value": "/"})
    );
    assert!(rules[3].get("matches").is_none());
    assert_eq!(rules[3]["backendRefs"][0]["port"], 80);
    assert_eq!(lowered_rules(&i).len(), 5);
}

#[test]
fn a_resource_backend_keeps_its_kind_for_resolution_to_refuse() {
    let i = ingress(json!({"defaultBackend": {"resource": {"kind": "Bucket", "name": "b"}}}));
    let spec = serde_json::to_value(&lower(&i).spec).expect("spec");
    assert_eq!(spec["rules"][0]["backendRefs"][0]["kind"], "Bucket");
    assert_eq!(spec["hostnames"], json!(["*"]));
}
