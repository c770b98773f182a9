//! Client-certificate validation of HTTPS listeners (Gateway `spec.tls.frontend`): which
//! configuration applies to a listener (the `perPort` entry of its port, else `default`),
//! each `caCertificateRef` (kind, ReferenceGrant, the `ca.crt` of a ConfigMap or Secret), and
//! the listener conditions the spec asks for when references are invalid. Each CA bundle is
//! parsed once per translation, each Gateway port's validation built once. Pure.

use std::collections::BTreeSet;

use foldhash::HashMap;
use std::sync::Arc;

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayTlsFrontendDefaultValidationMode as DefaultMode,
    GatewayTlsFrontendPerPortTlsValidationMode as PortMode,
};
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::snapshot::{namespace_of, Snapshot};
use crate::status::conditions::Reason;
use crate::status::GATEWAY_GROUP;
use crate::table::{CaBundle, CaBundleError, ClientValidation, ValidationMode};
use crate::translate::common::refgrant::{Grants, RefSide};

/// The key of a ConfigMap or Secret that holds a PEM CA bundle.
pub const CA_KEY: &str = "ca.crt";

/// Why a caCertificateRef cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaRefError {
    #[error("the validation names no caCertificateRefs")]
    NoReferences,
    #[error("the CA bundles cannot verify client certificates: {0}")]
    Verifier(CaBundleError),
    #[error("caCertificateRef {group}/{kind} {name} is neither a ConfigMap nor a Secret")]
    UnsupportedKind {
        group: String,
        kind: String,
        name: String,
    },
    #[error("{kind} {namespace}/{name} in another namespace is not allowed by a ReferenceGrant")]
    NotPermitted {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("{kind} {namespace}/{name} does not exist")]
    NotFound {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("{kind} {namespace}/{name} has no {CA_KEY}")]
    MissingKey {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("{CA_KEY} of {kind} {namespace}/{name} {error}")]
    Invalid {
        kind: &'static str,
        namespace: String,
        name: String,
        error: CaBundleError,
    },
}

impl CaRefError {
    /// The listener's `ResolvedRefs` reason.
    pub fn reason(&self) -> Reason {
        match self {
            Self::UnsupportedKind { .. } => Reason::InvalidCACertificateKind,
            Self::NotPermitted { .. } => Reason::RefNotPermitted,
            _ => Reason::InvalidCACertificateRef,
        }
    }
}

/// The client-certificate side of a listener after validation.
#[derive(Debug, Clone, Default)]
pub enum ClientAuth {
    /// No validation configured for the listener (or not an HTTPS listener).
    #[default]
    Off,
    /// Validation with the usable CA bundles; `error` names the first unusable reference
    /// (`ResolvedRefs` False, still accepted).
    Ready {
        validation: Arc<ClientValidation>,
        error: Option<CaRefError>,
    },
    /// No reference is usable: the listener is not accepted.
    Invalid(CaRefError),
}

impl ClientAuth {
    /// The first unusable reference, if any.
    pub fn error(&self) -> Option<&CaRefError> {
        match self {
            Self::Off => None,
            Self::Ready { error, .. } => error.as_ref(),
            Self::Invalid(e) => Some(e),
        }
    }
}

/// A caCertificateRef with its defaults applied, whichever field it came from.
pub(in crate::translate) struct CaRef<'g> {
    pub group: &'g str,
    pub kind: &'g str,
    pub name: &'g str,
    pub namespace: Option<&'g str>,
}

/// The validation a Gateway configures for `port`: its references and mode.
fn validation_for(gateway: &Gateway, port: i32) -> Option<(Vec<CaRef<'_>>, ValidationMode)> {
    let frontend = gateway.spec.tls.as_ref()?.frontend.as_ref()?;
    let per_port = frontend.per_port.iter().flatten().find(|p| p.port == port);
    if let Some(p) = per_port {
        let v = p.tls.validation.as_ref()?;
        let refs = v.ca_certificate_refs.iter().map(|r| CaRef {
            group: &r.group,
            kind: &r.kind,
            name: &r.name,
            namespace: r.namespace.as_deref(),
        });
        let mode = match v.mode {
            Some(PortMode::AllowInsecureFallback) => ValidationMode::AllowInsecureFallback,
            _ => ValidationMode::AllowValidOnly,
        };
        return Some((refs.collect(), mode));
    }
    let v = frontend.default.validation.as_ref()?;
    let refs = v.ca_certificate_refs.iter().map(|r| CaRef {
        group: &r.group,
        kind: &r.kind,
        name: &r.name,
        namespace: r.namespace.as_deref(),
    });
    let mode = match v.mode {
        Some(DefaultMode::AllowInsecureFallback) => ValidationMode::AllowInsecureFallback,
        _ => ValidationMode::AllowValidOnly,
    };
    Some((refs.collect(), mode))
}

