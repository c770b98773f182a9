//! The Gateway API conformance features a GatewayClass claims in `status.supportedFeatures`:
//! what the translator and the proxy implement, less what the running mode cannot do. Pure.

/// Features of the Gateway API conformance suite this translator and the proxy implement in
/// some mode; [`supported_features`] gives those of one mode.
pub const SUPPORTED_FEATURES: &[&str] = &[
    "BackendTLSPolicy",
    "BackendTLSPolicySANValidation",
    "Gateway",
    "GatewayAddressEmpty",
    "GatewayBackendClientCertificate",
    "GatewayFrontendClientCertificateValidation",
    "GatewayFrontendClientCertificateValidationInsecureFallback",
    "GatewayHTTPSListenerDetectMisdirectedRequests",
    "GatewayHTTPListenerIsolation",
    "GatewayInfrastructurePropagation",
    "GatewayPort8080",
    "GatewayStaticAddresses",
    "GRPCRoute",
    "GRPCRouteNamedRouteRule",
    "HTTPRoute",
    "HTTPRoute303RedirectStatusCode",
    "HTTPRoute307RedirectStatusCode",
    "HTTPRoute308RedirectStatusCode",
    "HTTPRouteBackendProtocolH2C",
    "HTTPRouteBackendProtocolWebSocket",
    "HTTPRouteBackendRequestHeaderModification",
    "HTTPRouteBackendTimeout",
    "HTTPRouteCORS",
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRouteNamedRouteRule",
    "HTTPRouteParentRefPort",
    "HTTPRoutePathRedirect",
    "HTTPRoutePathRewrite",
    "HTTPRoutePortRedirect",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors",
    "HTTPRouteRequestPercentageMirror",
    "HTTPRouteRequestTimeout",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteRetry",
    "HTTPRouteRetryBackendTimeout",
    "HTTPRouteRetryConnectionError",
    "HTTPRouteSchemeRedirect",
    "ListenerSet",
    "ReferenceGrant",
    "TCPRoute",
    "TLSRoute",
    "TLSRouteModeMixed",
    "TLSRouteModeTerminate",
    "UDPRoute",
];

/// What the running mode does for a Gateway beyond translating it, as the provider's
/// options allow; the features that depend on it are claimed only when it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// `spec.infrastructure` labels and annotations reach the resources made for the Gateway,
    /// found where Gateway API looks for them ("GatewayInfrastructurePropagation").
    pub infrastructure_propagation: bool,
    /// `spec.addresses` IPs are bound (standalone) or requested from the Gateway's Service and
    /// reported `AddressNotUsable` until assigned (Kubernetes) ("GatewayStaticAddresses").
    pub static_addresses: bool,
}

impl Capabilities {
    /// Standalone: listeners bind the Gateway's `spec.addresses`. No resource is made for a
    /// Gateway, so its `spec.infrastructure` metadata has nothing to reach.
    pub const STANDALONE: Self = Self {
        infrastructure_propagation: false,
        static_addresses: true,
    };
    /// Kubernetes: each Gateway's Service lives in the Gateway's namespace, labelled with its
    /// name and carrying its infrastructure metadata, and requests its static addresses.
    pub const KUBERNETES: Self = Self {
        infrastructure_propagation: true,
        static_addresses: true,
    };
}

/// [`SUPPORTED_FEATURES`] less those `capabilities` rule out.
pub fn supported_features(capabilities: &Capabilities) -> Vec<&'static str> {
    SUPPORTED_FEATURES
        .iter()
        .copied()
        .filter(|f| match *f {
            "GatewayInfrastructurePropagation" => capabilities.infrastructure_propagation,
            "GatewayStaticAddresses" => capabilities.static_addresses,
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_follow_the_capabilities() {
        let all = supported_features(&Capabilities::KUBERNETES);
        assert!(all.contains(&"GatewayInfrastructurePropagation"));
        assert!(all.contains(&"GatewayStaticAddresses"));
        let none = Capabilities {
            infrastructure_propagation: false,
            static_addresses: false,
        };
        let fewer = supported_features(&none);
        assert!(!fewer.contains(&"GatewayInfrastructurePropagation"));
        assert!(!fewer.contains(&"GatewayStaticAddresses"));
        assert_eq!(fewer.len() + 2, SUPPORTED_FEATURES.len());
        let standalone = supported_features(&Capabilities::STANDALONE);
        assert!(!standalone.contains(&"GatewayInfrastructurePropagation"));
        assert!(standalone.contains(&"GatewayStaticAddresses"));
    }
}
