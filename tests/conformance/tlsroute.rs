//! Scenarios of profile GATEWAY-TLS: TLSRoutes on TLS listeners in Passthrough mode (the client
//! verifies the backend's own certificate), in Terminate mode (the Gateway's certificate, a
//! plaintext backend), both on one port, and routes whose references or hostnames do not hold.

use std::sync::Arc;

use crate::expect::{check_tls, Outcome, Req, Want};
use crate::harness::Env;
use crate::status::{gateway_listeners, route_condition_of, wait_status, Cond, Listener};
use crate::INFRA;

const KIND: &str = "TLSRoute";

/// A TLS listener `name` carrying TLSRoutes, `attached` of them, accepted and programmed.
fn tls_listener(name: &'static str, attached: i64) -> Listener {
    Listener {
        name,
        kinds: &["TLSRoute"],
        attached,
        conditions: vec![
            Cond("Accepted", "True", "Accepted"),
            Cond("Programmed", "True", "Programmed"),
            Cond("ResolvedRefs", "True", "ResolvedRefs"),
        ],
    }
}

/// Route `route` accepted by Gateway `gw` with its references resolved.
fn accepted(r: &crate::status::Report, route: &str, gw: &str) -> Outcome {
    route_condition_of(
        r,
        KIND,
        INFRA,
        route,
        INFRA,
        gw,
        Cond("Accepted", "True", "Accepted"),
    )?;
    let resolved = Cond("ResolvedRefs", "True", "ResolvedRefs");
    route_condition_of(r, KIND, INFRA, route, INFRA, gw, resolved)
}

/// An HTTP request over TLS to `gw`'s port 443 with `host` as SNI and Host.
async fn over_tls(env: &Env, gw: &str, host: &str, backend: &str) -> Outcome {
    let req = Req::get("/").host(host).port(443);
    check_tls(env, env.gw(gw), host, false, &req, &Want::ok(backend)).await
}

pub async fn simple_passthrough(env: Arc<Env>) -> Outcome {
    wait_status(&env, "passthrough route accepted", |r| {
        gateway_listeners(r, INFRA, "tls-passthrough", &[tls_listener("tls", 1)])?;
        accepted(r, "passthrough", "tls-passthrough")
    })
    .await?;
    // The handshake is with the backend pod, which presents the scenario certificate itself.
    over_tls(
        &env,
        "tls-passthrough",
        "fourth-example.wildcard.org",
        "tls-backend",
    )
    .await
}

pub async fn simple_terminate(env: Arc<Env>) -> Outcome {
    wait_status(&env, "terminate route accepted", |r| {
        gateway_listeners(r, INFRA, "tls-terminate", &[tls_listener("tls", 1)])?;
        accepted(r, "terminated", "tls-terminate")
    })
    .await?;
    over_tls(
        &env,
        "tls-terminate",
        "second-example.org",
        "infra-backend-v1",
    )
    .await
}

pub async fn mixed_termination(env: Arc<Env>) -> Outcome {
    wait_status(&env, "both routes accepted", |r| {
        let listeners = [tls_listener("terminate", 1), tls_listener("passthrough", 1)];
        gateway_listeners(r, INFRA, "tls-mixed", &listeners)?;
        accepted(r, "to-terminate", "tls-mixed")?;
        accepted(r, "to-passthrough", "tls-mixed")
    })
    .await?;
    over_tls(&env, "tls-mixed", "second-example.org", "infra-backend-v1").await?;
    over_tls(
        &env,
        "tls-mixed",
        "fourth-example.wildcard.org",
        "mixed-tls-backend",
    )
    .await
}

/// The route attached (counted on the listener, `Accepted` True) with `ResolvedRefs` False for
/// `reason`.
async fn unresolved(env: &Env, route: &str, reason: &'static str) -> Outcome {
    wait_status(env, &format!("{route}: ResolvedRefs {reason}"), |r| {
        gateway_listeners(r, INFRA, "tls-invalid", &[tls_listener("tls", 3)])?;
        let a = Cond("Accepted", "True", "Accepted");
        route_condition_of(r, KIND, INFRA, route, INFRA, "tls-invalid", a)?;
        let c = Cond("ResolvedRefs", "False", reason);
        route_condition_of(r, KIND, INFRA, route, INFRA, "tls-invalid", c)
    })
    .await
}

pub async fn invalid_backend_nonexistent(env: Arc<Env>) -> Outcome {
    unresolved(&env, "nonexistent-backend", "BackendNotFound").await
}

pub async fn invalid_backend_unknown_kind(env: Arc<Env>) -> Outcome {
    unresolved(&env, "unknown-kind", "InvalidKind").await
}

pub async fn invalid_reference_grant(env: Arc<Env>) -> Outcome {
    unresolved(&env, "not-granted", "RefNotPermitted").await
}

