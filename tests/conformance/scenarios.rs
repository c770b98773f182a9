//! The scenario list of profile GATEWAY-HTTP (GATEWAY-GRPC's is in `grpc`, the L4 profiles' in
//! `l4_scenarios`; names as in the upstream
//! suite), each with its fixture, its extended feature (none for core) and, for scenarios that
//! cannot run here, the reason they are skipped. Also runs one scenario to a verdict.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::expect::Outcome;
use crate::harness::Env;
use crate::report::Result as Verdict;
use crate::report::GATEWAY_HTTP;
use crate::{
    backend_tls, backends, client_certs, extended, gateway, grpc, httproute, listenerset,
    redirects, references, retries, skipped, tls,
};

/// A scenario body: runs against a started environment.
pub type RunFn = fn(Arc<Env>) -> Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// One conformance scenario.
pub struct Scenario {
    pub name: &'static str,
    /// The upstream conformance profile it belongs to (`GATEWAY-HTTP`, `GATEWAY-GRPC`,
    /// `GATEWAY-TLS`).
    pub profile: &'static str,
    /// Extended feature it belongs to; `None` for core.
    pub feature: Option<&'static str>,
    /// Its own manifests (the shared base is always added).
    pub manifests: &'static str,
    /// Why it cannot run here, if it cannot.
    pub skip: Option<&'static str>,
    pub run: Option<RunFn>,
}

macro_rules! core {
    ($name:literal, $file:literal, $run:path) => {
        Scenario {
            name: $name,
            profile: GATEWAY_HTTP,
            feature: None,
            manifests: include_str!(concat!("manifests/", $file)),
            skip: None,
            run: Some(|env| Box::pin($run(env))),
        }
    };
}

macro_rules! extended {
    ($name:literal, $feature:literal, $file:literal, $run:path) => {
        Scenario {
            name: $name,
            profile: GATEWAY_HTTP,
            feature: Some($feature),
            manifests: include_str!(concat!("manifests/", $file)),
            skip: None,
            run: Some(|env| Box::pin($run(env))),
        }
    };
}

