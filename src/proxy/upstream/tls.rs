//! TLS to backends (BackendTLSPolicy): the connection a pool holds is plain TCP or a rustls
//! client session over it, made with the policy's SNI, trust anchors and expected names and,
//! when the Gateway has one, its client certificate. Pooled connections are keyed by endpoint
//! and TLS identity, so a connection made for one policy or certificate never serves another.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::proxy::error::ProxyError;
use crate::table::{BackendIdentity, BackendTls};

/// TLS for one upstream exchange: the Service port's policy and the Gateway's certificate.
#[derive(Debug, Clone)]
pub struct UpstreamTls {
    pub policy: Arc<crate::table::BackendTlsEntry>,
    pub identity: Option<Arc<BackendIdentity>>,
}

impl UpstreamTls {
    /// Distinguishes pooled connections: 0 is plain TCP.
    pub fn pool_key(tls: Option<&UpstreamTls>) -> u64 {
        tls.map_or(0, |t| {
            let policy = match &*t.policy {
                crate::table::BackendTlsEntry::Ready(p) => p.key,
                crate::table::BackendTlsEntry::Unusable { .. } => 1,
            };
            let identity = t.identity.as_ref().map_or(0, |i| i.id);
            (policy ^ identity.rotate_left(17)) | 1
        })
    }
}

/// An upstream connection's transport.
#[derive(Debug)]
pub enum UpstreamIo {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Completes a TLS handshake with `endpoint` over `tcp` within `timeout`, offering `alpn`.
pub async fn connect_tls(
    tcp: TcpStream,
    endpoint: SocketAddr,
    tls: &UpstreamTls,
    alpn: &[u8],
    timeout: Duration,
) -> Result<UpstreamIo, ProxyError> {
    let policy: &BackendTls = match &*tls.policy {
        crate::table::BackendTlsEntry::Ready(p) => p,
        crate::table::BackendTlsEntry::Unusable { policy, reason } => {
            return Err(ProxyError::BackendTlsUnusable {
                policy: policy.clone(),
                reason: reason.clone(),
            })
        }
    };
    let fail = |error: String| {
        tracing::warn!(%endpoint, policy = %policy.policy, sni = %policy.hostname, %error, "TLS to backend failed");
        ProxyError::UpstreamTls {
            addr: endpoint,
            policy: policy.policy.clone(),
            error,
        }
    };
    let config = policy
        .client_config(tls.identity.as_deref(), alpn)
        .map_err(|e| fail(e.to_string()))?;
    let handshake = TlsConnector::from(Arc::new(config)).connect(policy.server_name(), tcp);
    match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(stream)) => Ok(UpstreamIo::Tls(Box::new(stream))),
        Ok(Err(e)) => Err(fail(e.to_string())),
        Err(_) => Err(fail(format!("handshake not done within {timeout:?}"))),
    }
}

impl AsyncRead for UpstreamIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpstreamIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
