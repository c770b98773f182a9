//! The echo backend: answers every request with JSON describing it (`path`, `host`, `method`,
//! `proto`, `headers`, `namespace`, `pod`), the format Gateway API conformance backends use.

use tokio::net::TcpListener;

/// Who an echo server says it is.
#[derive(Debug, Clone)]
pub struct EchoIdentity {
    pub pod: String,
    pub namespace: String,
}

/// Serves echo responses on `listener` (HTTP/1.1 and h2c) until the task is dropped.
pub async fn serve_echo(listener: TcpListener, identity: EchoIdentity) -> std::io::Result<()> {
    let _ = (listener, identity);
    todo!("echo")
}