pub async fn invalid_no_matching_listener_hostname(env: Arc<Env>) -> Outcome {
    wait_status(&env, "other-hostname not accepted", |r| {
        gateway_listeners(r, INFRA, "tls-invalid", &[tls_listener("tls", 3)])?;
        let c = Cond("Accepted", "False", "NoMatchingListenerHostname");
        route_condition_of(r, KIND, INFRA, "other-hostname", INFRA, "tls-invalid", c)
    })
    .await
}

pub async fn invalid_no_matching_listener(env: Arc<Env>) -> Outcome {
    wait_status(&env, "no-such-listener not accepted", |r| {
        gateway_listeners(r, INFRA, "tls-invalid", &[tls_listener("tls", 3)])?;
        let c = Cond("Accepted", "False", "NoMatchingParent");
        route_condition_of(r, KIND, INFRA, "no-such-listener", INFRA, "tls-invalid", c)
    })
    .await
}

pub async fn hostname_intersection(env: Arc<Env>) -> Outcome {
    wait_status(&env, "routes accepted on both listeners", |r| {
        gateway_listeners(
            r,
            INFRA,
            "tls-wildcard-listener",
            &[tls_listener("wildcard", 2)],
        )?;
        gateway_listeners(r, INFRA, "tls-exact-listener", &[tls_listener("exact", 1)])?;
        accepted(r, "exact-name", "tls-wildcard-listener")?;
        accepted(r, "wildcard-name", "tls-wildcard-listener")?;
        accepted(r, "wildcard-name", "tls-exact-listener")
    })
    .await?;
    // The exact route hostname is more specific than the wildcard one.
    let wildcard = "tls-wildcard-listener";
    over_tls(&env, wildcard, "fourth-example.wildcard.org", "tls-backend").await?;
    over_tls(&env, wildcard, "other.wildcard.org", "tls-backend-2").await?;
    // On the exact listener the wildcard route serves the listener's own name.
    over_tls(
        &env,
        "tls-exact-listener",
        "fourth-example.wildcard.org",
        "tls-backend-2",
    )
    .await
}

/// A Passthrough listener lists TLSRoute and refuses TCPRoute (`InvalidRouteKinds`).
pub async fn listener_passthrough_supported_kinds(env: Arc<Env>) -> Outcome {
    wait_status(&env, "passthrough listener kinds", |r| {
        let listener = Listener {
            name: "tls-passthrough",
            kinds: &["TLSRoute"],
            attached: 0,
            conditions: vec![Cond("ResolvedRefs", "False", "InvalidRouteKinds")],
        };
        gateway_listeners(
            r,
            INFRA,
            "gateway-tlsroute-passthrough-supported-kind",
            &[listener],
        )
    })
    .await
}

/// A Terminate listener is accepted and lists TLSRoute.
pub async fn listener_terminate_supported_kinds(env: Arc<Env>) -> Outcome {
    wait_status(&env, "terminate listener kinds", |r| {
        let listener = Listener {
            name: "tls-terminate",
            kinds: &["TLSRoute"],
            attached: 0,
            conditions: vec![Cond("Accepted", "True", "Accepted")],
        };
        gateway_listeners(
            r,
            INFRA,
            "gateway-tlsroute-terminate-supported",
            &[listener],
        )
    })
    .await
}

/// Upstream checks these listeners only for implementations that do not claim `feature`
/// (the listeners must then be refused with `reason`); one that claims it passes, as here.
async fn refused_unless_claimed(
    env: &Env,
    feature: &str,
    gw: &str,
    listeners: &[&'static str],
    reason: &'static str,
) -> Outcome {
    if env.claimed().contains(&feature) {
        return Ok(());
    }
    wait_status(env, "listeners refused", |r| {
        let expected: Vec<Listener> = listeners
            .iter()
            .map(|name| Listener {
                name,
                kinds: &["TLSRoute"],
                attached: 0,
                conditions: vec![Cond("Accepted", "False", reason)],
            })
            .collect();
        gateway_listeners(r, INFRA, gw, &expected)
    })
    .await
}

pub async fn listener_terminate_not_supported(env: Arc<Env>) -> Outcome {
    let gw = "gateway-tlsroute-terminate-supported";
    let feature = "TLSRouteModeTerminate";
    refused_unless_claimed(&env, feature, gw, &["tls-terminate"], "UnsupportedValue").await
}

pub async fn listener_mixed_termination_not_supported(env: Arc<Env>) -> Outcome {
    let gw = "gateway-tlsroute-mixed-termination-not-supported";
    let listeners = ["tls-terminate", "tls-passthrough"];
    let feature = "TLSRouteModeMixed";
    refused_unless_claimed(&env, feature, gw, &listeners, "ProtocolConflict").await
}
