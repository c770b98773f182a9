//! The HTTPS server of the CRD conversion webhook: `POST /convert` with a `ConversionReview`,
//! answered by [`crate::kinds::crd::answer_review`]. Its serving certificate lives in
//! [`WebhookCerts`] and can be replaced at any time: each new TLS handshake takes the current
//! one, connections already open keep theirs. HTTP/1.1 and HTTP/2 (ALPN). Nothing here knows
//! where certificates come from or how the CRDs' `caBundle` is kept. What one client can make
//! it hold is bounded by [`WebhookLimits`] (the accept loop and timers in `server`, the body
//! and review limits in `handler`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};

use crate::table::{Certificate, CertificateError};

mod handler;
mod server;

pub use server::{serve, serve_with};

/// The path the CRDs' `conversion.webhook.clientConfig.service.path` names (declared with the
/// CRDs).
pub use crate::kinds::crd::generate::CONVERT_PATH;
/// Largest request body read (a whole review): the API server stores objects of at most
/// about 3 MiB, so a review of one object fits; larger bodies get 413 before they are read.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Reviews converted at the same time by default; each holds at most its body and one
/// parsed object.
pub const DEFAULT_MAX_CONCURRENT_REVIEWS: usize = 4;
/// Open connections by default (each is a file descriptor; the API server needs a few).
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// Default time from accept to the first request head: TLS handshake and protocol preface.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a keep-alive connection may stay without a request in progress.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// What the webhook lets its clients hold: connections (file descriptors), time without a
/// request, bytes of one review and reviews converted at once. Every field is a hard bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookLimits {
    /// Open connections; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// From accept to the first complete request head (TLS handshake, HTTP/2 preface and
    /// protocol detection included); then the connection is closed.
    pub handshake_timeout: Duration,
    /// A connection with no request in progress for this long is closed (HTTP/1.1
    /// keep-alive and HTTP/2 alike).
    pub idle_timeout: Duration,
    /// Largest request body; a declared larger `Content-Length` is refused at once, a larger
    /// streamed body as soon as it passes the limit.
    pub max_body_bytes: usize,
    /// Reviews read and converted at the same time; a request that finds none free within
    /// a second gets 429.
    pub max_concurrent_reviews: usize,
}

impl Default for WebhookLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_body_bytes: MAX_BODY_BYTES,
            max_concurrent_reviews: DEFAULT_MAX_CONCURRENT_REVIEWS,
        }
    }
}

/// Why a certificate cannot serve the webhook.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("webhook certificate: {0}")]
    Certificate(#[from] CertificateError),
    #[error("webhook TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("webhook client CA: {0}")]
    ClientCa(String),
}

/// The webhook's serving certificate, replaceable at runtime: the next handshake after
/// [`WebhookCerts::set_pem`] presents the new one. Until one is set, handshakes fail.
#[derive(Default)]
pub struct WebhookCerts {
    current: ArcSwapOption<CertifiedKey>,
}

impl fmt::Debug for WebhookCerts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookCerts")
            .field("loaded", &self.current.load().is_some())
            .finish()
    }
}

impl WebhookCerts {
    /// No certificate yet (handshakes fail until [`WebhookCerts::set_pem`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// A certificate from a PEM chain (leaf first) and its PEM private key.
    pub fn from_pem(
        cert_pem: impl AsRef<[u8]>,
        key_pem: impl AsRef<[u8]>,
    ) -> Result<Self, WebhookError> {
        let certs = Self::new();
        certs.set_pem(cert_pem, key_pem)?;
        Ok(certs)
    }

    /// Replaces the serving certificate. On error the current one stays.
    pub fn set_pem(
        &self,
        cert_pem: impl AsRef<[u8]>,
        key_pem: impl AsRef<[u8]>,
    ) -> Result<(), WebhookError> {
        let parsed =
            Certificate::from_pem("webhook".to_owned(), cert_pem.as_ref(), key_pem.as_ref())?;
        self.current.store(Some(parsed.key));
        Ok(())
    }

    /// The certificate the next handshake presents.
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }
}

/// Hands each handshake the current certificate.
#[derive(Debug)]
struct Resolver(Arc<WebhookCerts>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.current()
    }
}

/// The CA bundle (PEM) client certificates must chain to, when the webhook requires them.
pub fn client_ca_roots(pem: &[u8]) -> Result<Arc<RootCertStore>, WebhookError> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pem) {
        let c = c.map_err(|e| WebhookError::ClientCa(e.to_string()))?;
        roots
            .add(c)
            .map_err(|e| WebhookError::ClientCa(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(WebhookError::ClientCa(
            "no certificate in the bundle".into(),
        ));
    }
    Ok(Arc::new(roots))
}

/// The rustls configuration of the webhook: ring provider, the certificate of `certs`,
/// ALPN `h2` and `http/1.1`, and with `client_ca` a client certificate required.
fn server_config(
    certs: Arc<WebhookCerts>,
    client_ca: Option<Arc<RootCertStore>>,
) -> Result<Arc<ServerConfig>, WebhookError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(roots) => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| WebhookError::ClientCa(e.to_string()))?,
        ),
    };
    let mut config = builder.with_cert_resolver(Arc::new(Resolver(certs)));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
