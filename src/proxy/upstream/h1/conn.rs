//! One pooled HTTP/1.1 connection to a backend ([`Connection`]) and one exchange on it
//! ([`Exchange`]): the request written by `encode`, the response read by `decode`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{HeaderMap, Method, StatusCode, Version};
use tokio::io::{AsyncRead, ReadBuf};

use super::decode::{BodyDecoder, Framing, Step};
use super::encode::Writer;
use super::{decode, encode};
use crate::proxy::body::UpstreamBody;
pub(crate) use crate::proxy::error::H1Error;
use crate::proxy::upstream::balance::ConnGuard;
use crate::proxy::upstream::tls::UpstreamIo;

/// Room kept free in a connection's read buffer before each read.
const READ_AT_LEAST: usize = 4 * 1024;

/// Size the read buffer grows by when it has too little room.
const READ_BUFFER: usize = 16 * 1024;

/// An open connection to a backend, idle between exchanges.
pub struct Connection {
    io: UpstreamIo,
    /// Bytes read and not yet used; header values of the last response may still share it.
    read: BytesMut,
    /// The buffer request heads are written into, kept between exchanges.
    write: BytesMut,
    /// Counts the connection on its endpoint (circuit breaking) while it lives.
    _counted: ConnGuard,
}

impl Connection {
    /// A connection over `io`, counted by `counted`.
    pub fn new(io: UpstreamIo, counted: ConnGuard) -> Self {
        Self {
            io,
            read: BytesMut::new(),
            write: BytesMut::new(),
            _counted: counted,
        }
    }

    /// True when the idle connection is still open and the backend has sent nothing since the
    /// last response (anything it sent would be out of turn).
    pub fn is_open(&mut self) -> bool {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut byte = [0u8; 1];
        let mut buf = ReadBuf::new(&mut byte);
        matches!(
            Pin::new(&mut self.io).poll_read(&mut cx, &mut buf),
            Poll::Pending
        )
    }

    /// Reads more bytes into the read buffer: the count, 0 at end of stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.read.capacity() - self.read.len() < READ_AT_LEAST {
            self.read.reserve(READ_BUFFER);
        }
        tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.read)
    }
}

/// A response head from the backend.
pub struct Head {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
}

/// One request and its response on a connection.
pub struct Exchange {
    conn: Connection,
    /// The request, while some of it is still to be written.
    writer: Option<Writer>,
    method: Method,
    body: BodyDecoder,
    /// The backend keeps the connection after this response.
    keep_alive: bool,
    /// The backend closed its side.
    eof: bool,
    /// How many bytes the read buffer held when a head was last found incomplete: it is
    /// parsed again only once more have arrived.
    tried: usize,
    /// Writing failed after the head was sent: kept to explain a response that never came.
    write_error: Option<H1Error>,
}

impl Exchange {
    /// Starts sending a request, its `parts` (origin-form target, `Host` naming the site) and
    /// `body`, on `conn`. The parts are only read: the caller keeps them, so that a body-less
    /// request whose exchange fails can be given back whole.
    pub fn start(mut conn: Connection, parts: &Parts, body: UpstreamBody) -> Self {
        let mut head = std::mem::take(&mut conn.write);
        let chunked = encode::head(parts, &body, &mut head);
        let idle = parts.extensions.get::<encode::SendIdle>().map(|s| s.0);
        Self {
            conn,
            writer: Some(Writer::new(head, body, chunked, idle)),
            method: parts.method.clone(),
            body: BodyDecoder::new(Framing::Done),
            keep_alive: false,
            eof: false,
            tried: 0,
            write_error: None,
        }
    }

    /// Writes what it can of the request. A write failure ends writing (and the connection's
    /// reuse) but not the exchange: the backend may have answered before it stopped reading.
    /// Only a failure of the client's body and the send idle limit are returned.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Result<(), H1Error> {
        let Some(writer) = &mut self.writer else {
            return Ok(());
        };
        match writer.poll_write(&mut self.conn.io, cx) {
            Poll::Pending => Ok(()),
            Poll::Ready(Ok(())) => {
                if let Some(writer) = self.writer.take() {
                    self.conn.write = writer.into_buffer();
                }
                Ok(())
            }
            Poll::Ready(Err(e)) => {
                self.writer = None;
                self.keep_alive = false;
                match e {
                    // A backend that stopped reading will not answer either.
                    H1Error::RequestBody(_) | H1Error::SendIdle(_) => Err(e),
                    e => {
                        self.write_error = Some(e);
                        Ok(())
                    }
                }
            }
        }
    }

    /// Writes the request and reads until the final response head (informational responses
    /// are skipped).
    pub fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<Result<Head, H1Error>> {
        self.poll_write(cx)?;
        loop {
            let buffered = self.conn.read.len();
            if buffered > 0 && buffered != self.tried {
                let Some(head) = decode::parse_head(&mut self.conn.read, &self.method)? else {
                    self.tried = buffered;
                    continue;
                };
                self.tried = 0;
                if head.status.is_informational() {
                    continue;
                }
                self.body = BodyDecoder::new(head.framing);
                self.keep_alive = head.keep_alive && self.write_error.is_none();
                return Poll::Ready(Ok(Head {
                    status: head.status,
                    version: head.version,
                    headers: head.headers,
                }));
            }
            match self.conn.poll_fill(cx) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(self
                        .write_error
                        .take()
                        .unwrap_or(H1Error::ClosedBeforeHead)))
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(H1Error::Io(e))),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// The next piece of the response body, writing the rest of the request meanwhile.
    pub fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, H1Error>>> {
        if let Err(e) = self.poll_write(cx) {
            return Poll::Ready(Some(Err(e)));
        }
        loop {
            match self.body.step(&mut self.conn.read, self.eof) {
                Ok(Step::Data(data)) => return Poll::Ready(Some(Ok(data))),
                Ok(Step::End) => return Poll::Ready(None),
                Err(e) => return Poll::Ready(Some(Err(e))),
                Ok(Step::Read) => match self.conn.poll_fill(cx) {
                    Poll::Ready(Ok(0)) => self.eof = true,
                    Poll::Ready(Ok(_)) => {}
                    Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(H1Error::Io(e)))),
                    Poll::Pending => return Poll::Pending,
                },
            }
        }
    }

    /// True once the whole response body has been read.
    pub fn is_end_stream(&self) -> bool {
        self.body.framing == Framing::Done
    }

    /// Response body bytes still to come, when known.
    pub fn remaining(&self) -> Option<u64> {
        self.body.framing.remaining()
    }

    /// The connection, if it can take another request: the request was written whole, the
    /// response read whole, the backend keeps the connection and sent nothing more.
    pub fn finish(self) -> Option<Connection> {
        let done = self.writer.is_none() && self.body.framing == Framing::Done;
        (done && self.keep_alive && !self.eof && self.conn.read.is_empty()).then_some(self.conn)
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
