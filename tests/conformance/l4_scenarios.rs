//! The scenario lists of profiles GATEWAY-TLS, GATEWAY-TCP and GATEWAY-UDP (names as in the
//! upstream suite), each with its fixture and, for extended scenarios, its feature.

use crate::scenarios::Scenario;
use crate::{tcproute, tlsroute, udproute};

use crate::report::{GATEWAY_TCP as TCP, GATEWAY_TLS as TLS, GATEWAY_UDP as UDP};

/// A core scenario of profile `$profile`.
macro_rules! profile_core {
    ($profile:ident, $name:literal, $file:literal, $run:path) => {
        Scenario {
            name: $name,
            profile: $profile,
            feature: None,
            manifests: include_str!(concat!("manifests/", $file)),
            skip: None,
            run: Some(|env| Box::pin($run(env))),
        }
    };
}

/// A scenario of extended feature `$feature` of profile `$profile`.
macro_rules! profile_extended {
    ($profile:ident, $name:literal, $feature:literal, $file:literal, $run:path) => {
        Scenario {
            name: $name,
            profile: $profile,
            feature: Some($feature),
            manifests: include_str!(concat!("manifests/", $file)),
            skip: None,
            run: Some(|env| Box::pin($run(env))),
        }
    };
}

/// Every scenario of the three profiles.
pub fn all() -> Vec<Scenario> {
    vec![
        profile_core!(
            TLS,
            "TLSRouteListenerPassthroughSupportedKinds",
            "tlsroute-listener-kinds.yaml",
            tlsroute::listener_passthrough_supported_kinds
        ),
        profile_extended!(
            TLS,
            "TLSRouteListenerTerminateSupportedKinds",
            "TLSRouteModeTerminate",
            "tlsroute-listener-kinds.yaml",
            tlsroute::listener_terminate_supported_kinds
        ),
        profile_core!(
            TLS,
            "TLSRouteListenerTerminateNotSupported",
            "tlsroute-listener-kinds.yaml",
            tlsroute::listener_terminate_not_supported
        ),
        profile_extended!(
            TLS,
            "TLSRouteListenerMixedTerminationNotSupported",
            "TLSRouteModeTerminate",
            "tlsroute-listener-kinds.yaml",
            tlsroute::listener_mixed_termination_not_supported
        ),
        profile_core!(
            TLS,
            "TLSRouteSimpleSameNamespace",
            "tlsroute-passthrough.yaml",
            tlsroute::simple_passthrough
        ),
        profile_extended!(
            TLS,
            "TLSRouteTerminateSimpleSameNamespace",
            "TLSRouteModeTerminate",
            "tlsroute-terminate.yaml",
            tlsroute::simple_terminate
        ),
        profile_extended!(
            TLS,
            "TLSRouteMixedTerminationSameNamespace",
            "TLSRouteModeMixed",
            "tlsroute-mixed.yaml",
            tlsroute::mixed_termination
        ),
        profile_core!(
            TLS,
            "TLSRouteInvalidBackendRefNonexistent",
            "tlsroute-invalid.yaml",
            tlsroute::invalid_backend_nonexistent
        ),
        profile_core!(
            TLS,
            "TLSRouteInvalidBackendRefUnknownKind",
            "tlsroute-invalid.yaml",
            tlsroute::invalid_backend_unknown_kind
        ),
        profile_core!(
            TLS,
            "TLSRouteInvalidReferenceGrant",
            "tlsroute-invalid.yaml",
            tlsroute::invalid_reference_grant
        ),
        profile_core!(
            TLS,
            "TLSRouteInvalidNoMatchingListener",
            "tlsroute-invalid.yaml",
            tlsroute::invalid_no_matching_listener
        ),
        profile_core!(
            TLS,
            "TLSRouteHostnameIntersection",
            "tlsroute-hostnames.yaml",
            tlsroute::hostname_intersection
        ),
        profile_core!(
            TLS,
            "TLSRouteInvalidNoMatchingListenerHostname",
            "tlsroute-invalid.yaml",
            tlsroute::invalid_no_matching_listener_hostname
        ),
        profile_core!(
            TCP,
            "TCPRouteParentRefPortAndSectionName",
            "tcproute.yaml",
            tcproute::parent_ref_port_and_section_name
        ),
        profile_core!(
            TCP,
            "TCPRouteReferenceGrant",
            "tcproute.yaml",
            tcproute::reference_grant
        ),
        profile_core!(
            TCP,
            "TCPRouteInvalidBackendRefNonexistent",
            "tcproute.yaml",
            tcproute::invalid_backend_nonexistent
        ),
        profile_core!(
            TCP,
            "TCPRouteInvalidCrossNamespaceBackendRef",
            "tcproute.yaml",
            tcproute::invalid_cross_namespace_backend
        ),
        profile_core!(
            TCP,
            "TCPRouteInvalidNonTCPListener",
            "tcproute.yaml",
            tcproute::invalid_non_tcp_listener
        ),
        profile_core!(
            UDP,
            "UDPRouteParentRefPortAndSectionName",
            "udproute.yaml",
            udproute::parent_ref_port_and_section_name
        ),
        profile_core!(
            UDP,
            "UDPRouteReferenceGrant",
            "udproute.yaml",
            udproute::reference_grant
        ),
        profile_core!(
            UDP,
            "UDPRouteInvalidBackendRefNonexistent",
            "udproute.yaml",
            udproute::invalid_backend_nonexistent
        ),
        profile_core!(
            UDP,
            "UDPRouteInvalidCrossNamespaceBackendRef",
            "udproute.yaml",
            udproute::invalid_cross_namespace_backend
        ),
        profile_core!(
            UDP,
            "UDPRouteNotAllowedByListeners",
            "udproute.yaml",
            udproute::not_allowed_by_listeners
        ),
        profile_core!(
            TCP,
            "TCPRouteWeightedRouting",
            "tcproute.yaml",
            tcproute::weighted_routing
        ),
        profile_core!(
            TCP,
            "TCPRouteParentRefAttachAll",
            "tcproute.yaml",
            tcproute::parent_ref_attach_all
        ),
        profile_core!(
            UDP,
            "UDPRouteWeightedRouting",
            "udproute.yaml",
            udproute::weighted_routing
        ),
        profile_core!(
            UDP,
            "UDPRouteParentRefAttachAllListeners",
            "udproute.yaml",
            udproute::parent_ref_attach_all
        ),
        profile_core!(
            TCP,
            "TCPRouteMultipleRoutesAttachment",
            "tcproute.yaml",
            tcproute::multiple_routes_attachment
        ),
        profile_core!(
            UDP,
            "UDPRouteMultipleRoutesAttachment",
            "udproute.yaml",
            udproute::multiple_routes_attachment
        ),
    ]
}
