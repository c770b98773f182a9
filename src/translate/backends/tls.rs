//! BackendTLSPolicy: which Service ports the proxy reaches over TLS and how (SNI, CA bundles,
//! subjectAltNames), conflicts between policies targeting the same port (the spec's policy
//! rules: a targetRef with a sectionName beats one without; among equals the oldest, then
//! `namespace/name` alphabetically, wins), and each policy's status per ancestor Gateway (the
//! Gateways whose routes reach a targeted Service). Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gateway_api::apis::standard::backendtlspolicies::{
    BackendTlsPolicy, BackendTlsPolicyStatus, BackendTlsPolicyStatusAncestors,
    BackendTlsPolicyStatusAncestorsAncestorRef, BackendTlsPolicyValidationSubjectAltNamesType,
};
use gateway_api::apis::standard::gateways::GatewayTlsBackendClientCertificateRef;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::snapshot::namespace_of;
use crate::status::GATEWAY_GROUP;
use crate::table::{
    BackendIdentity, BackendTls, BackendTlsEntry, CaBundle, ServiceKey, SubjectAltName,
};
use crate::translate::conditions::*;
use crate::translate::gateways::frontend::{CaRef, CaRefError, Frontends};
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::gateways::tls::Certificates;

/// Name prefix of the BackendTLSPolicies made for Ingresses (`backend-protocol: HTTPS`, see
/// `translate::ingress::upstream`): the colon makes it no valid object name, so no policy of a
/// cluster or a config directory has it.
pub const MADE_PREFIX: &str = "ingress:";

/// Annotation of a made policy that accepts any certificate (honoured on made policies only).
pub const UNVERIFIED: &str = "edgeplane.dev/ingress-backend-unverified";

/// Annotation of a made policy naming the Secret (in the policy's namespace) whose
/// `tls.crt`/`tls.key` are presented to the backend: an Ingress's `proxy-ssl-secret` (honoured
/// on made policies only).
pub const CLIENT_CERTIFICATE: &str = "edgeplane.dev/ingress-backend-client-certificate";

/// True for a BackendTLSPolicy made for an Ingress: no object, so no status.
pub fn is_made(policy: &BackendTlsPolicy) -> bool {
    policy
        .metadata
        .name
        .as_deref()
        .is_some_and(|n| n.starts_with(MADE_PREFIX))
}

/// True for a made policy that accepts any certificate (an Ingress without
/// `proxy-ssl-verify: "on"`, as ingress-nginx).
pub fn unverified(policy: &BackendTlsPolicy) -> bool {
    is_made(policy)
        && policy
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(UNVERIFIED))
            .is_some_and(|v| v == "true")
}

/// The Secret a made policy presents the certificate of (its `CLIENT_CERTIFICATE` annotation).
pub fn client_certificate(policy: &BackendTlsPolicy) -> Option<&str> {
    if !is_made(policy) {
        return None;
    }
    let notes = policy.metadata.annotations.as_ref()?;
    notes.get(CLIENT_CERTIFICATE).map(String::as_str)
}

/// What one policy resolves to, before conflicts.
struct Resolved {
    entry: Arc<BackendTlsEntry>,
    /// The first unusable reference (`ResolvedRefs` False).
    error: Option<CaRefError>,
    /// Why the policy is not accepted, apart from conflicts: `(reason, message)`.
    refused: Option<(Reason, String)>,
}

/// One policy's claim on a Service: all its ports, or the one named `section`.
struct Claim<'a> {
    policy: usize,
    namespace: &'a str,
    service: &'a str,
    section: Option<&'a str>,
}

/// What the policies read from Secrets and ConfigMaps, parsed once per translation: CA
/// bundles, and the client certificates of the policies made for Ingresses.
pub struct Secrets<'r, 's> {
    pub frontends: &'r mut Frontends<'s>,
    pub certificates: &'r mut Certificates<'s>,
}

/// The outcome of every policy: TLS by Service port, and each policy's status (only policies
/// with an ancestor among our Gateways get one).
pub struct PolicyOutput<'a> {
    pub by_port: BTreeMap<ServiceKey, Arc<BackendTlsEntry>>,
    pub statuses: Vec<(&'a BackendTlsPolicy, BackendTlsPolicyStatus)>,
}

