//! The executor of the HTTP/2 server: each stream hyper starts runs inside its connection's
//! task, in a set of futures the connection polls, rather than as a task of its own. A stream
//! then costs no task spawn, no scheduling of its own on each wake and no task release.

use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::future::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};

/// A stream (or an HTTP/2 CONNECT tunnel) handed over by hyper.
type Handed = Pin<Box<dyn Future<Output = ()> + Send>>;

thread_local! {
    /// The futures hyper hands over while a connection is being polled on this thread; `None`
    /// outside such a poll.
    static HANDED: RefCell<Option<Vec<Handed>>> = const { RefCell::new(None) };
}

/// hyper's executor for the HTTP/2 server: inside a [`WithStreams`] poll it gives the stream to
/// that connection; anywhere else (not expected) it spawns a task, as hyper's default does.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct InConnection;

impl<F: Future<Output = ()> + Send + 'static> hyper::rt::Executor<F> for InConnection {
    fn execute(&self, fut: F) {
        let mut fut = Some(fut);
        HANDED.with(|handed| {
            if let Some(list) = handed.borrow_mut().as_mut() {
                if let Some(fut) = fut.take() {
                    // A stream that panics ends alone, as a task of its own would: the
                    // connection and its other streams go on.
                    list.push(Box::pin(AssertUnwindSafe(fut).catch_unwind().map(|_| ())));
                }
            }
        });
        if let Some(fut) = fut {
            tokio::spawn(fut);
        }
    }
}

/// Puts `list` in place to collect what hyper hands over until dropped, then takes it back.
struct Collecting<'a> {
    list: &'a mut Vec<Handed>,
}

impl<'a> Collecting<'a> {
    fn start(list: &'a mut Vec<Handed>) -> Self {
        let empty = std::mem::take(list);
        HANDED.with(|handed| *handed.borrow_mut() = Some(empty));
        Self { list }
    }
}

impl Drop for Collecting<'_> {
    fn drop(&mut self) {
        if let Some(list) = HANDED.with(|handed| handed.borrow_mut().take()) {
            *self.list = list;
        }
    }
}

/// A connection of hyper's HTTP/2 server (built with [`InConnection`]) with the streams it
/// started: one future that polls the connection (reading frames, starting streams, writing
/// what the streams answered), then the streams that were started or woken.
/// It ends when the connection does; `h2` keeps a connection open while a stream of it can
/// still answer, so only streams of a connection that failed are dropped with it.
pub(crate) struct WithStreams<C> {
    conn: Pin<Box<C>>,
    streams: FuturesUnordered<Handed>,
    handed: Vec<Handed>,
}

impl<C: Future> WithStreams<C> {
    pub(crate) fn new(conn: C) -> Self {
        Self {
            conn: Box::pin(conn),
            streams: FuturesUnordered::new(),
            handed: Vec::new(),
        }
    }

    /// The connection, e.g. to ask it to shut down gracefully.
    pub(crate) fn conn(&mut self) -> Pin<&mut C> {
        self.conn.as_mut()
    }

    /// Polls the connection, collecting the streams it starts.
    fn poll_conn(&mut self, cx: &mut Context<'_>) -> Poll<C::Output> {
        let polled = {
            let _collecting = Collecting::start(&mut self.handed);
            self.conn.as_mut().poll(cx)
        };
        self.streams.extend(self.handed.drain(..));
        polled
    }

    /// Polls the streams that were woken or started until none is ready.
    fn poll_streams(&mut self, cx: &mut Context<'_>) {
        // Bounded: `FuturesUnordered` answers `Pending` (waking itself) after one pass over
        // its futures, each `Ready(Some)` is a stream that has ended, and a stream hands over
        // at most one future (its CONNECT tunnel), polled in the next pass.
        loop {
            let next = {
                let _collecting = Collecting::start(&mut self.handed);
                self.streams.poll_next_unpin(cx)
            };
            let handed = !self.handed.is_empty();
            self.streams.extend(self.handed.drain(..));
            if !handed && !matches!(next, Poll::Ready(Some(()))) {
                return;
            }
        }
    }
}

impl<C: Future> Future for WithStreams<C> {
    type Output = C::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let this = self.get_mut();
        if let Poll::Ready(ended) = this.poll_conn(cx) {
            return Poll::Ready(ended);
        }
        // What the streams answer wakes the connection (`h2` does so whenever it has frames to
        // write), and the next turn writes it.
        this.poll_streams(cx);
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use hyper::rt::Executor;

    use super::*;

    /// A stand-in for hyper's connection: hands over `n` streams at its first poll, each of
    /// which waits for one wake-up before it ends, and ends itself once they all have.
    struct Conn {
        started: bool,
        n: usize,
        ended: Arc<AtomicUsize>,
        /// The most tasks alive that a stream has seen.
        most_tasks: Arc<AtomicUsize>,
    }

    impl Future for Conn {
        type Output = usize;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            if !self.started {
                self.started = true;
                for _ in 0..self.n {
                    let (ended, most_tasks) = (self.ended.clone(), self.most_tasks.clone());
                    InConnection.execute(async move {
                        tokio::task::yield_now().await;
                        let alive = tokio::runtime::Handle::current()
                            .metrics()
                            .num_alive_tasks();
                        most_tasks.fetch_max(alive, Ordering::SeqCst);
                        ended.fetch_add(1, Ordering::SeqCst);
                    });
                }
            }
            let ended = self.ended.load(Ordering::SeqCst);
            if ended == self.n {
                return Poll::Ready(ended);
            }
            // Re-polled when a stream makes progress, as `h2` wakes its connection.
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn streams_run_in_the_connections_task_not_as_tasks_of_their_own() {
        let (ended, most_tasks) = (Arc::new(AtomicUsize::new(0)), Arc::default());
        let conn = Conn {
            started: false,
            n: 100,
            ended: ended.clone(),
            most_tasks: Arc::clone(&most_tasks),
        };
        let ended_streams = tokio::spawn(WithStreams::new(conn)).await.unwrap();
        assert_eq!(ended_streams, 100);
        assert_eq!(ended.load(Ordering::SeqCst), 100);
        assert_eq!(
            most_tasks.load(Ordering::SeqCst),
            1,
            "only the connection's own task"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn outside_a_connection_a_stream_gets_a_task() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        InConnection.execute(async move {
            let _ = tx.send(());
        });
        assert_eq!(
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
            1
        );
        rx.await.unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_stream_that_panics_ends_alone() {
        let ended = Arc::new(AtomicUsize::new(0));
        let mut started = false;
        let seen = ended.clone();
        let conn = std::future::poll_fn(move |cx| {
            if !started {
                started = true;
                InConnection.execute(async { panic!("a handler's bug") });
                let ended = seen.clone();
                InConnection.execute(async move {
                    tokio::task::yield_now().await;
                    ended.fetch_add(1, Ordering::SeqCst);
                });
            }
            if seen.load(Ordering::SeqCst) == 1 {
                return Poll::Ready("open until its other stream ended");
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        });
        let outcome = tokio::spawn(WithStreams::new(conn)).await;
        assert_eq!(outcome.ok(), Some("open until its other stream ended"));
        assert_eq!(ended.load(Ordering::SeqCst), 1);
    }
}
