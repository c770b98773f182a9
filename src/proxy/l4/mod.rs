//! The L4 data plane: TLS (passthrough and terminate, routed by SNI) and TCP streams served on
//! the sockets of the listener manager (`tcp`), UDP receive loops and per-client sessions
//! (`udp`, with each session's access log line in `udp_log`), the ClientHello reader (`sni`),
//! the byte relay of streams with its idle timeout (`idle`), the byte counter of streams
//! (`counted`), and refusals, access checks and the endpoint choice (`route`).

mod counted;
pub(crate) mod idle;
mod route;
pub(crate) mod sni;
pub(crate) mod tcp;
pub(crate) mod udp;
mod udp_log;

pub(crate) use route::*;
pub use sni::{parse as parse_client_hello, Hello};
