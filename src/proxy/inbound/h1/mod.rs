//! The server side of HTTP/1.1: this proxy's own codec and keep-alive loop for client
//! connections that protocol detection found to speak HTTP/1.1 (plain and TLS); HTTP/2 stays on
//! hyper. A request head is parsed once, straight into the `http` types, from a read buffer the
//! connection keeps across requests; its body is read by the body's own polls; the response head
//! and the body bytes that are ready go out in one write.
//!
//! `decode` reads request heads, `encode` writes response heads, `conn` is the loop; what the
//! loop and the request body share (the stream, the body's decoder) is `h1wire`.

mod conn;
pub(crate) mod decode;
mod encode;

pub(crate) use conn::serve;
