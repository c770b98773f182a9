//! Scenarios of TLS to backends: BackendTLSPolicy (verified backends, hostname and CA
//! mismatches, subjectAltNames, conflicts, invalid CA references, generation bumps) and the
//! Gateway's client certificate for backends (`spec.tls.backend.clientCertificateRef`).

use std::sync::Arc;

use serde_json::Value;

use crate::expect::{check, check_tls, Outcome, Req, Want};
use crate::harness::Env;
use crate::status::{
    cond, gateway_conditions, observed, routes_accepted_at, wait_status, Cond, Report,
};
use crate::INFRA;

const SAME_NAMESPACE: &str = "same-namespace";

/// `BackendTLSPolicyMustHaveCondition`: policy `name` has an ancestor `gw` (ours) carrying
/// `c`, and every condition of it observed the policy's latest generation.
fn policy_condition(r: &Report, name: &str, gw: &str, c: Cond) -> Outcome {
    let (status, generation) = r.policy(INFRA, name)?;
    let ancestors: Vec<&Value> = status["ancestors"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let mine: Vec<&&Value> = ancestors
        .iter()
        .filter(|a| {
            let r = &a["ancestorRef"];
            r["name"] == gw
                && r["namespace"].as_str().is_none_or(|n| n == INFRA)
                && a["controllerName"] == "edgeplane.dev/gateway-controller"
        })
        .collect();
    for a in &mine {
        observed(a, generation).map_err(|e| format!("BackendTLSPolicy {name}: {e}"))?;
    }
    if mine.iter().any(|a| cond(a, c.0, c.1, c.2).is_ok()) {
        return Ok(());
    }
    Err(format!(
        "BackendTLSPolicy {name}: no ancestor {gw} with {c:?}: {ancestors:?}"
    ))
}

const ACCEPTED: Cond = Cond("Accepted", "True", "Accepted");
const RESOLVED: Cond = Cond("ResolvedRefs", "True", "ResolvedRefs");

/// Waits until `route` is accepted on `gw` and each policy has `conditions` there.
async fn ready(env: &Env, gw: &str, route: &str, policies: &[(&str, &[Cond])]) -> Outcome {
    wait_status(env, "route accepted, policies reported", |r| {
        routes_accepted_at(r, gw, &[], &[(INFRA, route)])?;
        for (name, conditions) in policies {
            for c in *conditions {
                policy_condition(r, name, gw, *c)?;
            }
        }
        Ok(())
    })
    .await
}

/// `abc.example.com` + `path` on the `same-namespace` Gateway.
fn request(path: &str) -> Req {
    Req::get(path).host("abc.example.com")
}

/// Answered by `tls-backend`, which saw SNI `sni`.
fn via_tls(sni: &str) -> Want {
    Want::ok("tls-backend").sni(sni)
}

/// The verified backend is reached from an HTTPS listener (re-encryption) and an HTTP one,
/// with the policy's hostname as SNI; a hostname the certificate lacks, or a CA that did not
/// sign it, fails the request.
pub async fn policy(env: Arc<Env>) -> Outcome {
    const HTTPS_GW: &str = "same-namespace-with-https-listener";
    let both: &[Cond] = &[ACCEPTED, RESOLVED];
    ready(
        &env,
        HTTPS_GW,
        "backendtlspolicy-reencrypt",
        &[("normative-test", both)],
    )
    .await?;
    let req = Req::get("/backendtlspolicy")
        .host("https-listener.org")
        .port(443);
    let ip = env.gw(HTTPS_GW);
    check_tls(
        &env,
        ip,
        "https-listener.org",
        false,
        &req,
        &via_tls("abc.example.com"),
    )
    .await?;
    let policies = [
        ("normative-test", both),
        ("host-mismatch", both),
        ("cert-mismatch", both),
    ];
    ready(&env, SAME_NAMESPACE, "backendtlspolicy", &policies).await?;
    let ip = env.gw(SAME_NAMESPACE);
    check(
        ip,
        &request("/backendtlspolicy"),
        &via_tls("abc.example.com"),
    )
    .await?;
    for path in [
        "/backendtlspolicy-host-mismatch",
        "/backendtlspolicy-cert-mismatch",
    ] {
        check(ip, &request(path), &Want::status(502)).await?;
    }
    Ok(())
}

/// subjectAltNames of type Hostname and URI, matching the backend certificate or not.
pub async fn subject_alt_names(env: Arc<Env>) -> Outcome {
    let names = [
        ("san-dns", true),
        ("san-dns-mismatch", false),
        ("san-uri", true),
        ("san-uri-mismatch", false),
        ("multiple-sans", true),
        ("multiple-mismatch-sans", false),
    ];
    let accepted: &[Cond] = &[ACCEPTED];
    let policies: Vec<(&str, &[Cond])> = names.iter().map(|(n, _)| (*n, accepted)).collect();
    ready(&env, SAME_NAMESPACE, "backendtlspolicy-san-test", &policies).await?;
    let ip = env.gw(SAME_NAMESPACE);
    for (name, verifies) in names {
        let req = request(&format!("/backendtlspolicy-{name}"));
        let want = if verifies {
            via_tls("abc.example.com")
        } else {
            Want::status(502)
        };
        check(ip, &req, &want)
            .await
            .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

/// Of two policies on the same port the older wins and the other is Conflicted; a policy
/// with a sectionName and one without share a Service without conflict.
pub async fn conflict_resolution(env: Arc<Env>) -> Outcome {
    let conflicted = Cond("Accepted", "False", "Conflicted");
    let policies: [(&str, &[Cond]); 6] = [
        ("conflicted-without-section-name-1", &[ACCEPTED]),
        ("conflicted-without-section-name-2", &[conflicted]),
        ("conflicted-with-section-name-1", &[ACCEPTED]),
        ("conflicted-with-section-name-2", &[conflicted]),
        ("not-conflicted-with-section-name", &[ACCEPTED]),
        ("not-conflicted-without-section-name", &[ACCEPTED]),
    ];
    let route = "backendtlspolicy-conflict-resolution";
    ready(&env, SAME_NAMESPACE, route, &policies).await?;
    let ip = env.gw(SAME_NAMESPACE);
    for (path, sni) in [
        ("conflicted-without-section-name", "other.example.com"),
        ("conflicted-with-section-name", "other.example.com"),
        ("not-conflicted-with-section-name", "other.example.com"),
        ("not-conflicted-without-section-name", "abc.example.com"),
    ] {
        let req = request(&format!("/backendtlspolicy-{path}"));
        check(ip, &req, &via_tls(sni)).await?;
    }
    Ok(())
}

/// A policy without a usable CA is not accepted, and its backend answers 5xx rather than
/// being reached without TLS.
async fn refused(env: &Env, route: &str, policies: &[&str], reason: &'static str) -> Outcome {
    let conditions = [
        Cond("Accepted", "False", "NoValidCACertificate"),
        Cond("ResolvedRefs", "False", reason),
    ];
    let with: Vec<(&str, &[Cond])> = policies.iter().map(|p| (*p, &conditions[..])).collect();
    ready(env, SAME_NAMESPACE, route, &with).await?;
    let ip = env.gw(SAME_NAMESPACE);
    for p in policies {
        check(
            ip,
            &request(&format!("/backendtlspolicy-{p}")),
            &Want::status(502),
        )
        .await?;
    }
    Ok(())
}

pub async fn invalid_ca_certificate_ref(env: Arc<Env>) -> Outcome {
    let policies = [
        "nonexistent-ca-certificate-ref",
        "malformed-ca-certificate-ref",
    ];
    let route = "backendtlspolicy-invalid-ca-certificate-ref";
    refused(&env, route, &policies, "InvalidCACertificateRef").await
}

pub async fn invalid_kind(env: Arc<Env>) -> Outcome {
    let route = "backendtlspolicy-invalid-kind-test";
    refused(&env, route, &["invalid-kind"], "InvalidKind").await
}

/// The policy's conditions follow its generation when its spec changes.
pub async fn observed_generation_bump(env: Arc<Env>) -> Outcome {
    const NAME: &str = "observed-generation-bump";
    let accepted = Cond("Accepted", "True", "");
    wait_status(&env, "policy accepted at generation 1", |r| {
        policy_condition(r, NAME, SAME_NAMESPACE, accepted)?;
        observed_at(r, NAME, 1)
    })
    .await?;
    let fixture = include_str!("manifests/backend-tls-policy-generation.yaml");
    let bumped = fixture
        .replace("generation: 1}", "generation: 2}")
        .replace("hostname: abc.example.com}", "hostname: foo.example.com}");
    env.apply("scenario.yaml", &bumped)?;
    wait_status(&env, "policy observes generation 2", |r| {
        policy_condition(r, NAME, SAME_NAMESPACE, accepted)?;
        observed_at(r, NAME, 2)
    })
    .await
}

fn observed_at(r: &Report, name: &str, generation: i64) -> Outcome {
    let (status, latest) = r.policy(INFRA, name)?;
    if latest != generation {
        return Err(format!(
            "policy {name} at generation {latest}, want {generation}"
        ));
    }
    for a in status["ancestors"].as_array().into_iter().flatten() {
        observed(a, generation)?;
    }
    Ok(())
}

/// The Gateway presents its client certificate to a backend that requires one.
pub async fn gateway_client_certificate(env: Arc<Env>) -> Outcome {
    const GW: &str = "gateway-tls-backend-client-certificate";
    let policy = "gateway-tls-backend-client-certificate-test";
    ready(&env, GW, GW, &[(policy, &[ACCEPTED])]).await?;
    wait_status(&env, "Gateway ResolvedRefs", |r| {
        gateway_conditions(
            r,
            INFRA,
            GW,
            &[Cond("ResolvedRefs", "True", "ResolvedRefs")],
        )
    })
    .await?;
    let want = Want::ok("tls-backend-with-client-cert-validation")
        .sni("abc.example.com")
        .client_cert(&env.backend_client.0);
    check(env.gw(GW), &Req::get("/").host("abc.example.com"), &want).await
}

/// An unusable clientCertificateRef leaves the Gateway accepted with ResolvedRefs False.
pub async fn invalid_backend_configuration(env: Arc<Env>) -> Outcome {
    wait_status(&env, "Gateways report their clientCertificateRef", |r| {
        for (gw, reason) in [
            (
                "gateway-client-certificate-nonexistent-secret",
                "InvalidClientCertificateRef",
            ),
            (
                "gateway-client-certificate-unsupported-group",
                "InvalidClientCertificateRef",
            ),
            (
                "gateway-client-certificate-unsupported-kind",
                "InvalidClientCertificateRef",
            ),
            (
                "gateway-client-certificate-malformed-secret",
                "InvalidClientCertificateRef",
            ),
            (
                "gateway-client-certificate-missing-reference-grant",
                "RefNotPermitted",
            ),
        ] {
            gateway_conditions(
                r,
                INFRA,
                gw,
                &[
                    Cond("ResolvedRefs", "False", reason),
                    Cond("Accepted", "True", "Accepted"),
                ],
            )?;
        }
        Ok(())
    })
    .await
}
