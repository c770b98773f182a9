//! The client's stream as the own HTTP/1.1 server hands it over after a `101 Switching
//! Protocols` answer: [`OnUpgrade`], the request extension the tunnel awaits, next to hyper's.
//! Here, beside both the server (`inbound`) and the tunnel (`upstream`), so neither imports the
//! other.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;

use crate::proxy::handshake::detect::Prefixed;

/// A client stream, plain or TLS.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// A client stream of either kind, boxed once per connection.
pub(crate) type BoxedIo = Box<dyn Stream>;

/// A request extension on HTTP/1.1 requests that may upgrade: resolves to the client's stream
/// (with any bytes already read from it) once the connection has sent a `101` answer; fails when
/// the answer was another.
#[derive(Clone)]
pub struct OnUpgrade(Arc<Mutex<Option<oneshot::Receiver<Prefixed<BoxedIo>>>>>);

impl OnUpgrade {
    pub(crate) fn new(rx: oneshot::Receiver<Prefixed<BoxedIo>>) -> Self {
        Self(Arc::new(Mutex::new(Some(rx))))
    }

    /// The client's stream after the switch.
    pub(crate) async fn upgraded(self) -> Result<Prefixed<BoxedIo>, UpgradeError> {
        let rx = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        rx.ok_or(UpgradeError)?.await.map_err(|_| UpgradeError)
    }
}

/// The connection did not switch protocols.
#[derive(Debug, thiserror::Error)]
#[error("the client connection was not upgraded")]
pub struct UpgradeError;
