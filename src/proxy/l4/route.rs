//! What an L4 connection or datagram is refused for ([`L4Error`]), the `ipAccess` checks at
//! accept, and the endpoint a route sends it to.

use std::net::{IpAddr, SocketAddr};

use crate::proxy::policy::ip_allowed;
use crate::proxy::upstream::balance::Backends;
use crate::table::{BackendTarget, IpAccess, L4Route, L4Routes, ListenerTable};

/// Why an L4 connection or datagram did not reach a backend (or ended with an error).
#[derive(Debug, thiserror::Error)]
pub(crate) enum L4Error {
    #[error("no route on this socket")]
    NoRoute,
    #[error("client address {0} refused by the TrafficPolicy ipAccess lists")]
    IpDenied(IpAddr),
    #[error("no route for SNI {0:?}")]
    UnknownSni(Option<String>),
    #[error("not a TLS ClientHello: {0}")]
    NotTls(&'static str),
    #[error("the route's backends cannot be used: {0}")]
    InvalidBackend(String),
    #[error("backend {0} has no ready endpoints")]
    NoEndpoints(String),
    #[error("cannot connect to {0}: {1}")]
    Connect(SocketAddr, std::io::Error),
    #[error("the UDP socket has its limit of sessions open")]
    SessionLimit,
    #[error("the client address has its limit of UDP sessions open")]
    SourceLimit,
    #[error("no ClientHello within the handshake timeout")]
    HandshakeTimeout,
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    #[error(transparent)]
    Io(std::io::Error),
}

impl L4Error {
    /// The `reason` label of `l4_dropped_total`, for errors that kept traffic from a backend.
    pub(crate) fn dropped(&self) -> Option<&'static str> {
        Some(match self {
            Self::NoRoute => "no_route",
            Self::IpDenied(_) => "ip_denied",
            Self::UnknownSni(_) => "unknown_sni",
            Self::NotTls(_) => "not_tls",
            Self::InvalidBackend(_) => "invalid_backend",
            Self::NoEndpoints(_) => "no_endpoints",
            Self::Connect(..) => "connect_error",
            Self::SessionLimit => "session_limit",
            Self::SourceLimit => "source_limit",
            Self::HandshakeTimeout | Self::Tls(_) => "handshake",
            Self::Io(_) => return None,
        })
    }
}

/// True when `access` (a listener's TrafficPolicy `ipAccess` lists) refuses `peer`.
pub(crate) fn refuses(access: Option<&IpAccess>, peer: IpAddr) -> bool {
    access.is_some_and(|a| !ip_allowed(a, peer))
}

/// True when the `ipAccess` lists of the socket refuse `peer` before anything is read: on a TCP
/// or UDP socket when any list of its listeners refuses it; on a TLS socket when every listener
/// does (each listener's own lists are checked again once the ClientHello named it).
pub(crate) fn refused_at_accept(listener: &ListenerTable, peer: IpAddr) -> bool {
    match &listener.l4 {
        Some(L4Routes::Tls(routes)) => {
            !routes.listeners.is_empty()
                && routes
                    .listeners
                    .iter()
                    .all(|l| refuses(l.ip_access.as_deref(), peer))
        }
        _ => listener.ip_access.iter().any(|a| refuses(Some(a), peer)),
    }
}

/// A backend of the route by weight, then one of its endpoints ([`Backends::spare_endpoint`]:
/// ready, not ejected, not one of `exclude` while another is left; terminating ones only while
/// none is ready).
pub(crate) fn pick_endpoint(
    route: &L4Route,
    backends: &Backends,
    exclude: &[SocketAddr],
) -> Result<SocketAddr, L4Error> {
    let backend = route
        .backends
        .pick(fastrand::u64(..))
        .ok_or_else(|| L4Error::InvalidBackend(format!("route {} has no backend", route.route)))?;
    match &backend.target {
        BackendTarget::Service(s) => backends
            .spare_endpoint(s, exclude)
            .map_err(|_| L4Error::NoEndpoints(s.service.to_string())),
        BackendTarget::Invalid { reason } => Err(L4Error::InvalidBackend(reason.clone())),
    }
}
