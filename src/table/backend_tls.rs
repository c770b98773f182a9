//! TLS to backends: what a BackendTLSPolicy makes of a Service port (the name sent as SNI, the
//! trust anchors, the names the backend's certificate must carry) and what a Gateway's
//! `spec.tls.backend.clientCertificateRef` or an Ingress's `proxy-ssl-secret` adds (the
//! certificate the proxy presents). Built once per table; the proxy makes a rustls client
//! configuration from them per connection.
//! Pure: parsing and verification logic, no I/O.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use serde::Serialize;

use super::client_auth::CaBundle;
use super::tls::Certificate;

/// A name the backend's certificate must carry (BackendTLSPolicy `subjectAltNames`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", content = "value")]
pub enum SubjectAltName {
    Hostname(String),
    Uri(String),
}

/// Why a BackendTLSPolicy's validation cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendTlsError {
    #[error("hostname {0:?} is not a valid DNS name for SNI")]
    BadHostname(String),
    #[error("subjectAltName hostname {0:?} is not a valid DNS name")]
    BadSubjectAltName(String),
}

/// What a BackendTLSPolicy makes of a Service port: TLS as configured, or a policy that
/// cannot be used, whose backend is answered 502 rather than reached in cleartext.
#[derive(Debug, Serialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum BackendTlsEntry {
    Ready(BackendTls),
    Unusable { policy: String, reason: String },
}

/// TLS to one Service port: how the proxy connects and what it accepts from the backend.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTls {
    /// `namespace/name` of the BackendTLSPolicy.
    pub policy: String,
    /// Sent as SNI; the certificate must be valid for it unless `subject_alt_names` is set.
    pub hostname: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<SubjectAltName>,
    /// `Kind namespace/name` of each CA bundle trusted.
    pub ca_certificates: Vec<String>,
    /// `namespace/name` of the Secret whose certificate is presented to this Service port
    /// (an Ingress's `proxy-ssl-secret`), in place of the Gateway's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<String>,
    #[serde(skip)]
    identity: Option<Arc<BackendIdentity>>,
    #[serde(skip)]
    server_name: ServerName<'static>,
    #[serde(skip)]
    verifier: Arc<Verifier>,
    /// Identifies what connections made with this configuration accept: pooled connections
    /// are reused only for the same value.
    #[serde(skip)]
    pub key: u64,
}

impl BackendTls {
    /// The validation of `policy` (`namespace/name`) trusting `bundles` (named by `sources`).
    pub fn new(
        policy: String,
        hostname: String,
        subject_alt_names: Vec<SubjectAltName>,
        sources: Vec<String>,
        bundles: &[CaBundle],
    ) -> Result<Self, BackendTlsError> {
        let server_name = ServerName::try_from(hostname.clone())
            .map_err(|_| BackendTlsError::BadHostname(hostname.clone()))?;
        let mut names = Vec::new();
        for san in &subject_alt_names {
            match san {
                SubjectAltName::Hostname(h) => names.push(Name::Dns(
                    ServerName::try_from(h.clone())
                        .map_err(|_| BackendTlsError::BadSubjectAltName(h.clone()))?,
                )),
                SubjectAltName::Uri(u) => names.push(Name::Uri(u.clone())),
            }
        }
        if names.is_empty() {
            names.push(Name::Dns(server_name.clone()));
        }
        let mut roots = RootCertStore::empty();
        let _ = roots.add_parsable_certificates(bundles.iter().flat_map(CaBundle::certificates));
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (&policy, &hostname, &subject_alt_names).hash(&mut hasher);
        for b in bundles {
            for c in b.certificates() {
                c.as_ref().hash(&mut hasher);
            }
        }
        Ok(Self {
            policy,
            hostname,
            subject_alt_names,
            ca_certificates: sources,
            client_certificate: None,
            identity: None,
            server_name,
            verifier: Arc::new(Verifier {
                roots: Arc::new(roots),
                names,
                provider: Arc::new(rustls::crypto::ring::default_provider()),
                verify: true,
            }),
            key: hasher.finish(),
        })
    }

