//! What an HTTP/1.1 client connection's loop (`inbound::h1`) and its request's body share: the
//! stream and its read buffer (`wire`), and the body's decoder (`framing`, which reads response
//! bodies from backends too, with a response's rules: `upstream::h1`). Apart from the
//! loop so that the request body type (`body::RequestBody`) can name it without importing the
//! server that hands requests to the handler.

mod framing;
mod wire;

#[cfg(test)]
pub(crate) use framing::MAX_CHUNK_LINE;
pub(crate) use framing::{BodyError, Chunk, Framing, Limits, Step};
pub(crate) use wire::{lock, RecvBody, Wire, WireIo, CONTINUE};