/// True when some port of the Gateway accepts clients without a valid certificate.
pub fn insecure_fallback(gateway: &Gateway) -> bool {
    let Some(frontend) = gateway.spec.tls.as_ref().and_then(|t| t.frontend.as_ref()) else {
        return false;
    };
    let default = frontend
        .default
        .validation
        .as_ref()
        .is_some_and(|v| v.mode == Some(DefaultMode::AllowInsecureFallback));
    default
        || frontend.per_port.iter().flatten().any(|p| {
            p.tls
                .validation
                .as_ref()
                .is_some_and(|v| v.mode == Some(PortMode::AllowInsecureFallback))
        })
}

/// `(kind, namespace, name)` of the object a permitted reference of a Gateway in `gateway_ns`
/// names.
fn permitted<'r>(
    grants: &Grants<'_>,
    gateway_ns: &'r str,
    r: &CaRef<'r>,
) -> Result<(&'static str, &'r str, &'r str), CaRefError> {
    let kind = match (r.group, r.kind) {
        ("", "ConfigMap") => "ConfigMap",
        ("", "Secret") => "Secret",
        _ => {
            return Err(CaRefError::UnsupportedKind {
                group: r.group.to_owned(),
                kind: r.kind.to_owned(),
                name: r.name.to_owned(),
            })
        }
    };
    let ns = r.namespace.unwrap_or(gateway_ns);
    let from = RefSide {
        group: GATEWAY_GROUP,
        kind: "Gateway",
        namespace: gateway_ns,
    };
    let to = RefSide {
        group: "",
        kind,
        namespace: ns,
    };
    if !grants.allows(from, to, r.name) {
        return Err(CaRefError::NotPermitted {
            kind,
            namespace: ns.to_owned(),
            name: r.name.to_owned(),
        });
    }
    Ok((kind, ns, r.name))
}

/// CA bundles of a snapshot, parsed on first use, and the validation of each Gateway port.
pub struct Frontends<'a> {
    config_maps: HashMap<(&'a str, &'a str), &'a ConfigMap>,
    secrets: HashMap<(&'a str, &'a str), &'a Secret>,
    grants: Grants<'a>,
    bundles: HashMap<(&'static str, String, String), Result<CaBundle, CaRefError>>,
    ports: HashMap<(String, String, i32), ClientAuth>,
}

impl<'a> Frontends<'a> {
    /// Indexes the snapshot's ConfigMaps and Secrets by namespace and name.
    pub fn new(snapshot: &'a Snapshot) -> Self {
        let config_maps = snapshot
            .config_maps
            .iter()
            .filter_map(|c| {
                Some((
                    (namespace_of(&c.metadata), c.metadata.name.as_deref()?),
                    &**c,
                ))
            })
            .collect();
        let secrets = snapshot
            .secrets
            .iter()
            .filter_map(|s| {
                Some((
                    (namespace_of(&s.metadata), s.metadata.name.as_deref()?),
                    &**s,
                ))
            })
            .collect();
        Self {
            config_maps,
            secrets,
            grants: Grants::new(&snapshot.reference_grants),
            bundles: HashMap::default(),
            ports: HashMap::default(),
        }
    }

    /// The client validation of an HTTPS listener on `port` of `gateway`.
    pub fn listener(&mut self, gateway: &Gateway, port: i32) -> ClientAuth {
        let ns = namespace_of(&gateway.metadata);
        let name = gateway.metadata.name.as_deref().unwrap_or("");
        let key = (ns.to_owned(), name.to_owned(), port);
        if let Some(done) = self.ports.get(&key) {
            return done.clone();
        }
        let auth = match validation_for(gateway, port) {
            None => ClientAuth::Off,
            Some((refs, mode)) => self.resolve(ns, &refs, mode),
        };
        self.ports.insert(key, auth.clone());
        auth
    }

