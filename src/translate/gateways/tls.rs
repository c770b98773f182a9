//! TLS rules of HTTPS listeners (Gateway API, `GatewayTLSConfig`): the mode, the
//! `certificateRefs` (kind, ReferenceGrant, Secret contents) and the resulting `ResolvedRefs`
//! reason. Each referenced Secret is parsed once per translation, however many listeners use it.
//! Pure.

use std::collections::BTreeSet;

use foldhash::HashMap;
use std::sync::Arc;

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayListeners, GatewayListenersTlsCertificateRefs, GatewayListenersTlsMode,
    GatewayTlsBackendClientCertificateRef,
};
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use k8s_openapi::api::core::v1::Secret;

use crate::snapshot::namespace_of;
use crate::snapshot::Snapshot;
use crate::status::conditions::Reason;
use crate::status::GATEWAY_GROUP;
use crate::table::{Certificate, CertificateError, ServedCertificates};
use crate::translate::common::refgrant::{Grants, RefSide};
use crate::translate::gateways::protocol::ListenerProtocol;

/// Why an HTTPS listener's certificates cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsRefError {
    #[error("an HTTPS listener in Terminate mode needs at least one certificateRef")]
    NoCertificateRefs,
    #[error("certificateRef {group}/{kind} {name} is not a core Secret")]
    UnsupportedKind {
        group: String,
        kind: String,
        name: String,
    },
    #[error("Secret {namespace}/{name} in another namespace is not allowed by a ReferenceGrant")]
    NotPermitted { namespace: String, name: String },
    #[error("Secret {namespace}/{name} does not exist")]
    SecretNotFound { namespace: String, name: String },
    #[error("Secret {namespace}/{name} has no {field}")]
    MissingField {
        namespace: String,
        name: String,
        field: &'static str,
    },
    #[error("Secret {secret}: {error}")]
    Invalid {
        secret: String,
        error: CertificateError,
    },
}

impl TlsRefError {
    /// `namespace/name` of the Secret when the error is about its contents (missing fields,
    /// PEM that does not parse, a key of another certificate): the cases where the last
    /// certificate served from that Secret keeps serving. A deleted Secret, a withdrawn
    /// ReferenceGrant or a changed reference take effect.
    pub fn bad_contents(&self) -> Option<String> {
        match self {
            Self::MissingField {
                namespace, name, ..
            } => Some(format!("{namespace}/{name}")),
            Self::Invalid { secret, .. } => Some(secret.clone()),
            _ => None,
        }
    }

    /// The listener's `ResolvedRefs` reason.
    pub fn reason(&self) -> Reason {
        match self {
            Self::NotPermitted { .. } => Reason::RefNotPermitted,
            _ => Reason::InvalidCertificateRef,
        }
    }
}

/// The TLS side of a listener after validation.
#[derive(Debug, Clone)]
pub enum ListenerTls {
    /// Not an HTTPS listener.
    Plain,
    /// HTTPS with its serving certificate.
    Ready(Arc<Certificate>),
    /// HTTPS whose Secret no longer holds a usable certificate, serving the certificate the
    /// previous table served from it: programmed, `ResolvedRefs` False.
    Stale {
        certificate: Arc<Certificate>,
        error: TlsRefError,
    },
    /// HTTPS whose certificates do not resolve: not programmed, `ResolvedRefs` False.
    Unresolved(TlsRefError),
    /// `tls.mode: Passthrough` on HTTPS: not accepted.
    Passthrough,
}

/// Secrets of a snapshot, parsed on first use and kept for the rest of the translation.
pub struct Certificates<'a> {
    secrets: HashMap<(&'a str, &'a str), &'a Secret>,
    grants: Grants<'a>,
    parsed: HashMap<(String, String), Result<Arc<Certificate>, TlsRefError>>,
    served: &'a ServedCertificates,
}

impl<'a> Certificates<'a> {
    /// Indexes the snapshot's Secrets by namespace and name; `served` are the certificates of
    /// the previous table, kept for Secrets whose contents became unusable.
    pub fn new(snapshot: &'a Snapshot, served: &'a ServedCertificates) -> Self {
        let secrets = snapshot
            .secrets
            .iter()
            .filter_map(|s| {
                let ns = namespace_of(&s.metadata);
                Some(((ns, s.metadata.name.as_deref()?), s.as_ref()))
            })
            .collect();
        Self {
            secrets,
            grants: Grants::new(&snapshot.reference_grants),
            parsed: HashMap::default(),
            served,
        }
    }

