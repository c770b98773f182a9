//! HTTP/1.1 upgrades (WebSocket): the `Upgrade` and `Connection` headers survive hop-by-hop
//! stripping for a WebSocket handshake, and after the backend's `101 Switching Protocols` the two
//! upgraded connections are joined and bytes are copied both ways until either side closes.

use http::header::{self, HeaderMap, HeaderValue};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

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

/// Joins the client's and the backend's upgraded connections on a task of their own.
pub fn tunnel(client: OnUpgrade, upstream: OnUpgrade) {
    tokio::spawn(async move {
        let (client, upstream) = match tokio::try_join!(client, upstream) {
            Ok(both) => both,
            Err(error) => {
                tracing::debug!(%error, "upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut upstream = TokioIo::new(upstream);
        if let Err(error) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            tracing::debug!(%error, "upgraded connection ended with an error");
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
