//! The client side of the HTTP data plane: a TCP socket's accept loop and drain (`listener`,
//! started by the listener manager in `sockets`) and one accepted connection from handshake to
//! close (`conn`).

pub(crate) mod conn;
pub(crate) mod listener;