    /// Validates the TLS configuration of an HTTPS listener of a Gateway in `gateway_ns`. Every
    /// certificateRef must resolve (the first refused one names the reason); the first one serves.
    pub fn listener(&mut self, gateway_ns: &str, spec: &GatewayListeners) -> ListenerTls {
        self.listener_of("Gateway", gateway_ns, spec)
    }

    /// [`Certificates::listener`] for a listener declared by an object of kind `from` (a
    /// Gateway or a ListenerSet) in `gateway_ns`: ReferenceGrants must name that kind.
    pub fn listener_of(
        &mut self,
        from: &'static str,
        gateway_ns: &str,
        spec: &GatewayListeners,
    ) -> ListenerTls {
        if !ListenerProtocol::parse(&spec.protocol).carries_tls() {
            return ListenerTls::Plain;
        }
        let tls = spec.tls.as_ref();
        if matches!(
            tls.and_then(|t| t.mode.as_ref()),
            Some(GatewayListenersTlsMode::Passthrough)
        ) {
            return ListenerTls::Passthrough;
        }
        let refs = tls
            .and_then(|t| t.certificate_refs.as_deref())
            .unwrap_or_default();
        if refs.is_empty() {
            return ListenerTls::Unresolved(TlsRefError::NoCertificateRefs);
        }
        let mut first = None;
        let mut stale = None;
        for r in refs {
            match self.resolve(from, gateway_ns, r) {
                Ok(c) => {
                    first.get_or_insert(c);
                }
                Err(e) => match self.previous(&e) {
                    Some(c) => {
                        first.get_or_insert(c);
                        stale.get_or_insert(e);
                    }
                    None => return ListenerTls::Unresolved(e),
                },
            }
        }
        match (first, stale) {
            (Some(certificate), Some(error)) => ListenerTls::Stale { certificate, error },
            (Some(c), None) => ListenerTls::Ready(c),
            (None, _) => ListenerTls::Unresolved(TlsRefError::NoCertificateRefs),
        }
    }

    /// The client certificate a Gateway in `gateway_ns` presents to TLS backends
    /// (`spec.tls.backend.clientCertificateRef`): the same rules as a listener's certificateRef.
    pub fn client_certificate(
        &mut self,
        gateway_ns: &str,
        r: &GatewayTlsBackendClientCertificateRef,
    ) -> Result<Arc<Certificate>, TlsRefError> {
        self.resolve("Gateway", gateway_ns, &as_certificate_ref(r))
    }

    /// The certificate the previous table served from the Secret `e` is about, when `e` is
    /// about the Secret's contents.
    fn previous(&self, e: &TlsRefError) -> Option<Arc<Certificate>> {
        self.served.get(&e.bad_contents()?).cloned()
    }

    /// One certificateRef: kind and permission, then the Secret and its contents.
    fn resolve(
        &mut self,
        from: &'static str,
        gateway_ns: &str,
        r: &GatewayListenersTlsCertificateRefs,
    ) -> Result<Arc<Certificate>, TlsRefError> {
        let (ns, _) = permitted_secret(&self.grants, from, gateway_ns, r)?;
        let key = (ns.to_owned(), r.name.clone());
        if let Some(done) = self.parsed.get(&key) {
            return done.clone();
        }
        let result = self.parse(ns, &r.name);
        self.parsed.insert(key, result.clone());
        result
    }

    fn parse(&self, ns: &str, name: &str) -> Result<Arc<Certificate>, TlsRefError> {
        let secret = self
            .secrets
            .get(&(ns, name))
            .ok_or_else(|| TlsRefError::SecretNotFound {
                namespace: ns.to_owned(),
                name: name.to_owned(),
            })?;
        let field = |field: &'static str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(field))
                .map(|b| b.0.as_slice())
                .filter(|b| !b.is_empty())
                .ok_or_else(|| TlsRefError::MissingField {
                    namespace: ns.to_owned(),
                    name: name.to_owned(),
                    field,
                })
        };
        let secret_name = format!("{ns}/{name}");
        Certificate::from_pem(secret_name.clone(), field("tls.crt")?, field("tls.key")?)
            .map(Arc::new)
            .map_err(|error| TlsRefError::Invalid {
                secret: secret_name,
                error,
            })
    }
}