/// Every scenario of every profile, in upstream order of appearance.
pub fn all() -> Vec<Scenario> {
    vec![
        core!(
            "GatewayClassObservedGenerationBump",
            "gatewayclass-generation.yaml",
            gateway::class_generation
        ),
        core!(
            "GatewayObservedGenerationBump",
            "gateway-generation.yaml",
            gateway::gateway_generation
        ),
        core!(
            "GatewayModifyListeners",
            "modify-listeners.yaml",
            gateway::modify_listeners
        ),
        core!(
            "GatewayInvalidParametersRef",
            "invalid-parameters-ref.yaml",
            gateway::invalid_parameters_ref
        ),
        core!(
            "GatewayInvalidRouteKind",
            "invalid-route-kinds.yaml",
            gateway::invalid_route_kinds
        ),
        core!(
            "GatewayWithAttachedRoutes",
            "attached-routes.yaml",
            gateway::attached_routes
        ),
        core!(
            "GatewayListenerUnsupportedProtocol",
            "unsupported-protocol.yaml",
            tls::unsupported_protocol
        ),
        core!(
            "GatewayInvalidTLSConfiguration",
            "invalid-tls.yaml",
            tls::invalid_tls_configuration
        ),
        core!(
            "GatewaySecretInvalidReferenceGrant",
            "secret-invalid-grant.yaml",
            tls::secret_invalid_reference_grant
        ),
        core!(
            "GatewaySecretMissingReferenceGrant",
            "secret-missing-grant.yaml",
            tls::secret_missing_reference_grant
        ),
        core!(
            "GatewaySecretReferenceGrantAllInNamespace",
            "secret-grant-all.yaml",
            tls::secret_reference_grant_all
        ),
        core!(
            "GatewaySecretReferenceGrantSpecific",
            "secret-grant-specific.yaml",
            tls::secret_reference_grant_specific
        ),
        core!(
            "HTTPRouteHTTPSListener",
            "https-listener.yaml",
            tls::https_listener_routes
        ),
        core!(
            "HTTPRouteSimpleSameNamespace",
            "simple-same-namespace.yaml",
            httproute::simple_same_namespace
        ),
        core!(
            "HTTPRouteCrossNamespace",
            "cross-namespace.yaml",
            httproute::cross_namespace
        ),
        core!(
            "HTTPRouteExactPathMatching",
            "exact-path.yaml",
            httproute::exact_path
        ),
        core!(
            "HTTPRouteHeaderMatching",
            "header-matching.yaml",
            httproute::header_matching
        ),
        core!(
            "HTTPRouteHostnameIntersection",
            "hostname-intersection.yaml",
            httproute::hostname_intersection
        ),
        core!(
            "HTTPRouteListenerHostnameMatching",
            "listener-hostname-matching.yaml",
            httproute::listener_hostname_matching
        ),
        core!(
            "HTTPRouteMatchingAcrossRoutes",
            "matching-across-routes.yaml",
            httproute::matching_across_routes
        ),
        core!("HTTPRouteMatching", "matching.yaml", httproute::matching),
        core!(
            "HTTPRoutePartiallyInvalidViaInvalidReferenceGrant",
            "partially-invalid-grant.yaml",
            references::partially_invalid_grant
        ),
        core!(
            "HTTPRouteReferenceGrant",
            "reference-grant.yaml",
            references::reference_grant
        ),
        core!(
            "HTTPRouteInvalidReferenceGrant",
            "invalid-reference-grant.yaml",
            references::invalid_reference_grant
        ),
        core!(
            "HTTPRouteInvalidCrossNamespaceParentRef",
            "invalid-cross-namespace-parent.yaml",
            references::invalid_cross_namespace_parent
        ),
        core!(
            "HTTPRouteInvalidCrossNamespaceBackendRef",
            "invalid-cross-namespace-backend.yaml",
            references::invalid_cross_namespace_backend
        ),
        core!(
            "HTTPRouteDisallowedKind",
            "disallowed-kind.yaml",
            references::disallowed_kind
        ),
        core!(
            "HTTPRouteInvalidParentRefNotMatchingListenerPort",
            "invalid-parentref.yaml",
            references::parent_wrong_port
        ),
        core!(
            "HTTPRouteInvalidParentRefNotMatchingSectionName",
            "invalid-parentref.yaml",
            references::parent_wrong_section
        ),
        core!(
            "HTTPRouteInvalidParentRefSectionNameNotMatchingPort",
            "invalid-parentref.yaml",
            references::parent_section_other_port
        ),
        core!(
            "HTTPRouteInvalidNonExistentBackendRef",
            "invalid-backend-nonexistent.yaml",
            references::nonexistent_backend
        ),
        core!(
            "HTTPRouteInvalidBackendRefUnknownKind",
            "invalid-backend-unknown-kind.yaml",
            references::unknown_kind_backend
        ),
        core!("HTTPRouteWeight", "weight.yaml", httproute::weight),
        core!(
            "HTTPRouteRequestHeaderModifier",
            "request-header-modifier.yaml",
            httproute::request_header_modifier
        ),
        core!(
            "HTTPRouteRedirectHostAndStatus",
            "redirect-host-status.yaml",
            httproute::redirect_host_and_status
        ),
        core!(
            "HTTPRouteObservedGenerationBump",
            "route-generation.yaml",
            httproute::route_generation
        ),
        core!(
            "HTTPRouteServiceTypes",
            "service-types.yaml",
            httproute::service_types
        ),
        core!(
            "HTTPRouteMultipleGateways",
            "multiple-gateways.yaml",
            httproute::multiple_gateways
        ),
        core!(
            "HTTPRouteNamespaceAttachment",
            "namespace-attachment.yaml",
            httproute::namespace_attachment
        ),
        core!(
            "HTTPRouteAllowedRoutesLabelSelector",
            "label-selector.yaml",
            httproute::label_selector
        ),
        core!(
            "HTTPRoutePathMatchOrder",
            "path-match-order.yaml",
            httproute::path_match_order
        ),
        core!(
            "HTTPRouteNoBackendRefs",
            "omitted-backendrefs.yaml",
            backends::no_backend_refs
        ),
        extended!(
            "HTTPRouteQueryParamMatching",
            "HTTPRouteQueryParamMatching",
            "query-param-matching.yaml",
            extended::query_param_matching
        ),
        extended!(
            "HTTPRouteMethodMatching",
            "HTTPRouteMethodMatching",
            "method-matching.yaml",
            extended::method_matching
        ),
        extended!(
            "HTTPRouteResponseHeaderModifier",
            "HTTPRouteResponseHeaderModification",
            "response-header-modifier.yaml",
            extended::response_header_modifier
        ),
        extended!(
            "HTTPRouteBackendRequestHeaderModifier",
            "HTTPRouteBackendRequestHeaderModification",
            "backend-request-header-modifier.yaml",
            extended::backend_request_header_modifier
        ),
        extended!(
            "HTTPRouteRequestHeaderModifierBackendWeights",
            "HTTPRouteBackendRequestHeaderModification",
            "backend-weights-header.yaml",
            backends::header_modifier_backend_weights
        ),
        extended!(
            "HTTPRouteRedirectPort",
            "HTTPRoutePortRedirect",
            "redirects.yaml",
            redirects::port_redirect
        ),
        extended!(
            "HTTPRouteRedirectScheme",
            "HTTPRouteSchemeRedirect",
            "redirects.yaml",
            redirects::scheme_redirect
        ),
        extended!(
            "HTTPRouteRedirectPath",
            "HTTPRoutePathRedirect",
            "redirects.yaml",
            redirects::path_redirect
        ),
        extended!(
            "HTTPRoute303Redirect",
            "HTTPRoute303RedirectStatusCode",
            "redirects.yaml",
            redirects::redirect_303
        ),
        extended!(
            "HTTPRoute307Redirect",
            "HTTPRoute307RedirectStatusCode",
            "redirects.yaml",
            redirects::redirect_307
        ),
        extended!(
            "HTTPRoute308Redirect",
            "HTTPRoute308RedirectStatusCode",
            "redirects.yaml",
            redirects::redirect_308
        ),
        extended!(
            "HTTPRouteRewriteHost",
            "HTTPRouteHostRewrite",
            "rewrites.yaml",
            redirects::host_rewrite
        ),
        extended!(
            "HTTPRouteRewritePath",
            "HTTPRoutePathRewrite",
            "rewrites.yaml",
            redirects::path_rewrite
        ),
        extended!(
            "HTTPRouteRequestMirror",
            "HTTPRouteRequestMirror",
            "mirror.yaml",
            extended::request_mirror
        ),
        extended!(
            "HTTPRouteRequestMultipleMirrors",
            "HTTPRouteRequestMultipleMirrors",
            "multiple-mirrors.yaml",
            extended::multiple_mirrors
        ),
        extended!(
            "HTTPRouteRequestPercentageMirror",
            "HTTPRouteRequestPercentageMirror",
            "percentage-mirror.yaml",
            extended::percentage_mirror
        ),
        extended!(
            "HTTPRouteTimeoutRequest",
            "HTTPRouteRequestTimeout",
            "request-timeout.yaml",
            extended::request_timeout
        ),
        extended!(
            "HTTPRouteTimeoutBackendRequest",
            "HTTPRouteBackendTimeout",
            "backend-timeout.yaml",
            extended::backend_timeout
        ),
        extended!(
            "HTTPRouteRetry",
            "HTTPRouteRetry",
            "retry.yaml",
            retries::retry
        ),
        extended!(
            "HTTPRouteRetryConnectionError",
            "HTTPRouteRetryConnectionError",
            "retry-connection-error.yaml",
            retries::retry_connection_error
        ),
        extended!(
            "HTTPRouteRetryWithTimeouts",
            "HTTPRouteRetryBackendTimeout",
            "retry-timeouts.yaml",
            retries::retry_with_timeouts
        ),
        extended!(
            "HTTPRouteSessionPersistence",
            "HTTPRouteSessionPersistence",
            "session-persistence.yaml",
            retries::session_persistence
        ),
        extended!(
            "HTTPRouteListenerPortMatching",
            "HTTPRouteParentRefPort",
            "parent-ref-port.yaml",
            extended::parent_ref_port
        ),
        extended!(
            "HTTPRouteBackendProtocolH2C",
            "HTTPRouteBackendProtocolH2C",
            "backend-protocols.yaml",
            extended::backend_h2c
        ),
        extended!(
            "HTTPRouteBackendProtocolWebSocket",
            "HTTPRouteBackendProtocolWebSocket",
            "backend-protocols.yaml",
            extended::backend_websocket
        ),
        extended!(
            "HTTPRouteNamedRule",
            "HTTPRouteNamedRouteRule",
            "named-rule.yaml",
            extended::named_rule
        ),
        extended!(
            "HTTPRouteCORS",
            "HTTPRouteCORS",
            "cors.yaml",
            extended::cors
        ),
        extended!(
            "GatewayWithAttachedRoutesWithPort8080",
            "GatewayPort8080",
            "port-8080.yaml",
            extended::port_8080
        ),
        extended!(
            "GatewayStaticAddresses",
            "GatewayStaticAddresses",
            "static-addresses.yaml",
            extended::static_addresses
        ),
        extended!(
            "GatewayHTTPListenerIsolation",
            "GatewayHTTPListenerIsolation",
            "listener-isolation.yaml",
            extended::listener_isolation
        ),
        extended!(
            "GatewayHTTPListenerIsolationWithHostnameIntersection",
            "GatewayHTTPListenerIsolation",
            "listener-isolation-intersection.yaml",
            extended::listener_isolation_intersection
        ),
        extended!(
            "HTTPRouteHTTPSListenerDetectMisdirectedRequests",
            "GatewayHTTPSListenerDetectMisdirectedRequests",
            "https-misdirected.yaml",
            tls::misdirected_requests
        ),
        extended!(
            "GatewayOptionalAddressValue",
            "GatewayAddressEmpty",
            "address-empty.yaml",
            extended::address_empty
        ),
        extended!(
            "HTTPRouteRedirectPortAndScheme",
            "HTTPRoutePortRedirect",
            "redirect-port-and-scheme.yaml",
            tls::redirect_port_and_scheme
        ),
        extended!(
            "GatewayFrontendClientCertificateValidation",
            "GatewayFrontendClientCertificateValidation",
            "client-cert-validation.yaml",
            client_certs::validation
        ),
        extended!(
            "GatewayFrontendClientCertificateValidationInsecureFallback",
            "GatewayFrontendClientCertificateValidationInsecureFallback",
            "client-cert-insecure-fallback.yaml",
            client_certs::insecure_fallback
        ),
        extended!(
            "GatewayFrontendInvalidDefaultClientCertificateValidation",
            "GatewayFrontendClientCertificateValidation",
            "client-cert-invalid-default.yaml",
            client_certs::invalid_default
        ),
        extended!(
            "GatewayInvalidFrontendClientCertificateValidation",
            "GatewayFrontendClientCertificateValidation",
            "client-cert-invalid-refs.yaml",
            client_certs::invalid_references
        ),
        extended!(
            "BackendTLSPolicy",
            "BackendTLSPolicy",
            "backend-tls-policy.yaml",
            backend_tls::policy
        ),
        extended!(
            "BackendTLSPolicyConflictResolution",
            "BackendTLSPolicy",
            "backend-tls-policy-conflicts.yaml",
            backend_tls::conflict_resolution
        ),
        extended!(
            "BackendTLSPolicyInvalidCACertificateRef",
            "BackendTLSPolicy",
            "backend-tls-policy-invalid-ca.yaml",
            backend_tls::invalid_ca_certificate_ref
        ),
        extended!(
            "BackendTLSPolicyInvalidKind",
            "BackendTLSPolicy",
            "backend-tls-policy-invalid-kind.yaml",
            backend_tls::invalid_kind
        ),
        extended!(
            "BackendTLSPolicyObservedGenerationBump",
            "BackendTLSPolicy",
            "backend-tls-policy-generation.yaml",
            backend_tls::observed_generation_bump
        ),
        extended!(
            "BackendTLSPolicySANValidation",
            "BackendTLSPolicySANValidation",
            "backend-tls-policy-san.yaml",
            backend_tls::subject_alt_names
        ),
        extended!(
            "GatewayTLSBackendClientCertificate",
            "GatewayBackendClientCertificate",
            "gateway-backend-client-certificate.yaml",
            backend_tls::gateway_client_certificate
        ),
        extended!(
            "GatewayInvalidTLSBackendConfiguration",
            "GatewayBackendClientCertificate",
            "gateway-invalid-backend-tls.yaml",
            backend_tls::invalid_backend_configuration
        ),
    ]
    .into_iter()
    .chain(grpc::scenarios())
    .chain(listenerset::scenarios())
    .chain(crate::l4_scenarios::all())
    .chain(skipped::all())
    .collect()
}

/// Runs one scenario to a verdict (in Kubernetes mode when `kube`). A failing scenario of an
/// extended feature the GatewayClass does not claim is reported as skipped, naming the feature.
pub async fn run(s: &Scenario, timeout: Duration, kube: bool) -> Verdict {
    let Some(run) = s.run else {
        return Verdict::Skipped(s.skip.unwrap_or("not runnable").to_owned());
    };
    let body = async {
        let env = Arc::new(Env::start_in(s.manifests, kube).await?);
        run(env).await
    };
    let outcome = match tokio::time::timeout(timeout, body).await {
        Ok(o) => o,
        Err(_) => Err(format!("did not finish within {timeout:?}")),
    };
    match (outcome, s.feature) {
        (Ok(()), _) => Verdict::Passed,
        (Err(e), Some(f)) if !crate::harness::claimed(kube).contains(&f) => {
            Verdict::Skipped(format!("feature {f} not supported: {e}"))
        }
        (Err(e), _) => Verdict::Failed(e),
    }
}
