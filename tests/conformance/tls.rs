//! Scenarios of HTTPS listeners: certificateRef validation and ReferenceGrants for Secrets
//! (listener status), HTTPRoutes served over TLS with SNI, misdirected requests (421), and
//! unsupported listener protocols.

use std::sync::Arc;

use crate::expect::{check, check_tls, Outcome, Req, Want};
use crate::harness::Env;
use crate::status::{
    gateway_conditions, gateway_listeners, routes_accepted, routes_accepted_at, wait_status, Cond,
    Listener, Report,
};
use crate::INFRA;

/// `GatewayStatusMustHaveListeners` with one listener `https` of the default kinds, no attached
/// route, and the given conditions.
fn https_listener(r: &Report, gw: &str, conditions: &[Cond]) -> Outcome {
    gateway_listeners(
        r,
        INFRA,
        gw,
        &[Listener::http_default_kinds("https", 0, conditions)],
    )
}

/// A missing Secret, a ref of another group or kind, and a malformed Secret all leave the
/// listener with ResolvedRefs False, InvalidCertificateRef.
pub async fn invalid_tls_configuration(env: Arc<Env>) -> Outcome {
    wait_status(&env, "listeners report InvalidCertificateRef", |r| {
        for gw in [
            "nonexistent-secret",
            "unsupported-group",
            "unsupported-kind",
            "malformed-secret",
        ] {
            https_listener(
                r,
                gw,
                &[Cond("ResolvedRefs", "False", "InvalidCertificateRef")],
            )?;
        }
        Ok(())
    })
    .await
}

/// Grants that miss in namespace, from-group, from-kind, from-namespace, to-group, to-kind or
/// to-name do not permit the Secret.
pub async fn secret_invalid_reference_grant(env: Arc<Env>) -> Outcome {
    wait_status(&env, "listener reports RefNotPermitted", |r| {
        https_listener(
            r,
            "secret-invalid-grant",
            &[Cond("ResolvedRefs", "False", "RefNotPermitted")],
        )
    })
    .await
}

/// No grant at all: RefNotPermitted.
pub async fn secret_missing_reference_grant(env: Arc<Env>) -> Outcome {
    wait_status(&env, "listener reports RefNotPermitted", |r| {
        https_listener(
            r,
            "secret-missing-grant",
            &[Cond("ResolvedRefs", "False", "RefNotPermitted")],
        )
    })
    .await
}

async fn granted(env: &Env, gw: &'static str) -> Outcome {
    wait_status(env, "listener resolved and programmed", |r| {
        https_listener(
            r,
            gw,
            &[
                Cond("Programmed", "True", "Programmed"),
                Cond("ResolvedRefs", "True", ""),
            ],
        )
    })
    .await
}

/// A grant to every Secret of the namespace permits the reference.
pub async fn secret_reference_grant_all(env: Arc<Env>) -> Outcome {
    granted(&env, "secret-grant-all").await
}

/// A grant naming the Secret permits the reference.
pub async fn secret_reference_grant_specific(env: Arc<Env>) -> Outcome {
    granted(&env, "secret-grant-specific").await
}

const HTTPS_GW: &str = "same-namespace-with-https-listener";

