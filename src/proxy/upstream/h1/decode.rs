//! Reading an HTTP/1.1 response: the head parsed straight into the `http` types (header values
//! share the bytes read, nothing is copied), and the body's framing (RFC 9112 6.3): a length, chunks,
//! or until the connection closes, decoded by the request body's decoder (`h1wire`) with a
//! response's rules.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Version};

use super::H1Error;
use crate::proxy::h1wire::{BodyError, Limits, Step as Next};

/// Most header lines a response head may have.
const MAX_HEADERS: usize = 100;

/// Largest response head accepted, in bytes.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// Header fields the proxy may add to a response (`X-Request-Id`, one more): the map is made
/// with room for them, so that adding them does not grow it.
const ADDED: usize = 2;

/// A parsed response head and how its body is framed.
pub(crate) struct Head {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub framing: Framing,
    /// The backend keeps the connection open after this response.
    pub keep_alive: bool,
}

/// Parses a response head from the front of `buf`, taking its bytes out of `buf`. `None` while
/// the head is incomplete. Informational (1xx) responses come back as heads too: the caller
/// skips them.
pub(crate) fn parse_head(buf: &mut BytesMut, request: &Method) -> Result<Option<Head>, H1Error> {
    // Where each name and value lies in the head, so the head can be frozen and shared by
    // the values once parsing is done.
    let mut spans = [(0u32, 0u32, 0u32, 0u32); MAX_HEADERS];
    let (len, code, minor, count) = {
        // Left uninitialised: the parser writes only the slots of the lines it finds.
        let mut headers = [MaybeUninit::uninit(); MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            buf,
            &mut headers,
        );
        let len = match parsed {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                return Err(H1Error::HeadTooLarge(MAX_HEAD))
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(H1Error::Head(e)),
        };
        let base = buf.as_ptr() as usize;
        let offset = |s: &[u8]| (s.as_ptr() as usize - base) as u32;
        let mut count = 0;
        for (span, h) in spans.iter_mut().zip(resp.headers.iter()) {
            *span = (
                offset(h.name.as_bytes()),
                h.name.len() as u32,
                offset(h.value),
                h.value.len() as u32,
            );
            count += 1;
        }
        (
            len,
            resp.code.unwrap_or_default(),
            resp.version.unwrap_or(1),
            count,
        )
    };
    let head = buf.split_to(len).freeze();
    let status = StatusCode::from_u16(code).map_err(|_| H1Error::Status(code))?;
    let mut headers = HeaderMap::with_capacity(count + ADDED);
    let mut declared = Declared::default();
    // A `101` hands the connection over: its `Connection` and `Upgrade` go to the client.
    let switching = status == StatusCode::SWITCHING_PROTOCOLS;
    for &(name, name_len, value, value_len) in &spans[..count] {
        let (name, value) = (name as usize, value as usize);
        let name = HeaderName::from_bytes(&head[name..name + name_len as usize])
            .map_err(|_| H1Error::Header)?;
        let value = HeaderValue::from_maybe_shared(head.slice(value..value + value_len as usize))
            .map_err(|_| H1Error::Header)?;
        if declared.see(&name, value.as_bytes()) && !switching {
            // Said only of this connection, and removed on the way to the client anyway.
            continue;
        }
        headers.append(name, value);
    }
    let version = if minor == 0 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let (framing, close_delimited) = framing(request, status, &declared)?;
    let keep_alive = version == Version::HTTP_11 && !close_delimited && !declared.close;
    Ok(Some(Head {
        status,
        version,
        headers,
        framing,
        keep_alive,
    }))
}

/// What a response's framing headers say, gathered while its head is read (no lookups after).
#[derive(Default)]
struct Declared {
    /// Whether the last transfer coding named is `chunked`, when there is a `Transfer-Encoding`.
    chunked: Option<bool>,
    /// The `Content-Length`, when given.
    length: Option<u64>,
    /// A `Content-Length` is not a number, or two disagree.
    bad_length: bool,
    /// `Connection` lists `close`.
    close: bool,
}