/// A clientCertificateRef read as a certificateRef (the same fields and defaults).
fn as_certificate_ref(
    r: &GatewayTlsBackendClientCertificateRef,
) -> GatewayListenersTlsCertificateRefs {
    GatewayListenersTlsCertificateRefs {
        group: r.group.clone(),
        kind: r.kind.clone(),
        name: r.name.clone(),
        namespace: r.namespace.clone(),
    }
}

/// The Secret `(namespace, name)` a certificateRef of an object of kind `from` (Gateway or
/// ListenerSet) in `gateway_ns` names, when it is a core Secret and the reference is permitted
/// (same namespace, or a ReferenceGrant from that kind).
fn permitted_secret<'r>(
    grants: &Grants<'_>,
    from: &'static str,
    gateway_ns: &'r str,
    r: &'r GatewayListenersTlsCertificateRefs,
) -> Result<(&'r str, &'r str), TlsRefError> {
    let group = r.group.as_deref().unwrap_or("");
    let kind = r.kind.as_deref().unwrap_or("Secret");
    if !group.is_empty() || kind != "Secret" {
        return Err(TlsRefError::UnsupportedKind {
            group: group.to_owned(),
            kind: kind.to_owned(),
            name: r.name.clone(),
        });
    }
    let ns = r.namespace.as_deref().unwrap_or(gateway_ns);
    let from = RefSide {
        group: GATEWAY_GROUP,
        kind: from,
        namespace: gateway_ns,
    };
    let to = RefSide {
        group: "",
        kind: "Secret",
        namespace: ns,
    };
    if !grants.allows(from, to, &r.name) {
        return Err(TlsRefError::NotPermitted {
            namespace: ns.to_owned(),
            name: r.name.clone(),
        });
    }
    Ok((ns, &r.name))
}

/// `(namespace, name)` of every Secret a listener of `gateways` may use: the certificateRefs
/// the translator would read. A provider that fetches Secrets on demand fetches these, so it
/// never holds a Secret the translator could not use.
pub fn referenced_secrets(
    gateways: &[Arc<Gateway>],
    grants: &[Arc<ReferenceGrant>],
) -> BTreeSet<(String, String)> {
    let grants = Grants::new(grants);
    let mut out = BTreeSet::new();
    for gw in gateways {
        let gw_ns = namespace_of(&gw.metadata);
        // The backend client certificate is read with a listener certificate's rules.
        let client = gw
            .spec
            .tls
            .as_ref()
            .and_then(|t| t.backend.as_ref()?.client_certificate_ref.as_ref())
            .map(as_certificate_ref);
        let refs = gw
            .spec
            .listeners
            .iter()
            .filter_map(|l| l.tls.as_ref()?.certificate_refs.as_ref())
            .flatten()
            .chain(client.iter());
        for r in refs {
            if let Ok((ns, name)) = permitted_secret(&grants, "Gateway", gw_ns, r) {
                out.insert((ns.to_owned(), name.to_owned()));
            }
        }
    }
    out
}

