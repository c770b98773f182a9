//! GatewayClasses, Gateways, ListenerSets and their listeners: validation, TLS, addresses,
//! ports, parameters, the data plane's receipt (bind) and the features a class claims.

pub(super) mod address;
pub(super) mod attached;
pub(super) mod bind;
pub(super) mod conflicts;
pub(super) mod features;
pub(super) mod frontend;
pub(super) mod gateway;
mod gateway_status;
pub(super) mod listener;
pub(super) mod listenerset;
#[cfg(test)]
pub(super) mod listenerset_tests;
pub(super) mod parameters;
pub(super) mod ports;
pub(super) mod protocol;
pub(super) mod proxy_config;
pub(super) mod tls;
