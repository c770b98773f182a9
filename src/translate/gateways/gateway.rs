//! GatewayClass ownership and status; Gateway validation into its model: addresses, listener
//! protocols, route kinds, conflicts between listeners, where its listeners bind. The Gateway's
//! status, written once routes have been attached, is `gateway_status`. Pure.

use std::net::IpAddr;
use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::{
    GatewayClass, GatewayClassStatus, GatewayClassStatusSupportedFeatures,
};
use gateway_api::apis::standard::gateways::Gateway;

use crate::kinds::gateway_static_ips as static_ips;
use crate::snapshot::namespace_of;
use crate::snapshot::{GatewayBinding, GatewayBindings};
use crate::table::BackendIdentity;
use crate::translate::conditions::*;
use crate::translate::gateways::address::{bind_addresses, AddressError};
use crate::translate::gateways::conflicts::mark_conflicts;
use crate::translate::gateways::features::supported_features;
use crate::translate::gateways::frontend::Frontends;
use crate::translate::gateways::listener::{listener_model, ListenerModel};
use crate::translate::gateways::parameters::InvalidParameters;
use crate::translate::gateways::ports::PortMap;
use crate::translate::gateways::tls::{Certificates, TlsRefError};
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
    pub(super) fn unassigned(&self) -> Vec<IpAddr> {
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
}

#[cfg(test)]
#[path = "gateway_tests.rs"]
mod tests;