/// `(namespace, name)` of every Secret a listener of `sets` may use (a ListenerSet's
/// certificateRefs, permitted by ReferenceGrants from ListenerSets), as [`referenced_secrets`]
/// for Gateways.
pub fn referenced_listener_set_secrets(
    sets: &[Arc<gateway_api::apis::standard::listenersets::ListenerSet>],
    grants: &[Arc<ReferenceGrant>],
) -> BTreeSet<(String, String)> {
    let grants = Grants::new(grants);
    let mut out = BTreeSet::new();
    for set in sets {
        let set_ns = namespace_of(&set.metadata);
        let refs = set
            .spec
            .listeners
            .iter()
            .filter_map(|l| l.tls.as_ref()?.certificate_refs.as_ref())
            .flatten();
        for r in refs {
            let r = GatewayListenersTlsCertificateRefs {
                group: r.group.clone(),
                kind: r.kind.clone(),
                name: r.name.clone(),
                namespace: r.namespace.clone(),
            };
            if let Ok((ns, name)) = permitted_secret(&grants, "ListenerSet", set_ns, &r) {
                out.insert((ns.to_owned(), name.to_owned()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(yaml: &str) -> GatewayListeners {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn refs_are_checked_in_spec_order() {
        let snapshot = Snapshot::default();
        let served = ServedCertificates::default();
        let mut certs = Certificates::new(&snapshot, &served);
        let check = |certs: &mut Certificates<'_>, yaml: &str| match certs
            .listener("gw", &listener(yaml))
        {
            ListenerTls::Unresolved(e) => Some(e.reason().as_str()),
            ListenerTls::Passthrough => Some("passthrough"),
            ListenerTls::Plain => None,
            ListenerTls::Ready(_) => Some("ready"),
            ListenerTls::Stale { .. } => Some("stale"),
        };
        assert_eq!(
            check(&mut certs, "{name: a, port: 80, protocol: HTTP}"),
            None
        );
        assert_eq!(
            check(&mut certs, "{name: a, port: 443, protocol: HTTPS}"),
            Some(Reason::InvalidCertificateRef.as_str())
        );
        assert_eq!(
            check(
                &mut certs,
                "{name: a, port: 443, protocol: HTTPS, tls: {mode: Passthrough}}"
            ),
            Some("passthrough")
        );
        assert_eq!(
            check(&mut certs, "{name: a, port: 443, protocol: HTTPS, tls: {certificateRefs: [{kind: ConfigMap, name: c}]}}"),
            Some(Reason::InvalidCertificateRef.as_str())
        );
        assert_eq!(
            check(&mut certs, "{name: a, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: c, namespace: other}]}}"),
            Some(Reason::RefNotPermitted.as_str())
        );
        assert_eq!(
            check(
                &mut certs,
                "{name: a, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: c}]}}"
            ),
            Some(Reason::InvalidCertificateRef.as_str())
        );
    }

    #[test]
    fn unusable_contents_keep_the_served_certificate_other_errors_do_not() {
        use k8s_openapi::ByteString;
        let pair = rcgen::generate_simple_self_signed(vec!["a.example".to_owned()]).unwrap();
        let good = Certificate::from_pem(
            "default/c".into(),
            pair.cert.pem().as_bytes(),
            pair.signing_key.serialize_pem().as_bytes(),
        )
        .unwrap();
        let served: ServedCertificates = [Arc::new(good)].into_iter().collect();
        let secret = |crt: &str| {
            let mut s = Secret::default();
            s.metadata.namespace = Some("default".into());
            s.metadata.name = Some("c".into());
            s.data = Some(
                [("tls.crt", crt), ("tls.key", "garbage")]
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            );
            Arc::new(s)
        };
        let https =
            listener("{name: a, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: c}]}}");
        let garbage = Snapshot {
            secrets: vec![secret("not a certificate")],
            ..Snapshot::default()
        };
        let mut certs = Certificates::new(&garbage, &served);
        match certs.listener("default", &https) {
            ListenerTls::Stale { certificate, error } => {
                assert_eq!(certificate.secret, "default/c");
                assert_eq!(error.reason(), Reason::InvalidCertificateRef);
            }
            other => panic!("{other:?}"),
        }
        // A deleted Secret takes effect.
        let empty = Snapshot::default();
        let mut certs = Certificates::new(&empty, &served);
        assert!(matches!(
            certs.listener("default", &https),
            ListenerTls::Unresolved(TlsRefError::SecretNotFound { .. })
        ));
    }

    #[test]
    fn only_same_namespace_or_granted_secrets_are_referenced() {
        let gw: Gateway = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "web", "name": "gw"},
            "spec": {"gatewayClassName": "c",
                "tls": {"backend": {"clientCertificateRef": {"name": "client"}}},
                "listeners": [
                {"name": "a", "port": 443, "protocol": "HTTPS", "tls": {"certificateRefs": [
                    {"name": "local"},
                    {"name": "shared", "namespace": "certs"},
                    {"name": "other", "namespace": "certs"},
                    {"name": "denied", "namespace": "secret-ns"},
                    {"name": "cm", "kind": "ConfigMap"}]}},
                {"name": "b", "port": 80, "protocol": "HTTP"}]}
        }))
        .unwrap();
        let grant: ReferenceGrant = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "certs", "name": "g"},
            "spec": {"from": [{"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": "web"}],
                "to": [{"group": "", "kind": "Secret", "name": "shared"}]}
        }))
        .unwrap();
        let got = referenced_secrets(&[Arc::new(gw)], &[Arc::new(grant)]);
        let want: BTreeSet<(String, String)> =
            [("certs", "shared"), ("web", "client"), ("web", "local")]
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
        assert_eq!(got, want);
    }
}
