//! The HTTPS server of the CRD conversion webhook: `POST /convert` with a `ConversionReview`,
//! answered by [`crate::crd::answer_review`]. Its serving certificate lives in
//! [`WebhookCerts`] and can be replaced at any time: each new TLS handshake takes the current
//! one, connections already open keep theirs. HTTP/1.1 and HTTP/2 (ALPN). Nothing here knows
//! where certificates come from or how the CRDs' `caBundle` is kept.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::table::{Certificate, CertificateError};

/// The path the CRDs' `conversion.webhook.clientConfig.service.path` names.
pub const CONVERT_PATH: &str = "/convert";
/// Largest request body read; the API server sends objects of at most a few MiB.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Time a client has for the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a client has to send a request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a client has to send a request body.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Time open connections get to finish after shutdown is asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a certificate cannot serve the webhook.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("webhook certificate: {0}")]
    Certificate(#[from] CertificateError),
    #[error("webhook TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
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

/// The rustls configuration of the webhook: ring provider, the certificate of `certs`,
/// ALPN `h2` and `http/1.1`.
fn server_config(certs: Arc<WebhookCerts>) -> Result<Arc<ServerConfig>, WebhookError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Resolver(certs)));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves the webhook on `listener` until `shutdown` resolves; then stops accepting and gives
/// open connections [`DRAIN_TIMEOUT`] to finish. Fails only when TLS cannot be set up.
pub async fn serve(
    listener: TcpListener,
    certs: Arc<WebhookCerts>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WebhookError> {
    let acceptor = TlsAcceptor::from(server_config(certs)?);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let graceful = GracefulShutdown::new();
    let (tx, mut handshaken) = tokio::sync::mpsc::channel(64);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(stream) = handshaken.recv() => {
                let conn = builder.serve_connection(TokioIo::new(stream), service_fn(|req| async {
                    Ok::<_, std::convert::Infallible>(handle(req).await)
                }));
                let conn = graceful.watch(conn.into_owned());
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "webhook connection ended");
                    }
                });
            }
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "webhook accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send(stream).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "webhook handshake failed"),
                        Err(_) => tracing::debug!(%peer, "webhook handshake timed out"),
                    }
                });
            }
        }
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("webhook connections still open after the drain time");
    }
    Ok(())
}

/// Answers one request: `POST /convert` with a review, 404 on other paths, 405 on other
/// methods, 413 on bodies over [`MAX_BODY_BYTES`], 400 on bodies that are not a review.
pub async fn handle(req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.uri().path() != CONVERT_PATH {
        return text(
            StatusCode::NOT_FOUND,
            &format!("not found: the conversion webhook serves only POST {CONVERT_PATH}\n"),
        );
    }
    if req.method() != Method::POST {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("method {} not allowed: use POST\n", req.method()),
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    let limited = Limited::new(req.into_body(), MAX_BODY_BYTES);
    let bytes = match tokio::time::timeout(BODY_READ_TIMEOUT, limited.collect()).await {
        Err(_) => {
            return text(
                StatusCode::REQUEST_TIMEOUT,
                "request body not received in time\n",
            )
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("request body over {MAX_BODY_BYTES} bytes\n"),
            )
        }
        Ok(Err(e)) => {
            return text(
                StatusCode::BAD_REQUEST,
                &format!("cannot read request body: {e}\n"),
            )
        }
        Ok(Ok(b)) => b.to_bytes(),
    };
    match crate::crd::answer_review(&bytes) {
        Ok(review) => match serde_json::to_vec(&review) {
            Ok(v) => body(StatusCode::OK, "application/json", v),
            Err(e) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("cannot encode: {e}\n"),
            ),
        },
        Err(e) => text(StatusCode::BAD_REQUEST, &format!("{e}\n")),
    }
}

fn text(status: StatusCode, s: &str) -> Response<Full<Bytes>> {
    body(status, "text/plain; charset=utf-8", s.to_owned())
}

fn body(
    status: StatusCode,
    content_type: &'static str,
    b: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(b.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}
