//! The keep-alive loop of one HTTP/1.1 client connection: read a head (within the header read
//! timeout, counted from the moment the connection waits for it), hand the request to the
//! handler, write its response (head and the body that is ready in one write), then either the
//! next request (pipelined ones are already in the buffer) or the close. A refused head gets its
//! status and `Connection: close`; after a `101` answer the stream goes to the tunnel.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use http::{Method, StatusCode};
use tokio::io::AsyncWriteExt;
use tokio::sync::{oneshot, watch};
use tokio::time::{Instant, Sleep};

use super::decode::{self, Framing, Head, HeadError, Step};
use super::encode::{self, Asked, BodyOut};
use crate::proxy::body::RequestBody;
use crate::proxy::h1wire::{lock, RecvBody, Wire, WireIo, CONTINUE};
use crate::proxy::routing::service::Handler;
use crate::proxy::upgraded::{BoxedIo, OnUpgrade};
use crate::proxy::upstream::h1::Writer;

/// Largest request head without a configured limit (hyper's default buffer).
const DEFAULT_MAX_HEAD: usize = 8192 + 4096 * 100;

/// Longest a closing connection waits to send its close (TLS `close_notify`).
const SHUTDOWN_WAIT: Duration = Duration::from_millis(250);

/// Why a connection ended other than by a close between requests.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("request head not received within {0:?}")]
    HeaderTimeout(Duration),
    #[error("{0}")]
    Head(#[from] HeadError),
    #[error("connection closed in the middle of a request head")]
    IncompleteHead,
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("response: {0}")]
    Response(#[source] crate::proxy::error::H1Error),
}

/// Serves HTTP/1.1 requests on `io` until the client closes, a response ends the connection,
/// or `close` turns true: at once while no request has begun, else after the response in flight
/// (which says `Connection: close`).
pub(crate) async fn serve(
    io: BoxedIo,
    handler: Handler,
    close: watch::Receiver<bool>,
) -> Result<(), ServeError> {
    let settings = handler.settings.clone();
    let max_head = settings.head_buffer().unwrap_or(DEFAULT_MAX_HEAD);
    let wire = Wire::new(io);
    let _closes = Closes(wire.clone());
    let mut out = BytesMut::new();
    let mut closing = false;
    let mut id = 0u64;
    // One header timer and one wait for the close for the connection's life, re-armed per
    // head rather than made and dropped per request: moving a registered timer's deadline
    // later is an atomic update, while a new timer is registered and deregistered each time.
    let timer = std::pin::pin!(tokio::time::sleep(settings.header_read_timeout));
    let closed = std::pin::pin!(close_asked(close.clone()));
    let mut waits = Waits {
        timer,
        closed,
        timeout: settings.header_read_timeout,
    };
    loop {
        let head = match read_head(&wire, max_head, &mut waits, &close, &mut closing).await {
            Ok(Some(head)) => head,
            Ok(None) => return Ok(()),
            Err(ServeError::Head(e)) => {
                out.clear();
                encode::refusal(e.status(), &mut out);
                let _ = WireIo(&wire).write_all(&out).await;
                shutdown(&wire).await;
                return Err(e.into());
            }
            Err(e) => return Err(e),
        };
        let Head {
            mut req,
            framing,
            keep_alive,
            expect_continue,
            upgrade,
        } = head;
        id += 1;
        let body = {
            let mut w = lock(&wire);
            w.current = id;
            w.framing = framing;
            w.limits = Default::default();
            w.continue_left = match expect_continue && framing != Framing::Done {
                true => CONTINUE.len(),
                false => 0,
            };
            match framing {
                Framing::Done => RequestBody::Empty,
                _ => RequestBody::H1(RecvBody::new(wire.clone(), id)),
            }
        };
        let switch = upgrade.then(|| {
            let (tx, rx) = oneshot::channel();
            req.extensions_mut().insert(OnUpgrade::new(rx));
            tx
        });
        let method = req.method().clone();
        let version = req.version();
        let watch_close = framing == Framing::Done;
        // Boxed: a request's future is large; moving a box copies a pointer.
        let mut handling = Box::pin(handler.clone().handle(req.map(|()| body)));
        let resp = tokio::select! {
            biased;
            resp = &mut handling => resp,
            // A client that goes away mid-request cancels it (and frees what it holds).
            () = client_gone(&wire, max_head), if watch_close => return Ok(()),
        };
        closing |= *close.borrow();
        let asked = Asked {
            method: &method,
            version,
            keep_alive: keep_alive && !closing,
        };
        out.clear();
        let (body_out, keep) = encode::head(&resp, &asked, &mut out);
        lock(&wire).continue_left = 0;
        let switched = switch.filter(|_| {
            resp.status() == StatusCode::SWITCHING_PROTOCOLS
                || (method == Method::CONNECT && resp.status().is_success())
        });
        let body = resp.into_body();
        let mut writer = match body_out {
            BodyOut::None => {
                drop(body);
                Writer::head_only(out)
            }
            BodyOut::Chunked => Writer::new(out, body, true, None),
            BodyOut::Length(_) | BodyOut::UntilClose => Writer::new(out, body, false, None),
        };
        let written = std::future::poll_fn(|cx| writer.poll_write(&mut WireIo(&wire), cx)).await;
        let sent = writer.body_bytes();
        out = writer.into_buffer();
        if let Err(e) = written {
            return Err(ServeError::Response(e));
        }
        if let Some(tx) = switched {
            if let Some(io) = lock(&wire).take() {
                let _ = tx.send(io);
            }
            return Ok(());
        }
        let whole = match body_out {
            BodyOut::Length(n) => sent == n,
            _ => true,
        };
        if !keep || !whole || closing || !body_read(&wire) {
            shutdown(&wire).await;
            return Ok(());
        }
    }
}