/// Resolves every policy of `policies`. `used` maps each Service port a route of our Gateways
/// reaches to the indexes of those Gateways in `gateways`.
pub fn resolve_policies<'a>(
    policies: &'a [Arc<BackendTlsPolicy>],
    services: &'a [Arc<Service>],
    used: &BTreeMap<ServiceKey, BTreeSet<usize>>,
    gateways: &[GatewayModel<'_>],
    secrets: Secrets<'_, '_>,
    stamp: impl Fn(Option<i64>) -> Stamp,
    controller: &str,
) -> PolicyOutput<'a> {
    if policies.is_empty() {
        return PolicyOutput {
            by_port: BTreeMap::new(),
            statuses: Vec::new(),
        };
    }
    let resolved: Vec<Resolved> = policies
        .iter()
        .map(|p| presenting(p, resolve(p, secrets.frontends), secrets.certificates))
        .collect();
    let claims = claims(policies);
    let mut by_port = BTreeMap::new();
    let mut lost = BTreeSet::new();
    let mut reaches: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); policies.len()];
    for svc in services {
        let ns = namespace_of(&svc.metadata);
        let Some(name) = svc.metadata.name.as_deref() else {
            continue;
        };
        for port in svc.spec.iter().flat_map(|s| s.ports.iter().flatten()) {
            let on_service = |c: &&Claim<'_>| c.namespace == ns && c.service == name;
            let specific: Vec<&Claim<'_>> = claims
                .iter()
                .filter(on_service)
                .filter(|c| c.section.is_some() && c.section == port.name.as_deref())
                .collect();
            let general: Vec<&Claim<'_>> = claims
                .iter()
                .filter(on_service)
                .filter(|c| c.section.is_none())
                .collect();
            let contenders = if specific.is_empty() {
                general
            } else {
                specific
            };
            let Some(winner) = contenders
                .iter()
                .map(|c| c.policy)
                .min_by_key(|&i| precedence(&policies[i]))
            else {
                continue;
            };
            for c in &contenders {
                if c.policy != winner {
                    lost.insert(c.policy);
                }
            }
            let Ok(number) = u16::try_from(port.port) else {
                continue;
            };
            let key = ServiceKey {
                namespace: ns.to_owned(),
                name: name.to_owned(),
                port: number,
            };
            if let Some(gws) = used.get(&key) {
                for c in &contenders {
                    reaches[c.policy].extend(gws.iter().copied());
                }
            }
            by_port.insert(key, resolved[winner].entry.clone());
        }
    }
    let statuses = policies
        .iter()
        .enumerate()
        .filter(|(i, _)| !reaches[*i].is_empty())
        .map(|(i, p)| {
            let conditions = conditions(
                &stamp(p.metadata.generation),
                &resolved[i],
                lost.contains(&i),
            );
            let ancestors = reaches[i]
                .iter()
                .map(|&gi| ancestor(&gateways[gi], controller, &[&conditions.0, &conditions.1]))
                .collect();
            (p.as_ref(), BackendTlsPolicyStatus { ancestors })
        })
        .collect();
    PolicyOutput { by_port, statuses }
}

/// The Service ports each policy targets (a `sectionName`, or every port).
fn claims(policies: &[Arc<BackendTlsPolicy>]) -> Vec<Claim<'_>> {
    policies
        .iter()
        .enumerate()
        .flat_map(|(i, p)| {
            let ns = namespace_of(&p.metadata);
            p.spec
                .target_refs
                .iter()
                .filter(|t| t.group.is_empty() && t.kind == "Service")
                .map(move |t| Claim {
                    policy: i,
                    namespace: ns,
                    service: &t.name,
                    section: t.section_name.as_deref(),
                })
        })
        .collect()
}

/// `Accepted` and `ResolvedRefs` of one policy: `lost` when another policy takes its Service
/// port.
fn conditions(s: &Stamp, r: &Resolved, lost: bool) -> (Condition, Condition) {
    let accepted = if lost {
        s.fail(
            ConditionType::Accepted,
            Reason::Conflicted,
            "another BackendTLSPolicy targets the same Service port and takes precedence",
        )
    } else if let Some((reason, message)) = &r.refused {
        s.fail(ConditionType::Accepted, *reason, message.clone())
    } else {
        s.ok(ConditionType::Accepted, Reason::Accepted, "accepted")
    };
    let resolved_refs = match &r.error {
        Some(e) => s.fail(ConditionType::ResolvedRefs, policy_reason(e), e.to_string()),
        None => s.ok(
            ConditionType::ResolvedRefs,
            Reason::ResolvedRefs,
            "resolved",
        ),
    };
    (accepted, resolved_refs)
}

/// Older first, then `namespace/name` ([`crate::translate::common::precedence`]).
fn precedence(p: &BackendTlsPolicy) -> crate::translate::common::precedence::Precedence<'_> {
    crate::translate::common::precedence::of(&p.metadata)
}

/// The policy's `ResolvedRefs` reason for an unusable reference.
fn policy_reason(e: &CaRefError) -> Reason {
    match e {
        CaRefError::UnsupportedKind { .. } => Reason::InvalidKind,
        _ => Reason::InvalidCACertificateRef,
    }
}

