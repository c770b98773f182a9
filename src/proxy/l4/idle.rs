//! The byte relay of TCP and TLS streams, with their idle timeout: bytes are copied both ways
//! until either side closes, or until no byte has moved either way for the idle timeout; then
//! both sides are closed, so a silent client cannot hold a connection slot and a backend
//! connection forever. Activity is seen on reads (every byte written was read first).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{copy_bidirectional_with_sizes, AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// Bytes each direction of a stream copies per read: bulk transfers move in fewer, larger
/// reads and writes than with tokio's 8 KiB default (see docs/benchmarks.md, TCP).
const COPY_BUFFER: usize = 64 * 1024;

/// A relayed stream: how it ended and the bytes each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Relayed {
    pub ended: Ended,
    /// Bytes read from the client (and sent upstream, or being sent when it ended).
    pub from_client: u64,
    /// Bytes read from the upstream.
    pub to_client: u64,
}

/// How a relayed stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// One side closed (and the other was closed after it).
    Closed,
    /// Nothing moved either way for the idle timeout; both sides were closed.
    Idle,
}

/// Copies bytes between `client` and `upstream` until one side closes or, when `idle` is not
/// zero, until neither sends a byte for `idle`. Both are dropped (closed) on return.
pub(crate) async fn relay<A, B>(
    mut client: A,
    mut upstream: B,
    idle: Duration,
) -> io::Result<Relayed>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    if idle.is_zero() {
        let (from_client, to_client) =
            copy_bidirectional_with_sizes(&mut client, &mut upstream, COPY_BUFFER, COPY_BUFFER)
                .await?;
        return Ok(Relayed {
            ended: Ended::Closed,
            from_client,
            to_client,
        });
    }
    let epoch = Instant::now();
    let last = AtomicU64::new(0);
    let mut client = Activity::new(client, &last, epoch);
    let mut upstream = Activity::new(upstream, &last, epoch);
    let ended = {
        let copy =
            copy_bidirectional_with_sizes(&mut client, &mut upstream, COPY_BUFFER, COPY_BUFFER);
        tokio::pin!(copy);
        loop {
            let since = last.load(Ordering::Relaxed);
            let due = epoch + Duration::from_millis(since) + idle;
            tokio::select! {
                copied = &mut copy => {
                    copied?;
                    break Ended::Closed;
                }
                () = tokio::time::sleep_until(due) => {
                    if last.load(Ordering::Relaxed) == since {
                        break Ended::Idle;
                    }
                }
            }
        }
    };
    Ok(Relayed {
        ended,
        from_client: client.read,
        to_client: upstream.read,
    })
}

/// A stream that records when it last delivered bytes: milliseconds since `epoch` in `last`.
/// It counts the bytes read from it too.
struct Activity<'a, S> {
    inner: S,
    last: &'a AtomicU64,
    epoch: Instant,
    read: u64,
}

impl<'a, S> Activity<'a, S> {
    fn new(inner: S, last: &'a AtomicU64, epoch: Instant) -> Self {
        Self {
            inner,
            last,
            epoch,
            read: 0,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Activity<'_, S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.read += (buf.filled().len() - before) as u64;
            let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.last.store(now, Ordering::Relaxed);
        }
        polled
    }
}

write_through!(S, Activity<'_, S>);

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_silent_stream_ends_idle_with_both_sides_closed() {
        let (client, mut client_peer) = duplex(1024);
        let (upstream, mut upstream_peer) = duplex(1024);
        let relayed = tokio::spawn(relay(client, upstream, Duration::from_millis(50)));
        // Bytes go through before the silence.
        client_peer.write_all(b"x").await.unwrap();
        let mut b = [0u8; 1];
        upstream_peer.read_exact(&mut b).await.unwrap();
        upstream_peer.write_all(b"yz").await.unwrap();
        client_peer.read_exact(&mut [0u8; 2]).await.unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(10), relayed).await;
        let relayed = ended.unwrap().unwrap().unwrap();
        assert_eq!(relayed.ended, Ended::Idle);
        assert_eq!((relayed.from_client, relayed.to_client), (1, 2));
        assert_eq!(client_peer.read(&mut b).await.unwrap(), 0);
        assert_eq!(upstream_peer.read(&mut b).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_zero_timeout_relays_until_a_side_closes() {
        let (client, mut client_peer) = duplex(1024);
        let (upstream, upstream_peer) = duplex(1024);
        let relayed = tokio::spawn(relay(client, upstream, Duration::ZERO));
        drop(upstream_peer);
        client_peer.shutdown().await.unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(10), relayed).await;
        assert_eq!(ended.unwrap().unwrap().unwrap().ended, Ended::Closed);
    }
}
