//! WebSocket over loopback with a real implementation (`tokio-tungstenite`): a backend that
//! completes the handshake and echoes every message, and a client that connects through the
//! proxy with a chosen `Host`.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::echo::Echo;
use super::net::bind_loopback;

/// Time limit of one WebSocket step in tests.
pub const WS_TIMEOUT: Duration = Duration::from_secs(5);

/// A WebSocket backend that answers each text or binary message with `"{pod}: "` plus the
/// message (binary messages are echoed as they are).
pub async fn start_ws_echo(pod: &str) -> Echo {
    let listener = bind_loopback().await;
    let addr = listener
        .local_addr()
        .expect("bound listener has an address");
    let name = pod.to_owned();
    let task = tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await?;
            let name = name.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(msg)) = ws.next().await {
                    let reply = match msg {
                        Message::Text(t) => Message::text(format!("{name}: {t}")),
                        Message::Binary(b) => Message::Binary(b),
                        Message::Close(_) => break,
                        _ => continue,
                    };
                    if ws.send(reply).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Echo::from_task(addr, pod, task)
}

/// Opens a WebSocket to `ws://{host}{path}` over a TCP connection to `addr` (the proxy).
pub async fn ws_connect(
    addr: SocketAddr,
    host: &str,
    path: &str,
) -> Result<WebSocketStream<TcpStream>, Box<dyn std::error::Error + Send + Sync>> {
    let stream = tokio::time::timeout(WS_TIMEOUT, TcpStream::connect(addr)).await??;
    let request = format!("ws://{host}{path}").into_client_request()?;
    let (ws, resp) =
        tokio::time::timeout(WS_TIMEOUT, tokio_tungstenite::client_async(request, stream))
            .await??;
    assert_eq!(resp.status(), 101);
    Ok(ws)
}

/// Sends `text` and returns the next text message, within [`WS_TIMEOUT`].
pub async fn ws_round_trip(
    ws: &mut WebSocketStream<TcpStream>,
    text: &str,
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    tokio::time::timeout(WS_TIMEOUT, ws.send(Message::text(text))).await??;
    loop {
        match tokio::time::timeout(WS_TIMEOUT, ws.next()).await? {
            Some(Ok(Message::Text(t))) => return Ok(t.to_string()),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(e.into()),
            None => return Err("connection closed".into()),
        }
    }
}