fn ancestor(
    g: &GatewayModel<'_>,
    controller: &str,
    conditions: &[&Condition],
) -> BackendTlsPolicyStatusAncestors {
    BackendTlsPolicyStatusAncestors {
        ancestor_ref: BackendTlsPolicyStatusAncestorsAncestorRef {
            group: Some(GATEWAY_GROUP.into()),
            kind: Some("Gateway".into()),
            name: g.name.to_owned(),
            namespace: Some(g.namespace.to_owned()),
            port: None,
            section_name: None,
        },
        conditions: conditions.iter().map(|c| (*c).clone()).collect(),
        controller_name: controller.to_owned(),
    }
}

/// A made policy's validation with the client certificate of its [`CLIENT_CERTIFICATE`]
/// Secret, parsed once per translation: a Secret that cannot give one makes the policy
/// unusable (its backends answer 502, as ingress-nginx denies the location), never a
/// connection without the certificate asked for.
fn presenting(p: &BackendTlsPolicy, r: Resolved, certificates: &mut Certificates<'_>) -> Resolved {
    let Some(secret) = client_certificate(p) else {
        return r;
    };
    let (error, refused) = (r.error, r.refused);
    let tls = match Arc::try_unwrap(r.entry) {
        Ok(BackendTlsEntry::Ready(tls)) => tls,
        Ok(other) => {
            let entry = Arc::new(other);
            return Resolved {
                entry,
                error,
                refused,
            };
        }
        Err(entry) => {
            return Resolved {
                entry,
                error,
                refused,
            }
        }
    };
    let reference = GatewayTlsBackendClientCertificateRef {
        group: None,
        kind: None,
        name: secret.to_owned(),
        namespace: None,
    };
    let entry = match certificates.client_certificate(namespace_of(&p.metadata), &reference) {
        Ok(c) => BackendTlsEntry::Ready(tls.presenting(Arc::new(BackendIdentity::new(&c)))),
        Err(e) => BackendTlsEntry::Unusable {
            policy: tls.policy,
            reason: format!("no client certificate: {e}"),
        },
    };
    Resolved {
        entry: Arc::new(entry),
        error,
        refused,
    }
}

/// One policy's validation: its CA bundles (same namespace), hostname and subjectAltNames.
fn resolve(p: &BackendTlsPolicy, frontends: &mut Frontends<'_>) -> Resolved {
    let ns = namespace_of(&p.metadata);
    let name = format!("{ns}/{}", p.metadata.name.as_deref().unwrap_or(""));
    let v = &p.spec.validation;
    let unusable = |reason: String| {
        Arc::new(BackendTlsEntry::Unusable {
            policy: name.clone(),
            reason,
        })
    };
    if unverified(p) {
        return match BackendTls::unverified(name.clone(), v.hostname.clone()) {
            Ok(tls) => Resolved {
                entry: Arc::new(BackendTlsEntry::Ready(tls)),
                error: None,
                refused: None,
            },
            Err(e) => Resolved {
                entry: unusable(e.to_string()),
                error: None,
                refused: Some((Reason::Invalid, e.to_string())),
            },
        };
    }
    if v.well_known_ca_certificates.is_some() {
        let message =
            "wellKnownCACertificates is not supported; name CA bundles in caCertificateRefs";
        return Resolved {
            entry: unusable(message.into()),
            error: None,
            refused: Some((Reason::Invalid, message.into())),
        };
    }
    let mut sources = Vec::new();
    let mut bundles: Vec<CaBundle> = Vec::new();
    let mut error = None;
    for r in v.ca_certificate_refs.iter().flatten() {
        let reference = CaRef {
            group: &r.group,
            kind: &r.kind,
            name: &r.name,
            namespace: None,
        };
        match frontends.bundle(ns, &reference) {
            Ok((source, bundle)) => {
                sources.push(source);
                bundles.push(bundle);
            }
            Err(e) => {
                error.get_or_insert(e);
            }
        }
    }
    if bundles.is_empty() {
        let message = match &error {
            Some(e) => format!("no usable CA certificate: {e}"),
            None => "no caCertificateRefs".to_owned(),
        };
        return Resolved {
            entry: unusable(message.clone()),
            error,
            refused: Some((Reason::NoValidCACertificate, message)),
        };
    }
    let sans = v
        .subject_alt_names
        .iter()
        .flatten()
        .filter_map(|s| match s.r#type {
            BackendTlsPolicyValidationSubjectAltNamesType::Hostname => {
                s.hostname.clone().map(SubjectAltName::Hostname)
            }
            BackendTlsPolicyValidationSubjectAltNamesType::Uri => {
                s.uri.clone().map(SubjectAltName::Uri)
            }
        })
        .collect();
    match BackendTls::new(name.clone(), v.hostname.clone(), sans, sources, &bundles) {
        Ok(tls) => Resolved {
            entry: Arc::new(BackendTlsEntry::Ready(tls)),
            error,
            refused: None,
        },
        Err(e) => Resolved {
            entry: unusable(e.to_string()),
            error,
            refused: Some((Reason::Invalid, e.to_string())),
        },
    }
}

#[cfg(test)]
mod tests;
