//! Scenarios of client-certificate validation (Gateway `spec.tls.frontend`): requests with a
//! certificate of the right CA are served, others fail (or are served in
//! `AllowInsecureFallback` mode); invalid CA references fail only their listeners, with the
//! spec's reasons.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, SignatureScheme};

use crate::expect::{check, check_tls_config, Outcome, Req, Want};
use crate::harness::Env;
use crate::status::{gateway_conditions, routes_accepted_at, wait_status, Cond, Report};
use crate::support::tls::{
    client_config, client_config_with_identity, connect, ClientIdentity, Session,
};
use crate::INFRA;

/// Records whether the server asked for a client certificate.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn ResolvesClientCert>,
    asked: Arc<AtomicBool>,
}

impl ResolvesClientCert for Recording {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.asked.store(true, Ordering::SeqCst);
        self.inner.resolve(root_hint_subjects, sigschemes)
    }

    fn has_certs(&self) -> bool {
        self.inner.has_certs()
    }
}

/// A client trusting the scenario's server certificate, presenting `identity` (if any).
fn config(env: &Env, identity: Option<&ClientIdentity>) -> (Arc<ClientConfig>, Arc<AtomicBool>) {
    let base = match identity {
        Some(id) => client_config_with_identity(&[&env.cert], &[b"http/1.1"], id),
        None => client_config(&[&env.cert], &[b"http/1.1"]),
    };
    let mut config = (*base).clone();
    let asked = Arc::new(AtomicBool::new(false));
    config.client_auth_cert_resolver = Arc::new(Recording {
        inner: config.client_auth_cert_resolver.clone(),
        asked: asked.clone(),
    });
    (Arc::new(config), asked)
}

/// `MakeTLSRequestAndExpectEventuallyConsistentResponse` with a client certificate.
async fn served(
    env: &Env,
    ip: IpAddr,
    port: u16,
    host: &str,
    identity: Option<&ClientIdentity>,
    backend: &str,
) -> Outcome {
    let (config, _) = config(env, identity);
    let req = Req::get("/").host(host).port(port);
    check_tls_config(ip, host, config, &req, &Want::ok(backend)).await
}

/// `MakeTLSRequestAndExpectFailureResponse`: one request, which must fail; when a certificate
/// is given, the server must have asked for it.
async fn refused(
    env: &Env,
    ip: IpAddr,
    port: u16,
    host: &str,
    identity: Option<&ClientIdentity>,
) -> Outcome {
    let (config, asked) = config(env, identity);
    let addr = crate::harness::socket_addr(ip, port);
    let result = async {
        let stream = connect(addr, host, config).await?;
        Session::start(stream).await?.get(host, "/").await
    }
    .await;
    if let Ok(reply) = result {
        return Err(format!(
            "https {addr} (SNI {host}): answered {}, want a failed request",
            reply.status
        ));
    }
    if identity.is_some() && !asked.load(Ordering::SeqCst) {
        return Err(format!(
            "https {addr} (SNI {host}): the server did not ask for a client certificate"
        ));
    }
    Ok(())
}

/// `GatewayListenerMustHaveConditions`: listener `name` of `gw` has `expected`.
fn listener_conditions(r: &Report, gw: &str, name: &str, expected: &[Cond]) -> Outcome {
    gateway_conditions(r, INFRA, gw, &[])?;
    let status = r.gateway(INFRA, gw)?;
    let listener = status["listeners"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["name"] == name))
        .ok_or_else(|| format!("Gateway {gw}: no listener {name} in status"))?;
    for c in expected {
        crate::status::cond(listener, c.0, c.1, c.2)
            .map_err(|e| format!("Gateway {gw} listener {name}: {e}"))?;
    }
    Ok(())
}

async fn routes_ready(env: &Env, gw: &str, routes: [&str; 2]) -> Outcome {
    wait_status(env, "Gateway and routes accepted", |r| {
        routes_accepted_at(r, gw, &[], &[(INFRA, routes[0])])?;
        routes_accepted_at(r, gw, &["https-with-hostname"], &[(INFRA, routes[1])])
    })
    .await
}

