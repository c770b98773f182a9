//! The client side of the HTTP data plane: a TCP socket's accept loop and drain (`listener`,
//! started by the listener manager in `sockets`) and one accepted connection from handshake to
//! close (`conn`), the own HTTP/1.1 server those connections speak (`h1`), and the executor that
//! runs HTTP/2 streams inside their connection's task (`streams`).

pub(crate) mod conn;
pub(crate) mod h1;
pub(crate) mod listener;
pub(crate) mod streams;
