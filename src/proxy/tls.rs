//! TLS termination on HTTPS sockets: a rustls server whose certificate resolver reads the live
//! route table at each handshake, so a new certificate (or a new listener hostname) applies to
//! the next handshake without rebinding, while open connections keep the session they have.
//! ALPN offers `h2` and `http/1.1`; the HTTP layer serves both with the same auto builder.

use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use crate::table::RouteTable;

/// Picks the certificate for a handshake on one socket from the live table: the listener whose
/// hostname best matches the SNI, else the socket's listener without hostname. `None` aborts the
/// handshake (unknown SNI and no default certificate).
#[derive(Debug)]
struct TableResolver {
    table: Arc<ArcSwap<RouteTable>>,
    addr: SocketAddr,
}

impl ResolvesServerCert for TableResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let table = self.table.load();
        let tls = table.listener(&self.addr)?.tls.as_ref()?;
        let listener = tls.resolve(hello.server_name());
        if listener.is_none() {
            tracing::debug!(addr = %self.addr, sni = ?hello.server_name(), "no certificate for SNI");
        }
        listener.map(|l| l.certificate.key.clone())
    }
}

/// The acceptor of one socket (used when the live table says the socket is HTTPS). Fails only
/// if the ring provider lacks the default protocol versions.
pub(crate) fn acceptor(
    table: Arc<ArcSwap<RouteTable>>,
    addr: SocketAddr,
) -> Result<TlsAcceptor, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(TableResolver { table, addr }));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The acceptor of a TLS listener in Terminate mode (TLSRoute): certificates chosen by SNI as
/// on HTTPS sockets, but no ALPN, as the plaintext stream is forwarded as it is.
pub(crate) fn stream_acceptor(
    table: Arc<ArcSwap<RouteTable>>,
    addr: SocketAddr,
) -> Result<TlsAcceptor, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(TableResolver { table, addr }));
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// What the proxy knows of a TLS connection when serving its requests.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsInfo {
    /// The SNI the client sent, lower-cased.
    pub sni: Option<Arc<str>>,
}
