//! Fixtures of the translator's unit tests: a GatewayClass `c` of controller `x/y`, Gateways
//! written as YAML, and fixed options, so each test states only what it is about.

use std::sync::Arc;

use crate::snapshot::Snapshot;
use crate::translate::{PortMap, TranslateOptions};

/// A snapshot of class `c` (controller `x/y`) and the Gateways in `gateways` (YAML documents).
pub fn snapshot(gateways: &[String]) -> Snapshot {
    let class =
        serde_yaml_ng::from_str("metadata: {name: c, generation: 1}\nspec: {controllerName: x/y}")
            .expect("class fixture");
    Snapshot {
        gateway_classes: vec![Arc::new(class)],
        gateways: gateways
            .iter()
            .map(|g| Arc::new(serde_yaml_ng::from_str(g).expect("Gateway fixture")))
            .collect(),
        ..Snapshot::default()
    }
}

/// Options for controller `x/y`, default bind address 127.0.0.9, a fixed clock, generation 1.
pub fn options(port_map: PortMap) -> TranslateOptions {
    TranslateOptions {
        ingress: Default::default(),
        controller_name: "x/y".into(),
        bind_address: "127.0.0.9".parse().expect("address"),
        now: "2026-01-01T00:00:00Z".parse().expect("timestamp"),
        generation: 1,
        port_map,
        capabilities: crate::translate::Capabilities::STANDALONE,
    }
}
