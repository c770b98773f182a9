//! What the echo backend speaks besides plain HTTP: datagrams (a UDPRoute backend) and the
//! certificate of its TLS mode (a TLS passthrough backend).

use std::sync::Arc;

use tokio::net::UdpSocket;
use tokio_rustls::TlsAcceptor;

use super::EchoIdentity;

/// A UDP echo: answers every datagram with the pod name, a colon and the datagram, to the
/// address it came from (the backend of a UDPRoute).
pub async fn serve_udp_echo(socket: UdpSocket, identity: EchoIdentity) -> std::io::Result<()> {
    let mut buf = vec![0u8; 65_535];
    loop {
        let (n, peer) = socket.recv_from(&mut buf).await?;
        let mut reply = Vec::with_capacity(identity.pod.len() + 1 + n);
        reply.extend_from_slice(identity.pod.as_bytes());
        reply.push(b':');
        reply.extend_from_slice(&buf[..n]);
        if let Err(error) = socket.send_to(&reply, peer).await {
            tracing::debug!(%peer, %error, "UDP echo reply not sent");
        }
    }
}

/// A TLS acceptor serving the PEM certificate chain and key (PKCS#8, PKCS#1 or SEC1).
pub fn tls_acceptor(cert_pem: &[u8], key_pem: &[u8]) -> Result<TlsAcceptor, EchoTlsError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| EchoTlsError::Pem(e.to_string()))?;
    let key =
        PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| EchoTlsError::Pem(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Why the echo server's certificate cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EchoTlsError {
    #[error("cannot read PEM: {0}")]
    Pem(String),
    #[error(transparent)]
    Tls(#[from] rustls::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn udp_echo_answers_with_the_pod_name() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let identity = EchoIdentity {
            pod: "pod-1".into(),
            namespace: "ns".into(),
        };
        let server = tokio::spawn(serve_udp_echo(socket, identity));
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.send_to(b"ping", addr).await.unwrap();
        let mut buf = [0u8; 64];
        let (n, _) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&buf[..n], b"pod-1:ping");
        server.abort();
    }

    #[test]
    fn tls_acceptor_needs_a_certificate_and_key() {
        assert!(matches!(
            tls_acceptor(b"not pem", b"not pem"),
            Err(EchoTlsError::Pem(_))
        ));
    }
}
