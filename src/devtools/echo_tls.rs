//! The echo backend over TLS, as the conformance suite's TLS backends: every connection
//! completes a rustls handshake with the given certificate (asking for a client certificate
//! signed by the given CA, when there is one), then is answered like the plain echo, the JSON
//! carrying `tls.serverName` (the SNI the client sent) and `tls.peerCertificates` (the client's
//! chain as PEM). Used by `edgeplane echo --tls-cert` and by tests of BackendTLSPolicy.

use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::devtools::echo::{answer, deliver, EchoIdentity, RequestLog, TlsSeen};

/// Time a client gets to complete its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a TLS echo cannot be configured.
#[derive(Debug, thiserror::Error)]
pub enum EchoTlsError {
    #[error("certificate: {0}")]
    Certificate(String),
    #[error("private key: {0}")]
    Key(String),
    #[error("client CA: {0}")]
    ClientCa(String),
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// A server configuration from PEM: the certificate chain and key, and the CA client
/// certificates must chain to (`None`: no client certificate asked for). ALPN `h2` and
/// `http/1.1`.
pub fn server_config(
    cert_pem: &[u8],
    key_pem: &[u8],
    client_ca_pem: Option<&[u8]>,
) -> Result<Arc<ServerConfig>, EchoTlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| EchoTlsError::Certificate(e.to_string()))?;
    let key =
        PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| EchoTlsError::Key(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match client_ca_pem {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(pem) {
                let c = c.map_err(|e| EchoTlsError::ClientCa(e.to_string()))?;
                roots
                    .add(c)
                    .map_err(|e| EchoTlsError::ClientCa(e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| EchoTlsError::ClientCa(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves echo responses over TLS on `listener` until the task is dropped.
pub async fn serve_echo_tls(
    listener: TcpListener,
    identity: EchoIdentity,
    log: Option<RequestLog>,
    config: Arc<ServerConfig>,
) -> std::io::Result<()> {
    let identity = Arc::new(identity);
    let acceptor = TlsAcceptor::from(config);
    let builder = auto::Builder::new(TokioExecutor::new());
    let mut conns: JoinSet<()> = JoinSet::new();
    loop {
        tokio::select! {
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let (acceptor, builder) = (acceptor.clone(), builder.clone());
                let (identity, log) = (identity.clone(), log.clone());
                conns.spawn(async move {
                    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                    let Ok(Ok(stream)) = handshake.await else {
                        return;
                    };
                    let session = stream.get_ref().1;
                    let seen = Arc::new(TlsSeen {
                        server_name: session.server_name().map(str::to_owned),
                        peer_certificates: session
                            .peer_certificates()
                            .unwrap_or_default()
                            .iter()
                            .map(pem)
                            .collect(),
                    });
                    let service = service_fn(move |req| {
                        let (identity, log, seen) = (identity.clone(), log.clone(), seen.clone());
                        async move {
                            deliver(answer(req, &identity, log.as_ref(), Some(&seen)).await)
                        }
                    });
                    let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                });
            }
        }
    }
}

/// A DER certificate as PEM.
fn pem(der: &CertificateDer<'_>) -> String {
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    pem::encode_config(&pem::Pem::new("CERTIFICATE", der.to_vec()), config)
}
