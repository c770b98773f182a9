//! GatewayClass ownership and status; Gateway validation: addresses, listener protocols, route
//! kinds, conflicts between listeners; the Gateway status once routes have been attached. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use std::net::IpAddr;
use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::{
    GatewayClass, GatewayClassStatus, GatewayClassStatusSupportedFeatures,
};
use gateway_api::apis::standard::gateways::{
    Gateway, GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
};

use crate::kinds::gateway_static_ips as static_ips;
use crate::snapshot::namespace_of;
use crate::snapshot::{GatewayBinding, GatewayBindings};
use crate::table::{BackendIdentity, Certificate};
use crate::translate::conditions::*;
use crate::translate::gateways::address::{bind_addresses, AddressError};
use crate::translate::gateways::conflicts::mark_conflicts;
use crate::translate::gateways::features::supported_features;
use crate::translate::gateways::frontend::{insecure_fallback, ClientAuth, Frontends};
use crate::translate::gateways::listener::{listener_model, ListenerModel};
use crate::translate::gateways::parameters::InvalidParameters;
use crate::translate::gateways::ports::PortMap;
use crate::translate::gateways::tls::{Certificates, ListenerTls, TlsRefError};
use crate::translate::TranslateOptions;

/// True when the class names our controller.
pub fn owns_class(class: &GatewayClass, options: &TranslateOptions) -> bool {
    class.spec.controller_name == options.controller_name
}

/// Status of one of our GatewayClasses: accepted (unless its `parametersRef` cannot be used),
/// with the features we support in the running mode (`options.capabilities`).
pub fn class_status(
    class: &GatewayClass,
    options: &TranslateOptions,
    parameters: Option<&InvalidParameters>,
) -> GatewayClassStatus {
    let stamp = Stamp {
        generation: class.metadata.generation,
        now: options.now,
    };
    let mut features: Vec<_> = supported_features(&options.capabilities)
        .into_iter()
        .map(|f| GatewayClassStatusSupportedFeatures {
            name: (*f).to_owned(),
        })
        .collect();
    features.sort_by(|a, b| a.name.cmp(&b.name));
    let accepted = match parameters {
        Some(e) => stamp.fail(
            ConditionType::Accepted,
            Reason::InvalidParameters,
            e.to_string(),
        ),
        None => stamp.ok(
            ConditionType::Accepted,
            Reason::Accepted,
            format!("handled by {}", options.controller_name),
        ),
    };
    GatewayClassStatus {
        conditions: Some(vec![accepted]),
        supported_features: Some(features),
    }
}

/// One of our Gateways, validated, with the routes attached to each listener.
#[derive(Debug)]
pub struct GatewayModel<'a> {
    pub gateway: &'a Gateway,
    pub namespace: &'a str,
    pub name: &'a str,
    pub stamp: Stamp,
    /// IPs every listener binds on.
    pub binds: Vec<IpAddr>,
    /// In a cluster, the IPs of `spec.addresses`: the Gateway is programmed once its Service
    /// has been assigned all of them. Empty standalone (the listeners bind them).
    pub requested: Vec<IpAddr>,
    pub address_error: Option<AddressError>,
    /// Its own or its class's `parametersRef` cannot be used: nothing of it is served.
    pub parameters_error: Option<InvalidParameters>,
    pub placement: Placement<'a>,
    pub listeners: Vec<ListenerModel<'a>>,
    /// `spec.tls.backend.clientCertificateRef`: `None` when unset.
    pub backend_identity: Option<Result<Arc<BackendIdentity>, TlsRefError>>,
    /// How many ListenerSets were accepted onto the Gateway (`status.attachedListenerSets`);
    /// `None` (the field left out) when the Gateway has no `allowedListeners` and no
    /// ListenerSet names it.
    pub listener_sets: Option<i32>,
}

