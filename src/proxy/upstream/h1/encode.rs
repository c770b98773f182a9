//! Writing an HTTP/1.1 request: the head straight from the request's parts into one buffer, then
//! the body framed by its length or in chunks. Small pieces are gathered behind the head, so a
//! request without a body, or with a body that is already there, goes out in one write. With a
//! [`SendIdle`] limit, a backend that reads nothing for that long while some of the request
//! is left to write fails the exchange.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::request::Parts;
use http::{header, Method};
use http_body::Body;
use tokio::io::AsyncWrite;

use super::H1Error;
use crate::proxy::body::UpstreamBody;

/// Body pieces up to this size are copied behind what is already buffered; larger ones are
/// written from their own buffer.
const COPY_AT_MOST: usize = 8 * 1024;

/// Body bytes gathered before they are written.
const GATHER_AT_MOST: usize = 64 * 1024;

/// Writes the head of a request, its `parts` (origin-form target, `Host` from the headers) and
/// `body`, into `out`: the request's headers less `Transfer-Encoding`, then the framing this
/// proxy chooses for the body (RFC 9112 6): the request's `Content-Length`, else a known exact
/// size, else chunks. Returns true when the body is to be chunked.
pub(crate) fn head(parts: &Parts, body: &UpstreamBody, out: &mut BytesMut) -> bool {
    let method = &parts.method;
    out.extend_from_slice(method.as_str().as_bytes());
    out.extend_from_slice(b" ");
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let headers = &parts.headers;
    let mut has_length = false;
    let mut has_host = false;
    for (name, value) in headers {
        if *name == header::TRANSFER_ENCODING {
            continue;
        }
        has_length |= *name == header::CONTENT_LENGTH;
        has_host |= *name == header::HOST;
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !has_host {
        if let Some(authority) = parts.uri.authority() {
            let _ = write!(out, "host: {authority}\r\n");
        }
    }
    let chunked = if body.is_end_stream() {
        // A method whose request usually has content says it has none.
        if !has_length && [Method::POST, Method::PUT, Method::PATCH].contains(method) {
            out.extend_from_slice(b"content-length: 0\r\n");
        }
        false
    } else if has_length {
        false
    } else if let Some(n) = body.size_hint().exact() {
        let _ = write!(out, "content-length: {n}\r\n");
        false
    } else {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        true
    };
    out.extend_from_slice(b"\r\n");
    chunked
}

/// A request extension: the longest the backend may leave the request unread while some of
/// it is left to write (the rule's `backendSendIdle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendIdle(pub Duration);

/// Writes a message: the buffered head, then the body as it arrives (a request to a backend,
/// or a response to a client: any body of `Bytes` whose error can be boxed).
pub(crate) struct Writer<B = UpstreamBody> {
    /// Bytes to write after those of `queue`.
    gathered: BytesMut,
    /// Large body pieces (and what was gathered before each), in order.
    queue: VecDeque<Bytes>,
    /// The body, until it has ended.
    body: Option<B>,
    /// Body bytes taken from the body so far.
    taken: u64,
    chunked: bool,
    /// Bytes were written since the last flush.
    unflushed: bool,
    /// [`SendIdle`]'s limit, and the deadline of the write waiting now (boxed: most
    /// requests have no limit, and the timer is made only once a write waits).
    idle: Option<Duration>,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<B> Writer<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<crate::proxy::body::BoxError>,
{
    /// A writer of `head` (with `gathered` as its buffer) and then `body`, chunked or not.
    /// `idle` bounds each wait of a write on the backend ([`SendIdle`]).
    pub(crate) fn new(head: BytesMut, body: B, chunked: bool, idle: Option<Duration>) -> Self {
        let body = (!body.is_end_stream()).then_some(body);
        Self::with(head, body, chunked, idle)
    }

    /// A writer of `head` alone (a message without a body).
    pub(crate) fn head_only(head: BytesMut) -> Self {
        Self::with(head, None, false, None)
    }

    fn with(head: BytesMut, body: Option<B>, chunked: bool, idle: Option<Duration>) -> Self {
        Self {
            gathered: head,
            queue: VecDeque::new(),
            body,
            taken: 0,
            chunked,
            unflushed: false,
            idle,
            stalled: None,
        }
    }

    /// A write waits on the backend: pending until the idle limit (if any) passes since the
    /// wait began, then the error.
    fn waiting(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), H1Error>> {
        let Some(idle) = self.idle else {
            return Poll::Pending;
        };
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
        match std::future::Future::poll(timer.as_mut(), cx) {
            Poll::Ready(()) => Poll::Ready(Err(H1Error::SendIdle(idle))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The write buffer, for the connection's next request.
    pub(crate) fn into_buffer(mut self) -> BytesMut {
        self.gathered.clear();
        self.gathered
    }

    /// Body bytes taken from the body so far.
    pub(crate) fn body_bytes(&self) -> u64 {
        self.taken
    }

    fn buffered(&self) -> usize {
        self.gathered.len() + self.queue.iter().map(Bytes::len).sum::<usize>()
    }

    fn push(&mut self, data: Bytes) {
        self.taken += data.len() as u64;
        if self.chunked {
            let _ = write!(self.gathered, "{:x}\r\n", data.len());
        }
        if data.len() <= COPY_AT_MOST {
            self.gathered.extend_from_slice(&data);
        } else {
            if !self.gathered.is_empty() {
                self.queue.push_back(self.gathered.split().freeze());
            }
            self.queue.push_back(data);
        }
        if self.chunked {
            self.gathered.extend_from_slice(b"\r\n");
        }
    }

    /// Gathers what the body has ready (up to [`GATHER_AT_MOST`]); false when the body is
    /// waiting for more.
    fn gather(&mut self, cx: &mut Context<'_>) -> Result<bool, H1Error> {
        loop {
            if self.buffered() >= GATHER_AT_MOST {
                return Ok(true);
            }
            let Some(body) = self.body.as_mut() else {
                return Ok(true);
            };
            match Pin::new(body).poll_frame(cx) {
                Poll::Pending => return Ok(false),
                Poll::Ready(None) => {
                    self.body = None;
                    if self.chunked {
                        self.gathered.extend_from_slice(b"0\r\n\r\n");
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    self.body = None;
                    return Err(H1Error::RequestBody(e.into()));
                }
                // Trailers are not sent over HTTP/1.1.
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        if !data.is_empty() {
                            self.push(data);
                        }
                    }
                }
            }
        }
    }

    /// Writes what there is to write; ready once the whole request is written and flushed.
    pub(crate) fn poll_write<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), H1Error>> {
        loop {
            let more = self.gather(cx)?;
            loop {
                let written = if let Some(front) = self.queue.front_mut() {
                    let written = write_some(io, cx, front);
                    if front.is_empty() {
                        self.queue.pop_front();
                    }
                    written
                } else if !self.gathered.is_empty() {
                    write_some(io, cx, &mut self.gathered)
                } else {
                    break;
                };
                match written {
                    Poll::Ready(Ok(())) => {
                        self.unflushed = true;
                        self.stalled = None;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return self.waiting(cx),
                }
            }
            if self.unflushed {
                match Pin::new(&mut *io).poll_flush(cx) {
                    Poll::Ready(Ok(())) => {
                        self.unflushed = false;
                        self.stalled = None;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(H1Error::Io(e))),
                    Poll::Pending => return self.waiting(cx),
                }
            }
            if self.body.is_none() {
                return Poll::Ready(Ok(()));
            }
            if !more {
                // Waiting for the client's body, not for the backend.
                self.stalled = None;
                return Poll::Pending;
            }
        }
    }
}

/// One write of the front of `piece`, which is advanced past what was written.
fn write_some<W: AsyncWrite + Unpin>(
    io: &mut W,
    cx: &mut Context<'_>,
    piece: &mut impl Buf,
) -> Poll<Result<(), H1Error>> {
    match Pin::new(io).poll_write(cx, piece.chunk()) {
        Poll::Ready(Ok(0)) => Poll::Ready(Err(H1Error::Io(std::io::ErrorKind::WriteZero.into()))),
        Poll::Ready(Ok(n)) => {
            piece.advance(n);
            Poll::Ready(Ok(()))
        }
        Poll::Ready(Err(e)) => Poll::Ready(Err(H1Error::Io(e))),
        Poll::Pending => Poll::Pending,
    }
}

#[cfg(test)]
mod tests {
    use http::Request;
    use http_body_util::{BodyExt, Empty, Full, StreamBody};

    use super::*;

    fn boxed<B>(body: B) -> UpstreamBody
    where
        B: Body<Data = Bytes, Error = std::convert::Infallible> + Send + 'static,
    {
        body.map_err(|never| match never {}).boxed_unsync()
    }

    fn encoded(req: Request<UpstreamBody>) -> String {
        let mut out = BytesMut::new();
        let (parts, body) = req.into_parts();
        let chunked = head(&parts, &body, &mut out);
        let mut writer = Writer::new(out, body, chunked, None);
        let mut wire = Vec::new();
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        match writer.poll_write(&mut wire, &mut cx) {
            Poll::Ready(r) => r.expect("written"),
            Poll::Pending => panic!("an in-memory body and sink never wait"),
        }
        String::from_utf8(wire).expect("text")
    }

    #[test]
    fn a_request_without_a_body_is_its_head() {
        let req = Request::get("/a?b=c")
            .header("host", "site")
            .header("transfer-encoding", "chunked")
            .body(boxed(Empty::new()))
            .expect("request");
        assert_eq!(encoded(req), "GET /a?b=c HTTP/1.1\r\nhost: site\r\n\r\n");
        let req = Request::post("http://site:8080/")
            .body(boxed(Empty::new()))
            .expect("request");
        assert_eq!(
            encoded(req),
            "POST / HTTP/1.1\r\nhost: site:8080\r\ncontent-length: 0\r\n\r\n"
        );
    }

    #[test]
    fn bodies_are_framed_by_length_or_chunks() {
        let req = Request::put("/")
            .header("host", "site")
            .body(boxed(Full::new(Bytes::from_static(b"hello"))))
            .expect("request");
        assert_eq!(
            encoded(req),
            "PUT / HTTP/1.1\r\nhost: site\r\ncontent-length: 5\r\n\r\nhello"
        );
        let big = Bytes::from(vec![b'x'; COPY_AT_MOST + 1]);
        let pieces = futures_util::stream::iter(vec![
            Ok::<_, std::convert::Infallible>(http_body::Frame::data(Bytes::from_static(b"ab"))),
            Ok(http_body::Frame::data(big.clone())),
            Ok(http_body::Frame::data(Bytes::from_static(b"c"))),
        ]);
        let req = Request::post("/")
            .header("host", "site")
            .body(boxed(StreamBody::new(pieces)))
            .expect("request");
        let big = String::from_utf8(big.to_vec()).expect("text");
        assert_eq!(
            encoded(req),
            format!(
                "POST / HTTP/1.1\r\nhost: site\r\ntransfer-encoding: chunked\r\n\r\n\
                 2\r\nab\r\n{:x}\r\n{big}\r\n1\r\nc\r\n0\r\n\r\n",
                big.len()
            )
        );
    }

    /// A sink that never takes a byte: the backend stopped reading.
    struct Stuck;

    impl AsyncWrite for Stuck {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            Poll::Pending
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Pending
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Pending
        }
    }

    #[tokio::test]
    async fn a_backend_that_reads_nothing_fails_the_write_after_the_idle_limit() {
        let req = Request::post("/")
            .header("host", "site")
            .body(boxed(Full::new(Bytes::from_static(b"hello"))))
            .expect("request");
        let mut out = BytesMut::new();
        let (parts, body) = req.into_parts();
        let chunked = head(&parts, &body, &mut out);
        let idle = Duration::from_millis(20);
        let mut writer = Writer::new(out, body, chunked, Some(idle));
        let result = std::future::poll_fn(|cx| writer.poll_write(&mut Stuck, cx)).await;
        assert!(
            matches!(result, Err(H1Error::SendIdle(d)) if d == idle),
            "{result:?}"
        );
    }
}
