//! Labels and annotations of a Gateway Service: the Gateway's `spec.infrastructure` labels and
//! annotations propagated onto it, the record of which keys were propagated, and the merge
//! patch that keeps them current. Pure; `gateway_service` does the writes.

use std::collections::BTreeMap;

use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use serde_json::json;

use super::binding::{
    GATEWAY_CLASS_LABEL, GATEWAY_LABEL, GATEWAY_NAME_LABEL, INFRASTRUCTURE_KEYS, MANAGED_BY_LABEL,
};

/// The labels edgeplane sets itself on a Gateway Service; a propagated key of the same name
/// loses.
const OWN_LABELS: [&str; 4] = [
    GATEWAY_LABEL,
    MANAGED_BY_LABEL,
    GATEWAY_NAME_LABEL,
    GATEWAY_CLASS_LABEL,
];

/// The Service's labels and annotations: `config_annotations` (the Gateway's ProxyConfig
/// `service.annotations`), then the Gateway's `spec.infrastructure.labels` and `annotations`
/// (Gateway API "GatewayInfrastructurePropagation"), which win over the ProxyConfig's, then
/// edgeplane's own keys, which win over a propagated key of the same name: [`GATEWAY_LABEL`] is
/// how every replica finds the Service, so a Gateway must not be able to point it elsewhere;
/// [`GATEWAY_NAME_LABEL`] and [`GATEWAY_CLASS_LABEL`] are how Gateway API tools find it.
/// Both kinds of propagated keys are recorded, so keys dropped from either are removed.
pub fn service_metadata(
    gateway: &Gateway,
    gateway_label: &str,
    config_annotations: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let infra = gateway.spec.infrastructure.as_ref();
    let mut labels = infra.and_then(|i| i.labels.clone()).unwrap_or_default();
    let mut annotations = config_annotations.clone();
    annotations.extend(
        infra
            .and_then(|i| i.annotations.clone())
            .unwrap_or_default(),
    );
    labels.insert(GATEWAY_LABEL.to_owned(), gateway_label.to_owned());
    labels.insert(MANAGED_BY_LABEL.to_owned(), "edgeplane".to_owned());
    labels.insert(
        GATEWAY_NAME_LABEL.to_owned(),
        gateway.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(
        GATEWAY_CLASS_LABEL.to_owned(),
        gateway.spec.gateway_class_name.clone(),
    );
    annotations.remove(INFRASTRUCTURE_KEYS);
    let own = |k: &String| !OWN_LABELS.contains(&k.as_str());
    let record = json!({
        "labels": labels.keys().filter(|k| own(k)).collect::<Vec<_>>(),
        "annotations": annotations.keys().collect::<Vec<_>>(),
    });
    if labels.keys().any(own) || !annotations.is_empty() {
        annotations.insert(INFRASTRUCTURE_KEYS.to_owned(), record.to_string());
    }
    (labels, annotations)
}

/// Label and annotation keys a Service's [`INFRASTRUCTURE_KEYS`] record lists.
fn recorded_keys(svc: &Service) -> (Vec<String>, Vec<String>) {
    let record: Option<serde_json::Value> = svc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(INFRASTRUCTURE_KEYS))
        .and_then(|r| serde_json::from_str(r).ok());
    let keys = |field: &str| -> Vec<String> {
        record
            .as_ref()
            .and_then(|r| r[field].as_array())
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect()
    };
    (keys("labels"), keys("annotations"))
}