impl Declared {
    /// Notes one header field. True for a `Connection` that lists nothing but `keep-alive`
    /// and `close`: it names no other header to remove, and the proxy drops it (RFC 9110
    /// 7.6.1) whatever it says, so the head need not carry it.
    fn see(&mut self, name: &HeaderName, value: &[u8]) -> bool {
        if *name == header::TRANSFER_ENCODING {
            let last = value.rsplit(|b| *b == b',').next().unwrap_or(b"");
            self.chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if *name == header::CONTENT_LENGTH {
            for item in value.split(|b| *b == b',') {
                let n = std::str::from_utf8(item.trim_ascii())
                    .ok()
                    .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|s| s.parse::<u64>().ok());
                match (n, self.length) {
                    (Some(n), Some(l)) if n != l => self.bad_length = true,
                    (Some(n), _) => self.length = Some(n),
                    (None, _) => self.bad_length = true,
                }
            }
        } else if *name == header::CONNECTION {
            let mut only_persistence = true;
            for token in value.split(|b| *b == b',').map(<[u8]>::trim_ascii) {
                if token.eq_ignore_ascii_case(b"close") {
                    self.close = true;
                } else if !token.eq_ignore_ascii_case(b"keep-alive") {
                    only_persistence = false;
                }
            }
            return only_persistence;
        }
        false
    }
}

/// How the body of a response to `request` with `status` ends (RFC 9112 6.3), and whether only
/// the connection's close ends it.
fn framing(
    request: &Method,
    status: StatusCode,
    declared: &Declared,
) -> Result<(Framing, bool), H1Error> {
    if *request == Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok((Framing::Done, false));
    }
    match declared.chunked {
        Some(true) => return Ok((Framing::Chunked(Chunk::Size), false)),
        Some(false) => return Ok((Framing::Close, true)),
        None => {}
    }
    if declared.bad_length {
        return Err(H1Error::ContentLength);
    }
    Ok(match declared.length {
        Some(0) => (Framing::Done, false),
        Some(n) => (Framing::Length(n), false),
        None => (Framing::Close, true),
    })
}

pub(crate) use crate::proxy::h1wire::{Chunk, Framing};

/// What the decoder needs next.
pub(crate) enum Step {
    /// A piece of the body.
    Data(Bytes),
    /// More bytes from the connection.
    Read,
    /// The body has ended.
    End,
}

/// A response body's decoder: the request body's one (`h1wire`) with a response's rules.
pub(crate) struct BodyDecoder {
    /// Where the body stands.
    pub framing: Framing,
    limits: Limits,
}

impl BodyDecoder {
    /// The decoder of a body framed by `framing`.
    pub(crate) fn new(framing: Framing) -> Self {
        Self {
            framing,
            limits: Limits::response(),
        }
    }

