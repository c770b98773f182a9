//! Condition types and reasons of the Gateway API (route reasons are not in the `gateway-api`
//! crate), and the one builder every status uses so `observedGeneration` and
//! `lastTransitionTime` are never forgotten. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition types.
pub const ACCEPTED: &str = "Accepted";
pub const PROGRAMMED: &str = "Programmed";
pub const RESOLVED_REFS: &str = "ResolvedRefs";
pub const CONFLICTED: &str = "Conflicted";
pub const PARTIALLY_INVALID: &str = "PartiallyInvalid";

/// Reasons shared by several kinds.
pub const REASON_ACCEPTED: &str = "Accepted";
pub const REASON_PROGRAMMED: &str = "Programmed";
pub const REASON_RESOLVED_REFS: &str = "ResolvedRefs";
pub const REASON_INVALID: &str = "Invalid";
/// GatewayClass and Gateway: `parametersRef` cannot be used.
pub const REASON_INVALID_PARAMETERS: &str = "InvalidParameters";

/// Gateway reasons.
pub const REASON_LISTENERS_NOT_VALID: &str = "ListenersNotValid";
pub const REASON_UNSUPPORTED_ADDRESS: &str = "UnsupportedAddress";
pub const REASON_ADDRESS_NOT_USABLE: &str = "AddressNotUsable";
pub const REASON_PENDING: &str = "Pending";

/// Listener reasons.
pub const REASON_NO_CONFLICTS: &str = "NoConflicts";
pub const REASON_HOSTNAME_CONFLICT: &str = "HostnameConflict";
pub const REASON_PROTOCOL_CONFLICT: &str = "ProtocolConflict";
pub const REASON_PORT_UNAVAILABLE: &str = "PortUnavailable";
pub const REASON_UNSUPPORTED_PROTOCOL: &str = "UnsupportedProtocol";
pub const REASON_INVALID_ROUTE_KINDS: &str = "InvalidRouteKinds";

/// Route reasons (`RouteConditionReason` in the spec).
pub const REASON_NOT_ALLOWED_BY_LISTENERS: &str = "NotAllowedByListeners";
pub const REASON_NO_MATCHING_LISTENER_HOSTNAME: &str = "NoMatchingListenerHostname";
pub const REASON_NO_MATCHING_PARENT: &str = "NoMatchingParent";
pub const REASON_UNSUPPORTED_VALUE: &str = "UnsupportedValue";
pub const REASON_REF_NOT_PERMITTED: &str = "RefNotPermitted";
pub const REASON_INVALID_KIND: &str = "InvalidKind";
pub const REASON_BACKEND_NOT_FOUND: &str = "BackendNotFound";

/// The API group of every Gateway API kind.
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";
/// `apiVersion` written in every status entry.
pub const API_VERSION: &str = "gateway.networking.k8s.io/v1";

/// Longest condition message written, in bytes. The Condition schema allows 32,768; a route with
/// hundreds of invalid rules could otherwise produce a status the API server refuses.
pub const MAX_MESSAGE_BYTES: usize = 32_768;

/// `message` cut to [`MAX_MESSAGE_BYTES`] at a character boundary, ending in `...` when cut.
pub fn bounded_message(mut message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    let mut end = MAX_MESSAGE_BYTES - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push_str("...");
    message
}

/// Stamps conditions of one object: its generation and the translation time.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    pub generation: Option<i64>,
    pub now: jiff::Timestamp,
}

impl Stamp {
    /// A condition with `status` True or False.
    pub fn condition(&self, ty: &str, status: bool, reason: &str, message: String) -> Condition {
        Condition {
            last_transition_time: Time(self.now),
            message: bounded_message(message),
            observed_generation: self.generation,
            reason: reason.to_owned(),
            status: if status { "True" } else { "False" }.to_owned(),
            type_: ty.to_owned(),
        }
    }

    /// A True condition.
    pub fn ok(&self, ty: &str, reason: &str, message: impl Into<String>) -> Condition {
        self.condition(ty, true, reason, message.into())
    }

    /// A False condition.
    pub fn fail(&self, ty: &str, reason: &str, message: impl Into<String>) -> Condition {
        self.condition(ty, false, reason, message.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_carry_generation_and_time() {
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let stamp = Stamp {
            generation: Some(3),
            now,
        };
        let c = stamp.fail(ACCEPTED, REASON_NO_MATCHING_PARENT, "m");
        assert_eq!(c.status, "False");
        assert_eq!(c.observed_generation, Some(3));
        assert_eq!(c.last_transition_time.0, now);
        assert_eq!(stamp.ok(PROGRAMMED, REASON_PROGRAMMED, "").status, "True");
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        assert_eq!(bounded_message("short".into()), "short");
        let cut = bounded_message("é".repeat(MAX_MESSAGE_BYTES));
        assert!(cut.len() <= MAX_MESSAGE_BYTES, "{}", cut.len());
        assert!(cut.ends_with("..."));
        assert!(cut.trim_end_matches("...").chars().all(|c| c == 'é'));
    }
}
