//! The HTTP/1.1 client codec for pooled upstream connections. An exchange runs entirely in the
//! task of the request that makes it: the request head is written from the request's parts in
//! one write, the response head is parsed once, straight into the `http` types, and the body is
//! read by the response body's own polls. No connection task, no channel between the request
//! and its connection, no second copy of the head. The request body keeps being written while
//! the response is read, as a backend may answer before it has read everything.
//! Upgrades (WebSocket) do not come here: they need the connection after the response.
//!
//! `conn` holds a connection and runs an exchange, `encode` writes requests, `decode` reads
//! responses.

mod conn;
mod decode;
mod encode;

pub use conn::*;
pub(crate) use encode::{SendIdle, Writer};
