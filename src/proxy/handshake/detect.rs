//! What a connection speaks, read before hyper sees it: HTTP/1.x, or HTTP/2 once the whole client
//! preface and its SETTINGS frame have arrived. The bytes read are replayed to hyper by
//! [`Prefixed`]. The caller bounds the read with the handshake timeout, so a client that sends
//! part of the preface (or nothing) and stops is closed instead of holding its socket.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

/// The HTTP/2 client connection preface (RFC 9113, section 3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Frame type of SETTINGS, the frame that must follow the preface.
const SETTINGS: u8 = 0x4;
/// Largest SETTINGS payload waited for (6 bytes per setting); a longer one is left to hyper.
const MAX_SETTINGS: usize = 6 * 64;

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Http1,
    Http2,
}

/// Reads until the protocol is known. `None`: the peer closed first. The bytes read stay in
/// `buf` for [`Prefixed`].
pub(crate) async fn detect<I: AsyncRead + Unpin>(
    io: &mut I,
    buf: &mut Vec<u8>,
) -> io::Result<Option<Protocol>> {
    loop {
        if let Some(p) = decide(buf) {
            return Ok(Some(p));
        }
        let mut chunk = [0u8; 1024];
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The protocol `buf` shows, if it shows one yet.
fn decide(buf: &[u8]) -> Option<Protocol> {
    let common = buf.len().min(PREFACE.len());
    if buf[..common] != PREFACE[..common] {
        return Some(Protocol::Http1);
    }
    let frame = buf.get(PREFACE.len()..)?;
    if frame.len() < 9 {
        return None;
    }
    let len = u32::from_be_bytes([0, frame[0], frame[1], frame[2]]) as usize;
    // A first frame that is not SETTINGS is a protocol error that hyper reports with GOAWAY.
    if frame[3] != SETTINGS || len > MAX_SETTINGS || frame.len() >= 9 + len {
        return Some(Protocol::Http2);
    }
    None
}

/// An I/O stream whose first reads return bytes already read from it.
pub(crate) struct Prefixed<I> {
    prefix: Vec<u8>,
    pos: usize,
    inner: I,
}

impl<I> Prefixed<I> {
    pub(crate) fn new(prefix: Vec<u8>, inner: I) -> Self {
        Self {
            prefix,
            pos: 0,
            inner,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Prefixed<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.pos < this.prefix.len() {
            let rest = &this.prefix[this.pos..];
            let n = rest.len().min(out.remaining());
            out.put_slice(&rest[..n]);
            this.pos += n;
            if this.pos == this.prefix.len() {
                this.prefix = Vec::new();
                this.pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, out)
    }
}

write_through!(I, Prefixed<I>);

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(payload: usize) -> Vec<u8> {
        let mut v = PREFACE.to_vec();
        v.extend_from_slice(&[0, 0, payload as u8, SETTINGS, 0, 0, 0, 0, 0]);
        v.extend(std::iter::repeat_n(0u8, payload));
        v
    }

    #[test]
    fn decides_only_when_the_bytes_tell() {
        assert_eq!(decide(b"G"), Some(Protocol::Http1));
        assert_eq!(decide(b"GET / HTTP/1.1"), Some(Protocol::Http1));
        assert_eq!(decide(b"PRI"), None);
        assert_eq!(decide(b"PRX"), Some(Protocol::Http1));
        assert_eq!(decide(PREFACE), None);
        let full = settings(12);
        assert_eq!(decide(&full[..full.len() - 1]), None);
        assert_eq!(decide(&full), Some(Protocol::Http2));
        assert_eq!(decide(&settings(0)), Some(Protocol::Http2));
        let mut ping = PREFACE.to_vec();
        ping.extend_from_slice(&[0, 0, 8, 0x6, 0, 0, 0, 0, 0]);
        assert_eq!(decide(&ping), Some(Protocol::Http2));
    }

    #[tokio::test]
    async fn prefixed_replays_then_reads_on() {
        let (mut a, b) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut a, b" world")
            .await
            .unwrap();
        drop(a);
        let mut p = Prefixed::new(b"hello".to_vec(), b);
        let mut s = String::new();
        p.read_to_string(&mut s).await.unwrap();
        assert_eq!(s, "hello world");
    }
}