/// The merge patch of `metadata` that brings `current` to `desired`: every desired label and
/// annotation, owner references, and `null` for propagated keys the Gateway no longer has.
pub fn metadata_patch(current: &Service, desired: &Service) -> serde_json::Value {
    let (old_labels, old_annotations) = recorded_keys(current);
    let merged = |want: &Option<BTreeMap<String, String>>, old: Vec<String>| {
        let want = want.clone().unwrap_or_default();
        let mut out = serde_json::Map::new();
        for k in old.into_iter().filter(|k| !want.contains_key(k)) {
            out.insert(k, serde_json::Value::Null);
        }
        for (k, v) in want {
            out.insert(k, v.into());
        }
        out
    };
    let mut annotations = merged(&desired.metadata.annotations, old_annotations);
    if !desired
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(INFRASTRUCTURE_KEYS))
    {
        annotations.insert(INFRASTRUCTURE_KEYS.to_owned(), serde_json::Value::Null);
    }
    json!({
        "labels": merged(&desired.metadata.labels, old_labels),
        "annotations": annotations,
        "ownerReferences": desired.metadata.owner_references,
    })
}

/// True when every key of `want` has the same value in `have`.
pub fn contains_all(
    have: &Option<BTreeMap<String, String>>,
    want: &Option<BTreeMap<String, String>>,
) -> bool {
    want.iter()
        .flatten()
        .all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::kube::service_spec::{desired_service, service_matches, ServiceOptions};

    #[test]
    fn infrastructure_labels_and_annotations_propagate_without_overriding_ours() {
        let opts = ServiceOptions {
            namespace: "sys".into(),
            service_type: "ClusterIP".into(),
            replicas_service: "edgeplane".into(),
            port_base: 10080,
            port_count: 10,
        };
        let with = |labels: serde_json::Value, annotations: serde_json::Value| -> Gateway {
            serde_json::from_value(json!({
                "metadata": {"namespace": "web", "name": "gw"},
                "spec": {"gatewayClassName": "c", "listeners": [],
                    "infrastructure": {"labels": labels, "annotations": annotations}}
            }))
            .unwrap()
        };
        let ports = BTreeMap::from([(80, 10080)]);
        let gw = with(
            json!({"team": "web", GATEWAY_LABEL: "evil.other", GATEWAY_NAME_LABEL: "other"}),
            json!({"cost-center": "42"}),
        );
        let svc = desired_service(&gw, &ports, &opts);
        let labels = svc.metadata.labels.clone().unwrap();
        assert_eq!(labels["team"], "web");
        assert_eq!(labels[GATEWAY_LABEL], "web.gw", "our label wins");
        assert_eq!(
            labels[GATEWAY_NAME_LABEL], "gw",
            "the Gateway API label wins"
        );
        assert_eq!(labels[GATEWAY_CLASS_LABEL], "c");
        assert_eq!(labels[MANAGED_BY_LABEL], "edgeplane");
        let annotations = svc.metadata.annotations.clone().unwrap();
        assert_eq!(annotations["cost-center"], "42");
        assert!(service_matches(&svc, &svc));

        // Dropping a label and changing an annotation: the Service no longer matches, and the
        // patch removes the dropped key and sets the new value.
        let changed = desired_service(&with(json!({}), json!({"cost-center": "7"})), &ports, &opts);
        assert!(!service_matches(&svc, &changed));
        let patch = metadata_patch(&svc, &changed);
        assert_eq!(patch["labels"]["team"], serde_json::Value::Null);
        assert_eq!(patch["labels"][GATEWAY_LABEL], "web.gw");
        assert_eq!(patch["annotations"]["cost-center"], "7");
        // A label someone else put on the Service is neither required nor removed.
        let mut foreign = changed.clone();
        foreign
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("cloud".into(), "x".into());
        assert!(service_matches(&foreign, &changed));
        assert!(metadata_patch(&foreign, &changed)["labels"]
            .get("cloud")
            .is_none());
        // No infrastructure at all: no record annotation, and an old record is removed.
        let plain = desired_service(&with(json!({}), json!({})), &ports, &opts);
        assert!(plain.metadata.annotations.is_none());
        assert!(!service_matches(&svc, &plain));
        let patch = metadata_patch(&svc, &plain);
        assert_eq!(
            patch["annotations"][INFRASTRUCTURE_KEYS],
            serde_json::Value::Null
        );
        assert_eq!(patch["annotations"]["cost-center"], serde_json::Value::Null);
    }
}
