//! A stream that adds the bytes read from it to a counter as they come: wrapped around a
//! client (bytes received) and its upstream (bytes sent to the client), it counts a stream's
//! traffic while it lasts, not only when it ends.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use prometheus::IntCounter;
use tokio::io::{AsyncRead, ReadBuf};

/// `inner`, with every byte read from it added to `read` (when set).
pub(crate) struct Counted<S> {
    inner: S,
    read: Option<IntCounter>,
}

impl<S> Counted<S> {
    pub(crate) fn new(inner: S, read: Option<IntCounter>) -> Self {
        Self { inner, read }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some(read)) = (&polled, &self.read) {
            read.inc_by((buf.filled().len() - before) as u64);
        }
        polled
    }
}

write_through!(S, Counted<S>);

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn bytes_read_are_counted_and_writes_pass_through() {
        let (a, mut b) = duplex(64);
        let counter = IntCounter::new("t", "t").unwrap();
        let mut counted = Counted::new(a, Some(counter.clone()));
        b.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        counted.read_exact(&mut buf).await.unwrap();
        counted.write_all(b"back").await.unwrap();
        let mut got = [0u8; 4];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!((&buf, &got, counter.get()), (b"hello", b"back", 5));
    }
}