    fn resolve(
        &mut self,
        gateway_ns: &str,
        refs: &[CaRef<'_>],
        mode: ValidationMode,
    ) -> ClientAuth {
        let mut bundles = Vec::new();
        let mut sources = Vec::new();
        let mut first_error = None;
        for r in refs {
            match self.bundle(gateway_ns, r) {
                Ok((source, bundle)) => {
                    sources.push(source);
                    bundles.push(bundle);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if bundles.is_empty() {
            return ClientAuth::Invalid(first_error.unwrap_or(CaRefError::NoReferences));
        }
        match ClientValidation::new(sources, &bundles, mode) {
            Ok(v) => ClientAuth::Ready {
                validation: Arc::new(v),
                error: first_error,
            },
            Err(error) => ClientAuth::Invalid(CaRefError::Verifier(error)),
        }
    }

    /// The CA bundle `r` names, for an object in `gateway_ns` (a ReferenceGrant is needed
    /// across namespaces), with the `Kind namespace/name` it is shown as.
    pub(in crate::translate) fn bundle(
        &mut self,
        gateway_ns: &str,
        r: &CaRef<'_>,
    ) -> Result<(String, CaBundle), CaRefError> {
        let (kind, ns, name) = permitted(&self.grants, gateway_ns, r)?;
        let key = (kind, ns.to_owned(), name.to_owned());
        let result = match self.bundles.get(&key) {
            Some(done) => done.clone(),
            None => {
                let parsed = self.parse(kind, ns, name);
                self.bundles.insert(key, parsed.clone());
                parsed
            }
        };
        result.map(|b| (format!("{kind} {ns}/{name}"), b))
    }

    fn parse(&self, kind: &'static str, ns: &str, name: &str) -> Result<CaBundle, CaRefError> {
        let not_found = || CaRefError::NotFound {
            kind,
            namespace: ns.to_owned(),
            name: name.to_owned(),
        };
        let pem: Option<&[u8]> = if kind == "ConfigMap" {
            let cm = self.config_maps.get(&(ns, name)).ok_or_else(not_found)?;
            cm.data
                .as_ref()
                .and_then(|d| d.get(CA_KEY))
                .map(|s| s.as_bytes())
                .or_else(|| {
                    let binary = cm.binary_data.as_ref()?.get(CA_KEY)?;
                    Some(binary.0.as_slice())
                })
        } else {
            let secret = self.secrets.get(&(ns, name)).ok_or_else(not_found)?;
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(CA_KEY))
                .map(|b| b.0.as_slice())
        };
        let pem = pem
            .filter(|p| !p.is_empty())
            .ok_or_else(|| CaRefError::MissingKey {
                kind,
                namespace: ns.to_owned(),
                name: name.to_owned(),
            })?;
        CaBundle::from_pem(pem).map_err(|error| CaRefError::Invalid {
            kind,
            namespace: ns.to_owned(),
            name: name.to_owned(),
            error,
        })
    }
}

/// Every permitted caCertificateRef of `gateways`, as `(kind, namespace, name)`: what a
/// provider that fetches ConfigMaps and Secrets on demand must fetch.
pub fn referenced_ca_objects(
    gateways: &[Arc<Gateway>],
    grants: &[Arc<ReferenceGrant>],
) -> BTreeSet<(&'static str, String, String)> {
    let grants = Grants::new(grants);
    let mut out = BTreeSet::new();
    for gw in gateways {
        let ns = namespace_of(&gw.metadata);
        let Some(frontend) = gw.spec.tls.as_ref().and_then(|t| t.frontend.as_ref()) else {
            continue;
        };
        let ports = frontend.per_port.iter().flatten().map(|p| p.port);
        for port in ports.chain([i32::MIN]) {
            let Some((refs, _)) = validation_for(gw, port) else {
                continue;
            };
            for r in &refs {
                if let Ok((kind, ns, name)) = permitted(&grants, ns, r) {
                    out.insert((kind, ns.to_owned(), name.to_owned()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
