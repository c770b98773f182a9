//! A Gateway's status once its routes have been attached: `Accepted` and `Programmed` in the
//! order the spec ranks problems, `ResolvedRefs` of its backend client certificate, its
//! addresses, and each listener's status with `attachedRoutes`. Apart from `gateway`, which
//! validates the Gateway into its model, because status is written last, from what every
//! stage left in the model. Pure.

use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::gateway::{GatewayModel, Placement};
use crate::table::Certificate;
use crate::translate::conditions::*;
use crate::translate::gateways::address::AddressError;
use crate::translate::gateways::frontend::{insecure_fallback, ClientAuth};
use crate::translate::gateways::listener::ListenerModel;
use crate::translate::gateways::tls::{ListenerTls, TlsRefError};

impl GatewayModel<'_> {
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
    pub(super) fn accepted_and_programmed(&self) -> (Condition, Condition) {
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
    pub(super) fn addresses(&self) -> Option<Vec<GatewayStatusAddresses>> {
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
