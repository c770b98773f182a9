//! What the echo backend speaks besides HTTP: datagrams (a UDPRoute backend). Its TLS mode is
//! [`crate::devtools::echo_tls`].

use tokio::net::UdpSocket;

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
}
