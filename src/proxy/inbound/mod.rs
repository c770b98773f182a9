//! The client side of the data plane: the listener manager (bind, accept, drain: `listener`)
//! and one accepted connection from handshake to close (`conn`).

pub(crate) mod conn;
pub(crate) mod listener;