/// Where a Gateway's listeners bind.
#[derive(Debug, Clone, Copy)]
pub enum Placement<'a> {
    /// Standalone: each listener binds its own port, or the local port `--port-map` gives it.
    Own(&'a PortMap),
    /// Cluster: listeners bind the ports their Gateway's Service maps them to.
    Mapped(&'a GatewayBinding),
    /// Cluster, but the Gateway's Service does not exist yet: nothing is bound.
    Pending,
}

impl<'a> GatewayModel<'a> {
    /// Validates a Gateway of one of our classes (`parameters_error`: see
    /// [`crate::translate::gateways::parameters::resolve_parameters`]).
    pub fn new(
        gateway: &'a Gateway,
        options: &'a TranslateOptions,
        certificates: &mut Certificates<'_>,
        frontends: &mut Frontends<'_>,
        bindings: Option<&'a GatewayBindings>,
        parameters_error: Option<InvalidParameters>,
    ) -> Self {
        let namespace = namespace_of(&gateway.metadata);
        let name = gateway.metadata.name.as_deref().unwrap_or("");
        let (mut binds, address_error) = bind_addresses(gateway, options.bind_address);
        let placement = match bindings {
            None => Placement::Own(&options.port_map),
            Some(b) => match b.get(&(namespace.to_owned(), name.to_owned())) {
                Some(binding) => Placement::Mapped(binding),
                None => Placement::Pending,
            },
        };
        let mut requested = Vec::new();
        if !matches!(placement, Placement::Own(_)) {
            // In a cluster, spec.addresses are the Service's business; replicas bind locally.
            binds = vec![options.bind_address];
            requested = static_ips(gateway);
        }
        let mut listeners: Vec<ListenerModel<'a>> = gateway
            .spec
            .listeners
            .iter()
            .map(|l| {
                let mut model = listener_model(l, certificates.listener(namespace, l));
                if model.protocol.terminates_tls() {
                    model.client_auth = frontends.listener(gateway, l.port);
                }
                model
            })
            .collect();
        mark_conflicts(&mut listeners);
        let backend_identity = gateway
            .spec
            .tls
            .as_ref()
            .and_then(|t| t.backend.as_ref()?.client_certificate_ref.as_ref())
            .map(|r| {
                certificates
                    .client_certificate(namespace, r)
                    .map(|c| Arc::new(BackendIdentity::new(&c)))
            });
        Self {
            backend_identity,
            gateway,
            namespace,
            name,
            placement,
            stamp: Stamp {
                generation: gateway.metadata.generation,
                now: options.now,
            },
            binds,
            requested,
            address_error,
            parameters_error,
            listeners,
            listener_sets: gateway.spec.allowed_listeners.as_ref().map(|_| 0),
        }
    }

    /// The Gateway's own listeners (those of its spec), without ListenerSets'.
    pub fn own_listeners(&self) -> impl Iterator<Item = &ListenerModel<'a>> {
        self.listeners[self.listeners_of(None)].iter()
    }

    /// Where in `listeners` the listeners of ListenerSet `set` are (`None`: the Gateway's
    /// own). `listeners` holds the Gateway's own first, then each accepted ListenerSet's in
    /// index order (`listenerset::join` appends them so), so a binary search finds them: a
    /// route's parentRef and a ListenerSet's status reach their few listeners among a
    /// Gateway's thousands without a scan.
    pub fn listeners_of(&self, set: Option<usize>) -> std::ops::Range<usize> {
        let start = self.listeners.partition_point(|l| l.set() < set);
        let len = self.listeners[start..].partition_point(|l| l.set() == set);
        start..start + len
    }

    /// Accepted: parameters and addresses usable and at least one accepted listener.
    pub fn accepted(&self) -> bool {
        self.parameters_error.is_none()
            && self.address_error.is_none()
            && self.own_listeners().any(ListenerModel::usable)
    }

    /// The requested IPs the Gateway's Service has not been assigned (yet), in a cluster.
    fn unassigned(&self) -> Vec<IpAddr> {
        match self.placement {
            Placement::Mapped(b) => self
                .requested
                .iter()
                .filter(|ip| !b.assigned.contains(ip))
                .copied()
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The port a listener's socket binds, or `None` while its Gateway's Service maps no port
    /// for it (cluster mode).
    pub fn socket_port(&self, listener_port: u16) -> Option<u16> {
        match self.placement {
            Placement::Own(map) => Some(map.socket_port(listener_port)),
            Placement::Mapped(b) => b.ports.get(&listener_port).copied(),
            Placement::Pending => None,
        }
    }

    /// The Gateway's status, including `attachedRoutes` counted during attachment.
    pub fn status(&self) -> GatewayStatus {
        let s = &self.stamp;
        let (accepted, programmed) = self.accepted_and_programmed();
        let addresses = self.addresses();
        let mut conditions = vec![accepted, programmed];
        match &self.backend_identity {
            None => {}
            Some(Ok(_)) => conditions.push(s.ok(
                ConditionType::ResolvedRefs,
                Reason::ResolvedRefs,
                "resolved",
            )),
            Some(Err(e)) => conditions.push(s.fail(
                ConditionType::ResolvedRefs,
                match e {
                    TlsRefError::NotPermitted { .. } => Reason::RefNotPermitted,
                    _ => Reason::InvalidClientCertificateRef,
                },
                format!("spec.tls.backend.clientCertificateRef: {e}"),
            )),
        }
        if insecure_fallback(self.gateway) {
            conditions.push(s.ok(
                ConditionType::InsecureFrontendValidationMode,
                Reason::ConfigurationChanged,
                "a port accepts clients without a valid certificate (AllowInsecureFallback)",
            ));
        }
        GatewayStatus {
            addresses,
            attached_listener_sets: self.listener_sets,
            conditions: Some(conditions),
            listeners: Some(
                self.own_listeners()
                    .map(|l| self.listener_status(l))
                    .collect(),
            ),
        }
    }

    /// `Accepted` and `Programmed`: the first problem found decides both, in the order the
    /// spec ranks them (parameters, addresses, listeners, then the Gateway's Service).
    fn accepted_and_programmed(&self) -> (Condition, Condition) {
        let s = &self.stamp;
        let invalid: Vec<&str> = self
            .own_listeners()
            .filter(|l| !l.valid())
            .map(|l| l.spec.name.as_str())
            .collect();
        if let Some(e) = &self.parameters_error {
            (
                s.fail(
                    ConditionType::Accepted,
                    Reason::InvalidParameters,
                    e.to_string(),
                ),
                s.fail(ConditionType::Programmed, Reason::Invalid, e.to_string()),
            )
        } else if let Some(e) = &self.address_error {
            let programmed_reason = match e {
                AddressError::NotAnIp(_) => Reason::AddressNotUsable,
                AddressError::UnsupportedType(_) => Reason::Invalid,
            };
            (
                s.fail(
                    ConditionType::Accepted,
                    Reason::UnsupportedAddress,
                    e.to_string(),
                ),
                s.fail(ConditionType::Programmed, programmed_reason, e.to_string()),
            )
        } else if !self.accepted() {
            let msg = format!("no valid listener; invalid: {}", invalid.join(", "));
            (
                s.fail(
                    ConditionType::Accepted,
                    Reason::ListenersNotValid,
                    msg.clone(),
                ),
                s.fail(ConditionType::Programmed, Reason::Invalid, msg),
            )
        } else if !invalid.is_empty() {
            let msg = format!("listeners not valid: {}", invalid.join(", "));
            let programmed = if self.own_listeners().any(ListenerModel::valid) {
                s.ok(
                    ConditionType::Programmed,
                    Reason::Programmed,
                    "valid listeners are programmed",
                )
            } else {
                s.fail(ConditionType::Programmed, Reason::Invalid, msg.clone())
            };
            (
                s.ok(ConditionType::Accepted, Reason::ListenersNotValid, msg),
                programmed,
            )
        } else if matches!(self.placement, Placement::Pending) {
            (
                s.ok(ConditionType::Accepted, Reason::Accepted, "accepted"),
                s.fail(
                    ConditionType::Programmed,
                    Reason::Pending,
                    "waiting for the Gateway's Service",
                ),
            )
        } else if !self.unassigned().is_empty() {
            let missing: Vec<String> = self.unassigned().iter().map(|ip| ip.to_string()).collect();
            (
                s.ok(ConditionType::Accepted, Reason::Accepted, "accepted"),
                s.fail(
                    ConditionType::Programmed,
                    Reason::AddressNotUsable,
                    format!(
                        "the Gateway's Service has not been assigned {} (yet)",
                        missing.join(", ")
                    ),
                ),
            )
        } else {
            (
                s.ok(ConditionType::Accepted, Reason::Accepted, "accepted"),
                s.ok(ConditionType::Programmed, Reason::Programmed, "programmed"),
            )
        }
    }

    /// `status.addresses`: those of the Gateway's Service (cluster mode), or the addresses
    /// bound (standalone); none while the Service is pending or the Gateway is invalid.
    fn addresses(&self) -> Option<Vec<GatewayStatusAddresses>> {
        if let Placement::Mapped(b) = self.placement {
            let ip = |value: String| ("IPAddress".to_owned(), value);
            let listed: Vec<(String, String)> = if self.requested.is_empty() {
                b.addresses.clone()
            } else {
                // Static addresses: those the Service has been assigned.
                self.requested
                    .iter()
                    .filter(|a| b.assigned.contains(a))
                    .map(|a| ip(a.to_string()))
                    .collect()
            };
            Some(
                listed
                    .into_iter()
                    .map(|(ty, value)| GatewayStatusAddresses {
                        r#type: Some(ty),
                        value,
                    })
                    .collect(),
            )
        } else if matches!(self.placement, Placement::Pending) {
            None
        } else if self.address_error.is_none() && self.parameters_error.is_none() {
            Some(
                self.binds
                    .iter()
                    .map(|ip| GatewayStatusAddresses {
                        r#type: Some("IPAddress".into()),
                        value: ip.to_string(),
                    })
                    .collect(),
            )
        } else {
            None
        }
    }

    /// The status of one listener, the Gateway's own or a ListenerSet's.
    pub fn listener_status(&self, l: &ListenerModel<'_>) -> GatewayStatusListeners {
        let s = &self.stamp;
        let accepted = if !l.protocol.is_supported() {
            s.fail(
                ConditionType::Accepted,
                Reason::UnsupportedProtocol,
                format!("protocol {} is not supported", l.spec.protocol),
            )
        } else if l.passthrough_on_https() {
            s.fail(
                ConditionType::Accepted,
                Reason::UnsupportedValue,
                "tls.mode Passthrough is not allowed on an HTTPS listener; use Terminate",
            )
        } else if let Some(reason) = l.conflict {
            s.fail(
                ConditionType::Accepted,
                reason,
                "conflicts with another listener on the same port",
            )
        } else if let ClientAuth::Invalid(e) = &l.client_auth {
            s.fail(
                ConditionType::Accepted,
                Reason::NoValidCACertificate,
                format!("no usable CA certificate for client validation: {e}"),
            )
        } else {
            s.ok(ConditionType::Accepted, Reason::Accepted, "accepted")
        };
        let programmed = if let Some(reason) = l.conflict.filter(|_| l.origin.is_some()) {
            // A ListenerSet listener names its conflict here too, as GEP-1713 checks.
            s.fail(
                ConditionType::Programmed,
                reason,
                "conflicts with an earlier listener",
            )
        } else if l.valid() && self.accepted() && self.socket_port(l.port).is_none() {
            s.fail(
                ConditionType::Programmed,
                Reason::Pending,
                "waiting for the Gateway's Service to map this port",
            )
        } else if l.valid() && self.accepted() {
            s.ok(ConditionType::Programmed, Reason::Programmed, "programmed")
        } else {
            s.fail(
                ConditionType::Programmed,
                Reason::Invalid,
                "listener is not programmed",
            )
        };
        let resolved = if !l.invalid_kinds.is_empty() {
            s.fail(
                ConditionType::ResolvedRefs,
                Reason::InvalidRouteKinds,
                format!("unsupported route kinds: {}", l.invalid_kinds.join(", ")),
            )
        } else if let ListenerTls::Unresolved(e) = &l.tls {
            s.fail(ConditionType::ResolvedRefs, e.reason(), e.to_string())
        } else if let ListenerTls::Stale { certificate, error } = &l.tls {
            s.fail(
                ConditionType::ResolvedRefs,
                error.reason(),
                stale_message(error, certificate),
            )
        } else if let Some(e) = l.client_auth.error() {
            s.fail(ConditionType::ResolvedRefs, e.reason(), e.to_string())
        } else {
            s.ok(
                ConditionType::ResolvedRefs,
                Reason::ResolvedRefs,
                "resolved",
            )
        };
        let conflicted = match l.conflict {
            Some(reason) => s.ok(
                ConditionType::Conflicted,
                reason,
                "another listener uses the same port",
            ),
            None => s.fail(
                ConditionType::Conflicted,
                Reason::NoConflicts,
                "no conflicts",
            ),
        };
        GatewayStatusListeners {
            attached_routes: i32::try_from(l.attached.len()).unwrap_or(i32::MAX),
            conditions: vec![accepted, programmed, resolved, conflicted],
            name: l.spec.name.clone(),
            supported_kinds: Some(l.supported_kinds.clone()),
        }
    }
}

/// The `ResolvedRefs` message of a listener serving its previous certificate.
fn stale_message(error: &TlsRefError, certificate: &Certificate) -> String {
    let expiry = certificate
        .not_after
        .and_then(|t| jiff::Timestamp::from_second(t).ok())
        .map(|t| format!(", valid until {t},"))
        .unwrap_or_default();
    format!(
        "{error}; the previous certificate from Secret {}{expiry} is still served",
        certificate.secret
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(yaml: &str) -> Gateway {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn cluster_placement_binds_mapped_ports_and_waits_for_a_service() {
        use crate::snapshot::{GatewayBinding, Snapshot};
        use std::sync::Arc;
        let class: GatewayClass = serde_yaml_ng::from_str(
            "metadata: {name: c, generation: 1}\nspec: {controllerName: x/y}",
        )
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
        let class: GatewayClass = serde_yaml_ng::from_str(
            "metadata: {name: c, generation: 1}\nspec: {controllerName: x/y}",
        )
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
}
