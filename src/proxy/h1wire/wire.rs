//! What an HTTP/1.1 connection's loop and its request's body share: the client's stream and the
//! bytes read from it (one buffer for the connection, reused across requests), and where the
//! current request's body stands. The body reads from the stream itself, in the task that polls
//! it, while the loop writes the response; each holds the lock only for one read or write.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::io::AsyncWrite;

use super::framing::{BodyError, Framing, Limits, Step};
use crate::proxy::handshake::detect::Prefixed;
use crate::proxy::upgraded::BoxedIo;

/// The interim answer to `Expect: 100-continue`.
pub(crate) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Room kept free in the read buffer before each read of a head.
const READ_AT_LEAST: usize = 4 * 1024;

/// Size the read buffer grows by when it has too little room for a head.
const READ_BUFFER: usize = 8 * 1024;

/// Room made for each read of a body: larger reads, fewer and larger frames.
const BODY_READ: usize = 64 * 1024;

/// The connection's stream and read state.
pub(crate) struct Wire {
    /// `None` once handed over to a tunnel.
    io: Option<BoxedIo>,
    /// Bytes read and not yet used.
    pub read: BytesMut,
    /// The client closed its side.
    pub eof: bool,
    /// The number of the request whose body may read now.
    pub current: u64,
    pub framing: Framing,
    pub limits: Limits,
    /// Bytes of the `100 Continue` still to write before the body is read (0: none due).
    pub continue_left: usize,
    /// The request body failed: what remains on the stream cannot be trusted.
    pub broken: bool,
}

impl Wire {
    pub fn new(io: BoxedIo) -> Arc<Mutex<Self>> {
        Arc::new(Mutex::new(Self {
            io: Some(io),
            read: BytesMut::new(),
            eof: false,
            current: 0,
            framing: Framing::Done,
            limits: Limits::default(),
            continue_left: 0,
            broken: false,
        }))
    }

    /// Reads more bytes into the read buffer: the count, 0 at end of stream. A body gets
    /// larger reads than a head.
    pub fn poll_fill(&mut self, cx: &mut Context<'_>, body: bool) -> Poll<io::Result<usize>> {
        let Some(io) = self.io.as_mut() else {
            return Poll::Ready(Ok(0));
        };
        let (least, grow) = match body {
            true => (BODY_READ / 2, BODY_READ),
            false => (READ_AT_LEAST, READ_BUFFER),
        };
        if self.read.capacity() - self.read.len() < least {
            self.read.reserve(grow);
        }
        tokio_util::io::poll_read_buf(Pin::new(io), cx, &mut self.read)
    }

    /// Writes the rest of the `100 Continue` that is due.
    fn poll_continue(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.continue_left > 0 {
            let Some(io) = self.io.as_mut() else {
                return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
            };
            let from = CONTINUE.len() - self.continue_left;
            match Pin::new(&mut *io).poll_write(cx, &CONTINUE[from..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.continue_left -= n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
            if self.continue_left == 0 {
                return Pin::new(io).poll_flush(cx);
            }
        }
        Poll::Ready(Ok(()))
    }

    /// The stream with the bytes read ahead of it, for a tunnel.
    pub fn take(&mut self) -> Option<Prefixed<BoxedIo>> {
        let io = self.io.take()?;
        Some(Prefixed::new(self.read.split().to_vec(), io))
    }
}

/// Locks the wire; a panic elsewhere while it was held leaves the state usable.
pub(crate) fn lock(wire: &Mutex<Wire>) -> MutexGuard<'_, Wire> {
    wire.lock().unwrap_or_else(|p| p.into_inner())
}

/// The wire's stream as a writer that holds the lock for each call only.
pub(crate) struct WireIo<'a>(pub &'a Mutex<Wire>);

impl AsyncWrite for WireIo<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match lock(self.0).io.as_mut() {
            Some(io) => Pin::new(io).poll_write(cx, buf),
            None => Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match lock(self.0).io.as_mut() {
            Some(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            None => Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match lock(self.0).io.as_mut() {
            Some(io) => Pin::new(io).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match lock(self.0).io.as_mut() {
            Some(io) => Pin::new(io).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

/// The body of a request read from an HTTP/1.1 connection, by its length or its chunks. It
/// answers `Expect: 100-continue` when first polled; once the connection has moved on to a
/// later request it fails instead of reading that request's bytes.
pub struct RecvBody {
    wire: Arc<Mutex<Wire>>,
    id: u64,
    done: bool,
}

impl RecvBody {
    pub(crate) fn new(wire: Arc<Mutex<Wire>>, id: u64) -> Self {
        Self {
            wire,
            id,
            done: false,
        }
    }
}

impl Body for RecvBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let this = &mut *self;
        let mut guard = lock(&this.wire);
        let wire = &mut *guard;
        if wire.current != this.id {
            this.done = true;
            return Poll::Ready(Some(Err(BodyError::Incomplete)));
        }
        match wire.poll_continue(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => {
                wire.broken = true;
                this.done = true;
                return Poll::Ready(Some(Err(BodyError::Io(e))));
            }
            Poll::Pending => return Poll::Pending,
        }
        loop {
            match wire
                .framing
                .step(&mut wire.read, wire.eof, &mut wire.limits)
            {
                Ok(Step::Frame(frame)) => return Poll::Ready(Some(Ok(frame))),
                Ok(Step::End) => {
                    this.done = true;
                    return Poll::Ready(None);
                }
                Ok(Step::Read) => match wire.poll_fill(cx, true) {
                    Poll::Ready(Ok(0)) => wire.eof = true,
                    Poll::Ready(Ok(_)) => {}
                    Poll::Ready(Err(e)) => {
                        wire.broken = true;
                        this.done = true;
                        return Poll::Ready(Some(Err(BodyError::Io(e))));
                    }
                    Poll::Pending => return Poll::Pending,
                },
                Err(e) => {
                    wire.broken = true;
                    this.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        if self.done {
            return true;
        }
        let wire = lock(&self.wire);
        wire.current == self.id && wire.framing == Framing::Done
    }

    fn size_hint(&self) -> SizeHint {
        let wire = lock(&self.wire);
        match wire.framing.remaining() {
            Some(n) if wire.current == self.id && !self.done => SizeHint::with_exact(n),
            Some(_) => SizeHint::with_exact(0),
            None => SizeHint::default(),
        }
    }
}
