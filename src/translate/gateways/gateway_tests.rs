//! A Gateway's model and status: placement in a cluster, addresses, supported features.

use super::*;

fn gateway(yaml: &str) -> Gateway {
    serde_yaml_ng::from_str(yaml).unwrap()
}

#[test]
fn cluster_placement_binds_mapped_ports_and_waits_for_a_service() {
    use crate::snapshot::{GatewayBinding, Snapshot};
    use std::sync::Arc;
    let class: GatewayClass =
        serde_yaml_ng::from_str("metadata: {name: c, generation: 1}\nspec: {controllerName: x/y}")
            .unwrap();
    let gw = |name: &str| {
        Arc::new(gateway(&format!(
            "metadata: {{name: {name}, namespace: ns, generation: 1}}\nspec:\n  gatewayClassName: c\n  addresses: [{{value: 10.1.1.1}}]\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP}}\n  - {{name: alt, port: 81, protocol: HTTP}}\n"
        )))
    };
    let binding = GatewayBinding {
        ports: [(80, 10080)].into(),
        addresses: vec![("Hostname".into(), "lb.example".into())],
        assigned: vec!["10.1.1.1".parse().unwrap()],
    };
    let snapshot = Snapshot {
        gateway_classes: vec![Arc::new(class)],
        gateways: vec![gw("mapped"), gw("pending")],
        gateway_bindings: Some(Arc::new(
            [(("ns".to_owned(), "mapped".to_owned()), binding)].into(),
        )),
        ..Snapshot::default()
    };
    let options = TranslateOptions {
        ingress: Default::default(),
        controller_name: "x/y".into(),
        bind_address: "127.0.0.9".parse().unwrap(),
        now: jiff::Timestamp::now(),
        generation: 1,
        port_map: Default::default(),
        capabilities: crate::translate::Capabilities::STANDALONE,
    };
    let t = crate::translate::translate(&snapshot, &options);
    let sockets: Vec<String> = t.table.listeners.keys().map(|a| a.to_string()).collect();
    assert_eq!(sockets, ["127.0.0.9:10080"]);
    let mapped = t
        .status
        .get(crate::status::ObjectKind::Gateway, Some("ns"), "mapped")
        .unwrap()
        .status
        .to_json();
    assert_eq!(
        mapped["addresses"],
        serde_json::json!([{"type": "IPAddress", "value": "10.1.1.1"}]),
        "the static address, once the Service has it"
    );
    assert_eq!(mapped["conditions"][1]["status"], "True");
    assert_eq!(
        mapped["listeners"][1]["conditions"][1]["reason"],
        Reason::Pending.as_str()
    );
    let pending = t
        .status
        .get(crate::status::ObjectKind::Gateway, Some("ns"), "pending")
        .unwrap()
        .status
        .to_json();
    assert_eq!(pending["conditions"][1]["reason"], Reason::Pending.as_str());
    assert!(pending.get("addresses").is_none());
}

#[test]
fn cluster_static_addresses_wait_for_the_service_and_supported_features_follow_the_mode() {
    use crate::snapshot::{GatewayBinding, Snapshot};
    use std::sync::Arc;
    let class: GatewayClass =
        serde_yaml_ng::from_str("metadata: {name: c, generation: 1}\nspec: {controllerName: x/y}")
            .unwrap();
    let gw = |addresses: &str| {
        Arc::new(gateway(&format!(
            "metadata: {{name: g, namespace: ns, generation: 1}}\nspec:\n  gatewayClassName: c\n  addresses: {addresses}\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP}}\n"
        )))
    };
    let run = |gateway: Arc<Gateway>, assigned: &[&str], capabilities| {
        let binding = GatewayBinding {
            ports: [(80, 10080)].into(),
            addresses: vec![("IPAddress".into(), "10.96.0.1".into())],
            assigned: assigned.iter().map(|a| a.parse().unwrap()).collect(),
        };
        let snapshot = Snapshot {
            gateway_classes: vec![Arc::new(class.clone())],
            gateways: vec![gateway],
            gateway_bindings: Some(Arc::new(
                [(("ns".to_owned(), "g".to_owned()), binding)].into(),
            )),
            ..Snapshot::default()
        };
        let mut options = crate::translate::testing::options(Default::default());
        options.capabilities = capabilities;
        let t = crate::translate::translate(&snapshot, &options);
        let status = |kind, ns: Option<&str>, name: &str| -> serde_json::Value {
            t.status
                .get(kind, ns, name)
                .unwrap()
                .status
                .to_json()
                .into_owned()
        };
        (
            status(crate::status::ObjectKind::Gateway, Some("ns"), "g"),
            status(crate::status::ObjectKind::GatewayClass, None, "c"),
        )
    };
    let kube = crate::translate::Capabilities::KUBERNETES;
    let two = || gw("[{value: 203.0.113.1}, {type: IPAddress, value: 203.0.113.2}]");
    let (waiting, class_status) = run(two(), &["203.0.113.1"], kube);
    assert_eq!(waiting["conditions"][0]["status"], "True");
    assert_eq!(waiting["conditions"][1]["status"], "False");
    assert_eq!(
        waiting["conditions"][1]["reason"],
        Reason::AddressNotUsable.as_str()
    );
    assert!(waiting["conditions"][1]["message"]
        .as_str()
        .unwrap()
        .contains("203.0.113.2"));
    assert_eq!(
        waiting["addresses"],
        serde_json::json!([{"type": "IPAddress", "value": "203.0.113.1"}])
    );
    let features = class_status["supportedFeatures"].to_string();
    assert!(features.contains("GatewayStaticAddresses"), "{features}");
    let (ready, _) = run(two(), &["203.0.113.2", "203.0.113.1"], kube);
    assert_eq!(ready["conditions"][1]["status"], "True");
    assert_eq!(ready["addresses"].as_array().unwrap().len(), 2);
    let (unsupported, _) = run(gw("[{type: test/fake, value: x}]"), &[], kube);
    assert_eq!(unsupported["conditions"][0]["status"], "False");
    assert_eq!(
        unsupported["conditions"][0]["reason"],
        Reason::UnsupportedAddress.as_str()
    );
    let without = crate::translate::Capabilities {
        infrastructure_propagation: false,
        static_addresses: false,
    };
    let (_, class_status) = run(gw("[]"), &[], without);
    let features = class_status["supportedFeatures"].to_string();
    assert!(!features.contains("GatewayStaticAddresses"), "{features}");
    assert!(!features.contains("GatewayInfrastructurePropagation"));
}