    /// The next step of decoding the body from `buf`; `eof` says the connection has closed
    /// and nothing more will arrive.
    pub(crate) fn step(&mut self, buf: &mut BytesMut, eof: bool) -> Result<Step, H1Error> {
        match self.framing.step(buf, eof, &mut self.limits) {
            // A response's trailers are dropped: the decoder never returns them.
            Ok(Next::Frame(frame)) => Ok(frame.into_data().map_or(Step::End, Step::Data)),
            Ok(Next::Read) => Ok(Step::Read),
            Ok(Next::End) => Ok(Step::End),
            Err(BodyError::Incomplete) => Err(H1Error::IncompleteBody),
            Err(BodyError::Chunk(_)) => Err(H1Error::Chunk),
            Err(BodyError::Io(e)) => Err(H1Error::Io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str, method: &Method) -> Result<Option<Head>, H1Error> {
        parse_head(&mut BytesMut::from(text), method)
    }

    /// Decodes all of `wire` as a body with `framing`, fed `step` bytes at a time.
    fn body(framing: Framing, wire: &[u8], step: usize) -> Result<Vec<u8>, H1Error> {
        let mut framing = BodyDecoder::new(framing);
        let mut buf = BytesMut::new();
        let mut fed = 0;
        let mut out = Vec::new();
        loop {
            match framing.step(&mut buf, fed == wire.len())? {
                Step::Data(d) => out.extend_from_slice(&d),
                Step::End => return Ok(out),
                Step::Read => {
                    let end = (fed + step).min(wire.len());
                    buf.extend_from_slice(&wire[fed..end]);
                    fed = end;
                }
            }
        }
    }

    #[test]
    fn a_head_with_a_length_keeps_the_connection() {
        let h = head(
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\nx-a: 2\r\n\r\nok",
            &Method::GET,
        )
        .expect("parses")
        .expect("complete");
        assert_eq!(h.status, 200);
        assert_eq!(h.framing, Framing::Length(2));
        assert!(h.keep_alive);
        let values: Vec<_> = h.headers.get_all("x-a").iter().collect();
        assert_eq!(values, ["1", "2"]);
    }

    #[test]
    fn a_connection_of_persistence_tokens_only_is_left_out_of_the_head() {
        let parsed = |text: &str| head(text, &Method::GET).expect("parses").expect("complete");
        let h = parsed("HTTP/1.1 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n");
        assert!(h.headers.get("connection").is_none());
        assert_eq!(h.headers.len(), 1);
        assert!(h.keep_alive);
        let h =
            parsed("HTTP/1.1 200 OK\r\nconnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n");
        assert!(h.headers.get("connection").is_none());
        assert!(!h.keep_alive);
        // Naming another header: kept, so that the header it names is removed too.
        let h = parsed("HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n\r\n");
        assert_eq!(h.headers["connection"], "close, X-Hop");
        assert!(!h.keep_alive);
        // A protocol switch keeps its `Connection` for the client.
        let h = parsed("HTTP/1.1 101 Switching Protocols\r\nConnection: keep-alive\r\n\r\n");
        assert_eq!(h.headers["connection"], "keep-alive");
    }

    #[test]
    fn incomplete_heads_wait_and_oversized_ones_fail() {
        assert!(head("HTTP/1.1 200 OK\r\nA: b\r\n", &Method::GET)
            .expect("partial is fine")
            .is_none());
        let big = format!("HTTP/1.1 200 OK\r\nA: {}", "x".repeat(MAX_HEAD + 1));
        assert!(matches!(
            head(&big, &Method::GET),
            Err(H1Error::HeadTooLarge(_))
        ));
        assert!(matches!(
            head("HTTP/1.1 2x0 OK\r\n\r\n", &Method::GET),
            Err(H1Error::Head(_))
        ));
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let framing = |text: &str, method: &Method| {
            head(text, method)
                .map(|h| h.map(|h| (h.framing, h.keep_alive)))
                .map_err(|e| e.to_string())
        };
        let get = &Method::GET;
        assert_eq!(
            framing(
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
                &Method::HEAD
            ),
            Ok(Some((Framing::Done, true)))
        );
        assert_eq!(
            framing("HTTP/1.1 204 No Content\r\n\r\n", get),
            Ok(Some((Framing::Done, true)))
        );
        assert_eq!(
            framing(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n",
                get
            ),
            Ok(Some((Framing::Chunked(Chunk::Size), true)))
        );
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", get),
            Ok(Some((Framing::Close, false)))
        );
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\n\r\n", get),
            Ok(Some((Framing::Close, false)))
        );
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nContent-Length: 4, 4\r\n\r\n", get),
            Ok(Some((Framing::Length(4), true)))
        );
        assert!(framing("HTTP/1.1 200 OK\r\nContent-Length: 4, 5\r\n\r\n", get).is_err());
        assert!(framing("HTTP/1.1 200 OK\r\nContent-Length: +4\r\n\r\n", get).is_err());
        assert_eq!(
            framing(
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n",
                get
            ),
            Ok(Some((Framing::Length(1), false)))
        );
        assert_eq!(
            framing("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", get),
            Ok(Some((Framing::Length(1), false)))
        );
    }

    #[test]
    fn bodies_decode_whatever_the_read_sizes() {
        let chunked = b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: x\r\n\r\n";
        for step in [1, 2, 7, 1000] {
            assert_eq!(
                body(Framing::Chunked(Chunk::Size), chunked, step).expect("chunked"),
                b"hello world"
            );
            assert_eq!(
                body(Framing::Chunked(Chunk::Size), b" 5 ;a\nhello\n0\n\n", step)
                    .expect("bare LF and blanks"),
                b"hello"
            );
            assert_eq!(
                body(Framing::Length(5), b"hello", step).expect("length"),
                b"hello"
            );
            assert_eq!(
                body(Framing::Close, b"until close", step).expect("close"),
                b"until close"
            );
        }
    }

    #[test]
    fn broken_bodies_are_errors() {
        assert!(matches!(
            body(Framing::Length(5), b"hel", 10),
            Err(H1Error::IncompleteBody)
        ));
        assert!(matches!(
            body(Framing::Chunked(Chunk::Size), b"5\r\nhello\r\n", 10),
            Err(H1Error::IncompleteBody)
        ));
        assert!(matches!(
            body(Framing::Chunked(Chunk::Size), b"zz\r\n", 10),
            Err(H1Error::Chunk)
        ));
        assert!(matches!(
            body(Framing::Chunked(Chunk::Size), b"2\r\nhiX\r\n", 10),
            Err(H1Error::Chunk)
        ));
        let long = format!("1;{}\r\nx\r\n0\r\n\r\n", "e".repeat(5000));
        assert!(matches!(
            body(Framing::Chunked(Chunk::Size), long.as_bytes(), 10_000),
            Err(H1Error::Chunk)
        ));
    }
}
