//! The set of bound sockets kept in step with the table, for TCP and UDP alike: bind the new,
//! keep the existing, close the removed, retry the failed, report what is bound (`manager`).
//! The transports plug in how one socket is bound and served (`inbound::listener` for TCP,
//! `l4::udp` for UDP).

mod manager;

pub(crate) use manager::{Bind, Running, SocketKey, Sockets, Transport};
pub use manager::{BIND_RETRY_FIRST, BIND_RETRY_MAX};
