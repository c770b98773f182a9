//! TLS termination on HTTPS sockets. The ClientHello is read first; the live route table then
//! names the listener for its SNI, and the handshake completes with that listener's rustls
//! configuration (its certificate, its client-certificate validation, ALPN `h2` and
//! `http/1.1`). A new table with a rotated certificate or a new validation applies to the next
//! handshake without rebinding, while open connections keep the session they have.

use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;
use tokio_rustls::LazyConfigAcceptor;

use crate::table::RouteTable;

/// Why a TLS handshake did not complete.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    #[error("reading the ClientHello: {0}")]
    Hello(std::io::Error),
    #[error("no HTTPS listener of the socket serves SNI {sni:?}")]
    NoListener { sni: Option<String> },
    #[error("{0}")]
    Handshake(std::io::Error),
}

/// Completes the handshake of a connection accepted on `addr`: the listener whose hostname
/// best matches the SNI (else the socket's listener without hostname) answers with its own
/// configuration. Returns the stream and the SNI, lower-cased.
pub(crate) async fn handshake<IO: AsyncRead + AsyncWrite + Unpin>(
    table: &ArcSwap<RouteTable>,
    addr: SocketAddr,
    io: IO,
) -> Result<(TlsStream<IO>, TlsInfo), HandshakeError> {
    let start = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), io)
        .await
        .map_err(HandshakeError::Hello)?;
    let sni = start
        .client_hello()
        .server_name()
        .map(|name| name.to_ascii_lowercase());
    let config = {
        let table = table.load();
        let listener = table
            .listener(&addr)
            .and_then(|l| l.tls.as_ref())
            .and_then(|tls| tls.resolve(sni.as_deref()));
        match listener {
            Some(l) => l.config.clone(),
            None => return Err(HandshakeError::NoListener { sni }),
        }
    };
    let stream = start
        .into_stream(config)
        .await
        .map_err(HandshakeError::Handshake)?;
    Ok((
        stream,
        TlsInfo {
            sni: sni.map(Arc::from),
        },
    ))
}

/// The acceptor of a TLS listener in Terminate mode (TLSRoute) for a ClientHello with `sni`
/// read on socket `addr`: the configuration of the listener the SNI selects (its certificate,
/// no ALPN: the plaintext stream is forwarded as it is). `None` when no listener serves it.
pub(crate) fn stream_acceptor(
    table: &ArcSwap<RouteTable>,
    addr: SocketAddr,
    sni: Option<&str>,
) -> Option<tokio_rustls::TlsAcceptor> {
    let table = table.load();
    let listener = table.listener(&addr)?.tls.as_ref()?.resolve(sni)?;
    Some(tokio_rustls::TlsAcceptor::from(listener.config.clone()))
}

/// What the proxy knows of a TLS connection when serving its requests.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsInfo {
    /// The SNI the client sent, lower-cased.
    pub sni: Option<Arc<str>>,
}
