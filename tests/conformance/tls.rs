//! Scenarios of HTTPS listeners: certificateRef validation and ReferenceGrants for Secrets
//! (listener status), HTTPRoutes served over TLS with SNI, misdirected requests (421), and
//! unsupported listener protocols.

use std::sync::Arc;

use crate::expect::{check_tls, cond, route_ready, wait_status, Outcome, Report, Req, Want};
use crate::harness::Env;
use crate::INFRA;

/// Listener `https` of Gateway `gw`: the given ResolvedRefs status and reason, HTTPRoute as
/// its supported kind, no attached routes.
fn https_listener(r: &Report, gw: &str, resolved: &str, reason: &str) -> Outcome {
    let l = r.listener(INFRA, gw, "https")?;
    cond(l, "ResolvedRefs", resolved, reason)?;
    let kinds: Vec<&str> = l["supportedKinds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k["kind"].as_str())
        .collect();
    if kinds != ["HTTPRoute"] {
        return Err(format!(
            "{gw}/https supportedKinds {kinds:?}, want [HTTPRoute]"
        ));
    }
    if l["attachedRoutes"] != 0 {
        return Err(format!("{gw}/https attachedRoutes {}", l["attachedRoutes"]));
    }
    Ok(())
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
            https_listener(r, gw, "False", "InvalidCertificateRef")?;
            cond(r.listener(INFRA, gw, "https")?, "Programmed", "False", "")?;
        }
        Ok(())
    })
    .await
}

/// Grants that miss in namespace, from-group, from-kind, from-namespace, to-group, to-kind or
/// to-name do not permit the Secret.
pub async fn secret_invalid_reference_grant(env: Arc<Env>) -> Outcome {
    wait_status(&env, "listener reports RefNotPermitted", |r| {
        https_listener(r, "secret-invalid-grant", "False", "RefNotPermitted")
    })
    .await
}

/// No grant at all: RefNotPermitted.
pub async fn secret_missing_reference_grant(env: Arc<Env>) -> Outcome {
    wait_status(&env, "listener reports RefNotPermitted", |r| {
        https_listener(r, "secret-missing-grant", "False", "RefNotPermitted")
    })
    .await
}

async fn granted(env: &Env, gw: &'static str) -> Outcome {
    wait_status(env, "listener resolved and programmed", |r| {
        https_listener(r, gw, "True", "")?;
        cond(
            r.listener(INFRA, gw, "https")?,
            "Programmed",
            "True",
            "Programmed",
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

async fn https_routes_ready(env: &Env, routes: &[&str]) -> Outcome {
    wait_status(env, "HTTPS Gateway and routes ready", |r| {
        crate::expect::gateway_ready(r, INFRA, HTTPS_GW)?;
        for route in routes {
            route_ready(r, INFRA, route, &[HTTPS_GW])?;
        }
        Ok(())
    })
    .await
}

/// Routes on HTTPS listeners, reached over TLS with the host as SNI.
pub async fn https_listener_routes(env: Arc<Env>) -> Outcome {
    https_routes_ready(
        &env,
        &["httproute-https-test", "httproute-https-test-no-hostname"],
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
            "misdirected-1",
            "misdirected-2",
            "misdirected-3",
            "misdirected-4",
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
    wait_status(&env, "unsupported protocols rejected", |r| {
        let only = r.gateway(INFRA, "only-unsupported-protocols")?;
        cond(only, "Accepted", "False", "ListenersNotValid")?;
        let mixed = r.gateway(INFRA, "supported-and-unsupported-protocols")?;
        cond(mixed, "Accepted", "True", "ListenersNotValid")?;
        for gw in [
            "only-unsupported-protocols",
            "supported-and-unsupported-protocols",
        ] {
            let l = r.listener(INFRA, gw, "invalid")?;
            cond(l, "Accepted", "False", "UnsupportedProtocol")?;
            if l["supportedKinds"]
                .as_array()
                .is_some_and(|k| !k.is_empty())
            {
                return Err(format!(
                    "{gw}/invalid supportedKinds {}",
                    l["supportedKinds"]
                ));
            }
        }
        let http = r.listener(INFRA, "supported-and-unsupported-protocols", "http")?;
        cond(http, "Accepted", "True", "Accepted")
    })
    .await
}