    /// TLS that accepts whatever certificate the backend presents (the handshake's signatures
    /// are still checked): ingress-nginx's `backend-protocol: HTTPS` without
    /// `proxy-ssl-verify`, which no BackendTLSPolicy object can ask for.
    pub fn unverified(policy: String, hostname: String) -> Result<Self, BackendTlsError> {
        let mut tls = Self::new(policy, hostname, Vec::new(), Vec::new(), &[])?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (tls.key, "unverified").hash(&mut hasher);
        tls.key = hasher.finish();
        tls.verifier = Arc::new(Verifier {
            roots: Arc::new(RootCertStore::empty()),
            names: Vec::new(),
            provider: tls.verifier.provider.clone(),
            verify: false,
        });
        Ok(tls)
    }

    /// This validation presenting `identity` to the Service port, whatever the Gateway's
    /// client certificate is (an Ingress's `proxy-ssl-secret`).
    pub fn presenting(mut self, identity: Arc<BackendIdentity>) -> Self {
        self.client_certificate = Some(identity.secret.clone());
        self.identity = Some(identity);
        self
    }

    /// The client certificate presented to the Service port: its own when it has one, else
    /// `gateway`'s (the listener's Gateway `spec.tls.backend.clientCertificateRef`).
    pub fn identity<'a>(
        &'a self,
        gateway: Option<&'a Arc<BackendIdentity>>,
    ) -> Option<&'a Arc<BackendIdentity>> {
        self.identity.as_ref().or(gateway)
    }

    /// False when any certificate is accepted ([`BackendTls::unverified`]).
    pub fn verifies(&self) -> bool {
        self.verifier.verify
    }

    /// The name sent as SNI.
    pub fn server_name(&self) -> ServerName<'static> {
        self.server_name.clone()
    }

    /// A client configuration for one connection: this validation, ALPN `alpn`, and the
    /// Gateway's client certificate when it has one. Fails only if the ring provider lacks
    /// the default protocol versions.
    pub fn client_config(
        &self,
        identity: Option<&BackendIdentity>,
        alpn: &[u8],
    ) -> Result<ClientConfig, rustls::Error> {
        let builder = ClientConfig::builder_with_provider(self.verifier.provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(self.verifier.clone());
        let mut config = match identity {
            Some(id) => builder.with_client_cert_resolver(Arc::new(Present(id.key.clone()))),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![alpn.to_vec()];
        Ok(config)
    }
}

/// A client certificate presented to TLS backends: a Gateway's, or an Ingress's
/// `proxy-ssl-secret`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendIdentity {
    /// `namespace/name` of the Secret.
    pub secret: String,
    #[serde(skip)]
    key: Arc<CertifiedKey>,
    /// Distinguishes pooled connections made with different certificates.
    #[serde(skip)]
    pub id: u64,
}

impl BackendIdentity {
    /// The identity of a parsed certificate and key.
    pub fn new(certificate: &Certificate) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for c in certificate.key.cert.iter() {
            c.as_ref().hash(&mut hasher);
        }
        Self {
            secret: certificate.secret.clone(),
            key: certificate.key.clone(),
            id: hasher.finish(),
        }
    }
}

#[derive(Debug)]
struct Present(Arc<CertifiedKey>);

impl rustls::client::ResolvesClientCert for Present {
    fn resolve(&self, _: &[&[u8]], _: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

#[derive(Debug)]
enum Name {
    Dns(ServerName<'static>),
    Uri(String),
}

/// The chain must lead to one of the policy's anchors, and the leaf must carry one of the
/// expected names (the hostname, or any of the policy's subjectAltNames).
#[derive(Debug)]
struct Verifier {
    roots: Arc<RootCertStore>,
    names: Vec<Name>,
    provider: Arc<CryptoProvider>,
    /// False: every certificate is accepted (its handshake signature still checked).
    verify: bool,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !self.verify {
            return Ok(ServerCertVerified::assertion());
        }
        let parsed = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &parsed,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        let mut uris = None;
        for name in &self.names {
            let ok = match name {
                Name::Dns(n) => verify_server_name(&parsed, n).is_ok(),
                Name::Uri(u) => uris
                    .get_or_insert_with(|| super::x509::uri_sans(end_entity))
                    .contains(u),
            };
            if ok {
                return Ok(ServerCertVerified::assertion());
            }
        }
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName,
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