/// Port 443 trusts the default CA, port 8443 the per-port one; each refuses the other's.
pub async fn validation(env: Arc<Env>) -> Outcome {
    const GW: &str = "client-validation-default";
    routes_ready(
        &env,
        GW,
        [
            "client-certificate-validation-https-test",
            "client-certificate-validation-https-test-no-hostname",
        ],
    )
    .await?;
    let ip = env.gw(GW);
    let default = env.client_ca.issue("client.example.org");
    let per_port = env.per_port_ca.issue("client.example.org");
    served(
        &env,
        ip,
        443,
        "example.org",
        Some(&default),
        "infra-backend-v1",
    )
    .await?;
    refused(&env, ip, 443, "example.org", Some(&per_port)).await?;
    let second = "second-example.org";
    served(&env, ip, 8443, second, Some(&per_port), "infra-backend-v2").await?;
    refused(&env, ip, 8443, second, Some(&default)).await
}

/// In AllowInsecureFallback mode every client is served: the right certificate, another CA's,
/// none; the Gateway says so in `InsecureFrontendValidationMode`.
pub async fn insecure_fallback(env: Arc<Env>) -> Outcome {
    const GW: &str = "client-validation-insecure-fallback";
    routes_ready(
        &env,
        GW,
        [
            "client-cert-validation-insecure-fallback-test",
            "client-cert-validation-insecure-fallback-test-no-hostname",
        ],
    )
    .await?;
    wait_status(&env, "InsecureFrontendValidationMode", |r| {
        gateway_conditions(
            r,
            INFRA,
            GW,
            &[Cond(
                "InsecureFrontendValidationMode",
                "True",
                "ConfigurationChanged",
            )],
        )
    })
    .await?;
    let ip = env.gw(GW);
    let default = env.client_ca.issue("client.example.org");
    let per_port = env.per_port_ca.issue("client.example.org");
    for (port, host, backend, own, other) in [
        (443, "example.org", "infra-backend-v1", &default, &per_port),
        (
            8443,
            "second-example.org",
            "infra-backend-v2",
            &per_port,
            &default,
        ),
    ] {
        for identity in [Some(own), Some(other), None] {
            served(&env, ip, port, host, identity, backend).await?;
        }
    }
    Ok(())
}

const READY: [Cond; 3] = [
    Cond("ResolvedRefs", "True", ""),
    Cond("Accepted", "True", ""),
    Cond("Programmed", "True", ""),
];

/// `ResolvedRefs` False with `reason`, `Accepted` False `NoValidCACertificate`, not programmed.
fn refused_listener(reason: &'static str) -> [Cond; 3] {
    [
        Cond("ResolvedRefs", "False", reason),
        Cond("Accepted", "False", "NoValidCACertificate"),
        Cond("Programmed", "False", ""),
    ]
}

/// A default validation without a usable CA refuses the HTTPS listener, not the HTTP one.
pub async fn invalid_default(env: Arc<Env>) -> Outcome {
    const GW: &str = "invalid-default-client-validation-config";
    wait_status(&env, "listener conditions", |r| {
        listener_conditions(r, GW, "http", &READY)?;
        listener_conditions(r, GW, "https", &refused_listener("InvalidCACertificateRef"))
    })
    .await?;
    let ip = env.gw(GW);
    let req = Req::get("/").host("example.org").port(80);
    check(ip, &req, &Want::ok("infra-backend-v1")).await?;
    refused(&env, ip, 443, "example.org", None).await
}

/// Each invalid per-port reference fails only the listener on its port.
pub async fn invalid_references(env: Arc<Env>) -> Outcome {
    const GW: &str = "gateway-with-invalid-client-cert-validation";
    wait_status(&env, "listener conditions", |r| {
        listener_conditions(r, GW, "https", &READY)?;
        for (listener, reason) in [
            ("https-unresolved", "InvalidCACertificateRef"),
            ("https-invalid-kind", "InvalidCACertificateKind"),
            ("https-grant-missing", "RefNotPermitted"),
        ] {
            listener_conditions(r, GW, listener, &refused_listener(reason))?;
        }
        Ok(())
    })
    .await
}
