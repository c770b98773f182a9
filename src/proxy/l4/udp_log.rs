//! The access log line of one UDP session: opened with the session, written when the session
//! ends, whether it went idle or its socket closed (the line is written on drop), with the
//! bytes each way.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::proxy::access_log::{AccessLogger, Entry, LogSpec};
use crate::proxy::decision;
use crate::table::{ListenerTable, RouteRef};

/// A session's line while the session lasts.
pub(crate) struct SessionLog {
    /// Taken when the line is written.
    entry: Option<Box<Entry>>,
    logger: AccessLogger,
    /// Bytes the client sent, counted by the socket's receive loop.
    from_client: Arc<AtomicU64>,
}

impl SessionLog {
    /// The line of `peer`'s session to `upstream` over `route`, when `spec` writes lines.
    pub(crate) fn open(
        spec: LogSpec,
        logger: &AccessLogger,
        socket: Arc<ListenerTable>,
        peer: SocketAddr,
        route: &Arc<RouteRef>,
        upstream: SocketAddr,
        from_client: Arc<AtomicU64>,
    ) -> Option<Self> {
        if spec.is_off() {
            return None;
        }
        let mut entry = Box::new(Entry::l4(spec, "udp", peer.ip(), std::time::Instant::now()));
        entry.route = Some(route.clone());
        entry.upstream = Some(upstream);
        entry.listener = Some((socket, None));
        entry.decision = Some(decision::PROXIED);
        Some(Self {
            entry: Some(entry),
            logger: logger.clone(),
            from_client,
        })
    }

    /// Counts `n` bytes sent to the client.
    pub(crate) fn replied(&mut self, n: usize) {
        if let Some(entry) = self.entry.as_mut() {
            entry.response_bytes += n as u64;
        }
    }
}

impl Drop for SessionLog {
    fn drop(&mut self) {
        if let Some(mut entry) = self.entry.take() {
            entry.request_bytes = self.from_client.load(Ordering::Relaxed);
            entry.finish(&self.logger);
        }
    }
}