/// Waits until each route is accepted on the HTTPS Gateway, at the listeners its parentRef
/// names (none: the whole Gateway).
async fn https_routes_ready(env: &Env, routes: &[(&str, &[&'static str])]) -> Outcome {
    wait_status(env, "HTTPS Gateway and routes ready", |r| {
        routes.iter().try_for_each(|(route, sections)| {
            routes_accepted_at(r, HTTPS_GW, sections, &[(INFRA, *route)])
        })
    })
    .await
}

/// Routes on HTTPS listeners, reached over TLS with the host as SNI.
pub async fn https_listener_routes(env: Arc<Env>) -> Outcome {
    https_routes_ready(
        &env,
        &[
            ("httproute-https-test", &[]),
            ("httproute-https-test-no-hostname", &["https-with-hostname"]),
        ],
    )
    .await?;
    let ip = env.gw(HTTPS_GW);
    for (host, want) in [
        ("example.org", Want::ok("infra-backend-v1")),
        ("unknown-example.org", Want::status(404)),
        ("second-example.org", Want::ok("infra-backend-v2")),
    ] {
        let req = Req::get("/").host(host).port(443);
        check_tls(&env, ip, host, false, &req, &want).await?;
    }
    Ok(())
}

/// HTTP/2 requests whose host belongs to another listener than the SNI's get 421.
pub async fn misdirected_requests(env: Arc<Env>) -> Outcome {
    https_routes_ready(
        &env,
        &[
            ("misdirected-1", &["https"]),
            ("misdirected-2", &["https-with-hostname"]),
            ("misdirected-3", &["https-with-wildcard-hostname"]),
            ("misdirected-4", &["https-with-hostname-matching-wildcard"]),
        ],
    )
    .await?;
    let ip = env.gw(HTTPS_GW);
    let ok = Want::ok;
    let code = Want::status;
    let cases = [
        ("example.org", "example.org", ok("infra-backend-v1")),
        ("example.org", "second-example.org", code(421)),
        ("example.org", "unknown-example.org", code(404)),
        (
            "second-example.org",
            "second-example.org",
            ok("infra-backend-v2"),
        ),
        ("second-example.org", "example.org", code(421)),
        ("second-example.org", "unknown-example.org", code(421)),
        (
            "third-example.wildcard.org",
            "third-example.wildcard.org",
            ok("infra-backend-v3"),
        ),
        (
            "third-example.wildcard.org",
            "fith-example.wildcard.org",
            ok("infra-backend-v3"),
        ),
        (
            "third-example.wildcard.org",
            "fourth-example.wildcard.org",
            code(421),
        ),
        (
            "third-example.wildcard.org",
            "second-example.org",
            code(421),
        ),
        (
            "third-example.wildcard.org",
            "unknown-example.org",
            code(421),
        ),
        (
            "fourth-example.wildcard.org",
            "fourth-example.wildcard.org",
            ok("infra-backend-v1"),
        ),
        (
            "fourth-example.wildcard.org",
            "fith-example.wildcard.org",
            code(421),
        ),
        ("unknown-example.org", "example.org", ok("infra-backend-v1")),
        ("unknown-example.org", "unknown-example.org", code(404)),
    ];
    for (sni, host, want) in cases {
        let req = Req::get("/detect-misdirected-requests")
            .host(host)
            .port(443);
        check_tls(&env, ip, sni, true, &req, &want).await?;
    }
    Ok(())
}

/// Listeners of an unknown protocol are not accepted (UnsupportedProtocol, no supported
/// kinds); a Gateway with no other listener is not accepted, one with an HTTP listener is.
pub async fn unsupported_protocol(env: Arc<Env>) -> Outcome {
    let unsupported = || {
        Listener::no_kinds(
            "invalid",
            &[Cond("Accepted", "False", "UnsupportedProtocol")],
        )
    };
    wait_status(&env, "unsupported protocols rejected", |r| {
        let only = "only-unsupported-protocols";
        gateway_conditions(
            r,
            INFRA,
            only,
            &[Cond("Accepted", "False", "ListenersNotValid")],
        )?;
        gateway_listeners(r, INFRA, only, &[unsupported()])?;
        let mixed = "supported-and-unsupported-protocols";
        gateway_conditions(
            r,
            INFRA,
            mixed,
            &[Cond("Accepted", "True", "ListenersNotValid")],
        )?;
        let accepted = [Cond("Accepted", "True", "Accepted")];
        let http = Listener::http_default_kinds("http", 0, &accepted);
        gateway_listeners(r, INFRA, mixed, &[http, unsupported()])
    })
    .await
}

/// Redirects without a port take the listener's port (HTTP on 80 and 8080) or the scheme's
/// well-known port; HTTPS listeners redirect the same way over TLS.
pub async fn redirect_port_and_scheme(env: Arc<Env>) -> Outcome {
    const HTTP_8080: &str = "same-namespace-with-http-listener-on-8080";
    wait_status(&env, "redirect routes accepted", |r| {
        routes_accepted(r, "same-namespace", &[(INFRA, "redirect-on-80")])?;
        routes_accepted(r, HTTP_8080, &[(INFRA, "redirect-on-8080")])?;
        routes_accepted(r, HTTPS_GW, &[(INFRA, "redirect-on-443")])
    })
    .await?;
    let to = |location: &str| Want::redirect(302, location);
    let on_80 = [
        (
            "/scheme-nil-and-port-nil",
            "http://example.org/scheme-nil-and-port-nil",
        ),
        (
            "/scheme-nil-and-port-80",
            "http://example.org/scheme-nil-and-port-80",
        ),
        (
            "/scheme-nil-and-port-8080",
            "http://example.org:8080/scheme-nil-and-port-8080",
        ),
        (
            "/scheme-https-and-port-nil",
            "https://example.org/scheme-https-and-port-nil",
        ),
        (
            "/scheme-https-and-port-443",
            "https://example.org/scheme-https-and-port-443",
        ),
        (
            "/scheme-https-and-port-8443",
            "https://example.org:8443/scheme-https-and-port-8443",
        ),
    ];
    for (path, location) in on_80 {
        check(env.gw("same-namespace"), &Req::get(path), &to(location)).await?;
    }
    let on_8080 = [
        (
            "/scheme-nil-and-port-nil",
            "http://example.org:8080/scheme-nil-and-port-nil",
        ),
        (
            "/scheme-nil-and-port-80",
            "http://example.org/scheme-nil-and-port-80",
        ),
        (
            "/scheme-https-and-port-nil",
            "https://example.org/scheme-https-and-port-nil",
        ),
    ];
    for (path, location) in on_8080 {
        check(env.gw(HTTP_8080), &Req::get(path).port(8080), &to(location)).await?;
    }
    let on_443 = [
        (
            "/scheme-nil-and-port-nil",
            "https://example.org/scheme-nil-and-port-nil",
        ),
        (
            "/scheme-nil-and-port-443",
            "https://example.org/scheme-nil-and-port-443",
        ),
        (
            "/scheme-nil-and-port-8443",
            "https://example.org:8443/scheme-nil-and-port-8443",
        ),
        (
            "/scheme-http-and-port-nil",
            "http://example.org/scheme-http-and-port-nil",
        ),
        (
            "/scheme-http-and-port-80",
            "http://example.org/scheme-http-and-port-80",
        ),
        (
            "/scheme-http-and-port-8080",
            "http://example.org:8080/scheme-http-and-port-8080",
        ),
    ];
    let ip = env.gw(HTTPS_GW);
    for (path, location) in on_443 {
        let req = Req::get(path).host("example.org").port(443);
        check_tls(&env, ip, "example.org", false, &req, &to(location)).await?;
    }
    Ok(())
}