/// Drops the stream when the loop ends, however it ends: a request body still held elsewhere
/// (a mirror's copy in flight) must not keep the connection open.
struct Closes(Arc<Mutex<Wire>>);

impl Drop for Closes {
    fn drop(&mut self) {
        drop(lock(&self.0).take());
    }
}

/// What a connection waits on besides its stream while it reads a head.
struct Waits<'a, C> {
    /// The header read timer, re-armed for each head.
    timer: Pin<&'a mut Sleep>,
    /// Resolves once the connection is asked to close; polled only until then.
    closed: Pin<&'a mut C>,
    /// The header read timeout.
    timeout: Duration,
}

/// Resolves once `close` turns true (or its sender is gone).
async fn close_asked(mut close: watch::Receiver<bool>) {
    let _ = close.wait_for(|c| *c).await;
}

/// Reads until a whole request head is buffered, within the header read timeout counted from
/// now. `None`: the client closed between requests, or `close` turned true while nothing of a
/// request had arrived.
async fn read_head<C: Future<Output = ()>>(
    wire: &Arc<Mutex<Wire>>,
    max_head: usize,
    waits: &mut Waits<'_, C>,
    close: &watch::Receiver<bool>,
    closing: &mut bool,
) -> Result<Option<Head>, ServeError> {
    let timeout = waits.timeout;
    waits.timer.as_mut().reset(Instant::now() + timeout);
    let mut tried = 0;
    loop {
        {
            let mut w = lock(wire);
            let buffered = w.read.len();
            if buffered > 0 && buffered != tried {
                if let Some(head) = decode::parse_head(&mut w.read, max_head)? {
                    return Ok(Some(head));
                }
                tried = buffered;
            }
            *closing |= *close.borrow();
            if *closing && w.read.is_empty() {
                return Ok(None);
            }
        }
        let filled = tokio::select! {
            biased;
            filled = std::future::poll_fn(|cx| lock(wire).poll_fill(cx, false)) => filled?,
            () = waits.closed.as_mut(), if !*closing => {
                *closing = true;
                continue;
            }
            () = waits.timer.as_mut() => return Err(ServeError::HeaderTimeout(timeout)),
        };
        if filled == 0 {
            return match lock(wire).read.is_empty() {
                true => Ok(None),
                false => Err(ServeError::IncompleteHead),
            };
        }
    }
}

/// Resolves when the client closes its side (or the stream fails) while a request without a
/// body is being handled; bytes it sends meanwhile (a pipelined request) stay buffered, up to
/// `max_head`, after which it no longer reads.
async fn client_gone(wire: &Mutex<Wire>, max_head: usize) {
    std::future::poll_fn(|cx| {
        let mut w = lock(wire);
        loop {
            if w.read.len() >= max_head {
                return std::task::Poll::Pending;
            }
            match w.poll_fill(cx, false) {
                std::task::Poll::Ready(Ok(0)) | std::task::Poll::Ready(Err(_)) => {
                    return std::task::Poll::Ready(())
                }
                std::task::Poll::Ready(Ok(_)) => {}
                std::task::Poll::Pending => return std::task::Poll::Pending,
            }
        }
    })
    .await
}

/// Whether the request body has been read to its end, decoding what is already buffered of it
/// (a body the handler left unread); the connection is reused only then.
fn body_read(wire: &Mutex<Wire>) -> bool {
    let mut guard = lock(wire);
    let w = &mut *guard;
    if w.broken {
        return false;
    }
    for _ in 0..1024 {
        match w.framing.step(&mut w.read, false, &mut w.limits) {
            Ok(Step::Frame(_)) => {}
            Ok(Step::End) => return true,
            Ok(Step::Read) | Err(_) => return false,
        }
    }
    false
}

/// Closes the write side (a TLS `close_notify`), for a short while at most.
async fn shutdown(wire: &Mutex<Wire>) {
    let _ = tokio::time::timeout(SHUTDOWN_WAIT, WireIo(wire).shutdown()).await;
}
