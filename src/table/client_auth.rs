//! Client-certificate validation of an HTTPS listener (Gateway `spec.tls.frontend`): the trust
//! anchors read from CA bundles, the mode, and the rustls verifier built from them once per
//! table. `AllowValidOnly` refuses a handshake without a certificate that chains to the
//! anchors; `AllowInsecureFallback` asks for one, verifies it, and lets the handshake go on
//! when it is missing or does not verify (the backend decides). Pure: parsing, no I/O.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use serde::Serialize;

/// What a listener does with a client certificate that is missing or does not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ValidationMode {
    /// The handshake fails (mutual TLS).
    AllowValidOnly,
    /// The handshake goes on; the request is served as if no certificate was sent.
    AllowInsecureFallback,
}

/// Why a CA bundle cannot be used as trust anchors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaBundleError {
    #[error("holds no PEM certificate")]
    Empty,
    #[error("does not parse as PEM: {0}")]
    BadPem(String),
    #[error("holds a certificate that is not a usable trust anchor: {0}")]
    BadAnchor(String),
}

/// Trust anchors parsed from one or more PEM bundles.
#[derive(Debug, Clone)]
pub struct CaBundle(Vec<CertificateDer<'static>>);

impl CaBundle {
    /// Parses a PEM bundle (`ca.crt`); every certificate in it must be a usable anchor.
    pub fn from_pem(pem: &[u8]) -> Result<Self, CaBundleError> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| CaBundleError::BadPem(e.to_string()))?;
        if certs.is_empty() {
            return Err(CaBundleError::Empty);
        }
        let mut roots = RootCertStore::empty();
        for c in &certs {
            roots
                .add(c.clone())
                .map_err(|e| CaBundleError::BadAnchor(e.to_string()))?;
        }
        Ok(Self(certs))
    }

    /// The anchors' certificates.
    pub fn certificates(&self) -> impl Iterator<Item = CertificateDer<'static>> + '_ {
        self.0.iter().cloned()
    }

    fn roots(bundles: &[CaBundle]) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        // Each certificate was checked by `from_pem`.
        let _ = roots.add_parsable_certificates(bundles.iter().flat_map(|b| b.0.iter().cloned()));
        roots
    }
}

/// Client-certificate validation of one listener: what `/debug/config` shows, and the verifier
/// handshakes use.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientValidation {
    /// `Kind namespace/name` of each CA bundle in use.
    pub ca_certificates: Vec<String>,
    pub mode: ValidationMode,
    #[serde(skip)]
    pub verifier: Arc<dyn ClientCertVerifier>,
}

impl ClientValidation {
    /// The validation trusting `bundles` (named by `sources`), in `mode`. Fails only if the
    /// bundles hold no anchor rustls can use.
    pub fn new(
        sources: Vec<String>,
        bundles: &[CaBundle],
        mode: ValidationMode,
    ) -> Result<Self, CaBundleError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = WebPkiClientVerifier::builder_with_provider(
            Arc::new(CaBundle::roots(bundles)),
            provider,
        );
        let verifier: Arc<dyn ClientCertVerifier> = match mode {
            ValidationMode::AllowValidOnly => builder
                .build()
                .map_err(|e| CaBundleError::BadAnchor(e.to_string()))?,
            ValidationMode::AllowInsecureFallback => Arc::new(Fallback(
                builder
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| CaBundleError::BadAnchor(e.to_string()))?,
            )),
        };
        Ok(Self {
            ca_certificates: sources,
            mode,
            verifier,
        })
    }
}

/// `AllowInsecureFallback`: asks for a certificate and verifies it, but a certificate that does
/// not verify does not end the handshake. Its signature over the handshake is still checked,
/// so a client cannot present someone else's certificate.
#[derive(Debug)]
struct Fallback(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for Fallback {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if let Err(error) = self.0.verify_client_cert(end_entity, intermediates, now) {
            tracing::debug!(%error, "client certificate does not verify; insecure fallback");
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundles_must_hold_parsable_anchors() {
        let ca = rcgen::generate_simple_self_signed(vec!["ca".to_owned()]).unwrap();
        let bundle = CaBundle::from_pem(ca.cert.pem().as_bytes()).unwrap();
        assert_eq!(
            CaBundle::from_pem(b"no pem here").unwrap_err(),
            CaBundleError::Empty
        );
        let broken = "-----BEGIN CERTIFICATE-----\nSGVsbG8gd29ybGQK\n-----END CERTIFICATE-----\n";
        assert!(CaBundle::from_pem(broken.as_bytes()).is_err());
        for mode in [
            ValidationMode::AllowValidOnly,
            ValidationMode::AllowInsecureFallback,
        ] {
            let v = ClientValidation::new(
                vec!["ConfigMap a/b".into()],
                std::slice::from_ref(&bundle),
                mode,
            )
            .unwrap();
            assert!(v.verifier.offer_client_auth());
            assert_eq!(
                v.verifier.client_auth_mandatory(),
                mode == ValidationMode::AllowValidOnly
            );
        }
    }
}
