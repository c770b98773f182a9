//! HTTP/1.1 upgrades (WebSocket): the `Upgrade` and `Connection` headers survive hop-by-hop
//! stripping for a WebSocket handshake, and after the backend's `101 Switching Protocols` the two
//! upgraded connections are joined and bytes are copied both ways until either side closes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::header::{self, HeaderMap, HeaderValue};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::sync::{watch, Notify};

use crate::proxy::upgraded::BoxedIo;

/// The open tunnels, so shutdown can give them the drain window and then cut them: once
/// upgraded, a connection is no longer tracked by the HTTP server's graceful shutdown.
#[derive(Debug)]
pub struct Tunnels {
    open: AtomicUsize,
    closed: Notify,
    cut: watch::Sender<bool>,
}

impl Default for Tunnels {
    fn default() -> Self {
        Self {
            open: AtomicUsize::new(0),
            closed: Notify::new(),
            cut: watch::channel(false).0,
        }
    }
}

impl Tunnels {
    /// Number of tunnels currently open.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Waits up to `window` for every tunnel to close, then cuts the ones still open and
    /// returns how many that was.
    pub async fn drain(&self, window: Duration) -> usize {
        let all_closed = async {
            loop {
                let closed = self.closed.notified();
                if self.open() == 0 {
                    return;
                }
                closed.await;
            }
        };
        let cut = match tokio::time::timeout(window, all_closed).await {
            Ok(()) => 0,
            Err(_) => self.open(),
        };
        if cut > 0 {
            tracing::warn!(cut, "drain window over: closing upgraded connections");
        }
        self.cut.send_replace(true);
        cut
    }
}

/// Counts one open tunnel for as long as it lives.
struct Open(Arc<Tunnels>);

impl Open {
    fn new(tunnels: Arc<Tunnels>) -> Self {
        tunnels.open.fetch_add(1, Ordering::AcqRel);
        Self(tunnels)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        self.0.closed.notify_waiters();
    }
}

/// The `Upgrade` value of a WebSocket handshake (`Connection: upgrade` plus
/// `Upgrade: websocket`), or `None` for every other request.
pub fn websocket_upgrade(headers: &HeaderMap) -> Option<HeaderValue> {
    let asks_upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    let upgrade = headers.get(header::UPGRADE)?;
    let websocket = upgrade
        .to_str()
        .ok()?
        .split(',')
        .any(|p| p.trim().eq_ignore_ascii_case("websocket"));
    (asks_upgrade && websocket).then(|| upgrade.clone())
}

/// Puts back the two headers that carry the handshake, after hop-by-hop stripping.
pub fn restore_upgrade_headers(headers: &mut HeaderMap, upgrade: HeaderValue) {
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, upgrade);
}

/// The client's side of an upgrade: hyper's for a connection hyper serves, the own HTTP/1.1
/// server's otherwise.
pub enum ClientUpgrade {
    Hyper(OnUpgrade),
    Own(crate::proxy::upgraded::OnUpgrade),
}

impl ClientUpgrade {
    /// Takes the upgrade of `req` from whichever server side received it.
    pub fn of<B>(req: &mut http::Request<B>) -> Self {
        match req
            .extensions_mut()
            .remove::<crate::proxy::upgraded::OnUpgrade>()
        {
            Some(own) => Self::Own(own),
            None => Self::Hyper(hyper::upgrade::on(req)),
        }
    }

    /// The client's stream once the switch has been answered.
    async fn upgraded(self) -> Result<BoxedIo, crate::proxy::body::BoxError> {
        Ok(match self {
            Self::Hyper(on) => Box::new(TokioIo::new(on.await?)),
            Self::Own(on) => Box::new(on.upgraded().await?),
        })
    }
}

/// Joins the client's and the backend's upgraded connections on a task of their own, counted
/// in `tunnels` until either side closes or shutdown cuts it.
pub fn tunnel(client: ClientUpgrade, upstream: OnUpgrade, tunnels: Arc<Tunnels>) {
    let mut cut = tunnels.cut.subscribe();
    let open = Open::new(tunnels);
    tokio::spawn(async move {
        let _open = open;
        let upstream = async { upstream.await.map_err(crate::proxy::body::BoxError::from) };
        let (mut client, upstream) = match tokio::try_join!(client.upgraded(), upstream) {
            Ok(both) => both,
            Err(error) => {
                tracing::debug!(%error, "upgrade failed");
                return;
            }
        };
        let mut upstream = TokioIo::new(upstream);
        tokio::select! {
            copied = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
                if let Err(error) = copied {
                    tracing::debug!(%error, "upgraded connection ended with an error");
                }
            }
            _ = cut.wait_for(|cut| *cut) => {}
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognizes_websocket_handshakes_only() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        h.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        assert_eq!(
            websocket_upgrade(&h).as_ref().map(|v| v.as_bytes()),
            Some(&b"WebSocket"[..])
        );
        h.insert(header::UPGRADE, HeaderValue::from_static("h2c"));
        assert!(websocket_upgrade(&h).is_none());
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
        assert!(websocket_upgrade(&h).is_none());
    }
}
