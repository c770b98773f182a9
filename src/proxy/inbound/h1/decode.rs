//! Reading an HTTP/1.1 request head: parsed once with `httparse`, straight into the `http` types
//! (header values share the bytes read), with the framing checks request smuggling relies on
//! failing (RFC 9112 6.3). The body's decoder is `h1wire::framing`.

use std::mem::MaybeUninit;

use bytes::BytesMut;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode, Uri, Version};

pub(crate) use crate::proxy::h1wire::{BodyError, Chunk, Framing, Limits, Step};

/// Most header lines a request head may have (hyper's default).
const MAX_HEADERS: usize = 100;

/// Longest request target accepted (hyper's limit): longer ones get 414.
const MAX_URI: usize = (u16::MAX - 1) as usize;

/// Why a request head is refused; each has the status the client is answered with before the
/// connection closes.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    #[error("malformed request head: {0}")]
    Syntax(#[from] httparse::Error),
    #[error("request head larger than {0} bytes")]
    TooLarge(usize),
    #[error("more than {MAX_HEADERS} header fields")]
    TooManyHeaders,
    #[error("request target longer than {MAX_URI} bytes")]
    UriTooLong,
    #[error("invalid request target")]
    Uri,
    #[error("invalid method")]
    Method,
    #[error("invalid header field")]
    Header,
    #[error("{0}")]
    Framing(&'static str),
}

impl HeadError {
    /// The status of the answer: 431 for heads that do not fit, 414 for long targets, else 400.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::TooLarge(_) | Self::TooManyHeaders => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::UriTooLong => StatusCode::URI_TOO_LONG,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// A parsed request head and what its headers say about the exchange.
pub struct Head {
    pub req: Request<()>,
    pub framing: Framing,
    /// The client keeps the connection open after this exchange.
    pub keep_alive: bool,
    /// `Expect: 100-continue` on HTTP/1.1: answered when the body is first read.
    pub expect_continue: bool,
    /// `Upgrade` on HTTP/1.1, or `CONNECT`: the connection may be handed over after the answer.
    pub upgrade: bool,
}

/// Header fields the proxy adds to a request on its way upstream (`X-Request-Id`,
/// `traceparent`, `X-Forwarded-For`, `-Proto`, `-Host`), plus one: the map is made with room
/// for them, so that adding them does not grow it (each growth moves every entry).
const ADDED: usize = 6;

/// Parses a request head from the front of `buf`, taking its bytes out of `buf`. `None` while
/// the head is incomplete and smaller than `max` bytes.
pub fn parse_head(buf: &mut BytesMut, max: usize) -> Result<Option<Head>, HeadError> {
    let mut spans = [(0u32, 0u32, 0u32, 0u32); MAX_HEADERS];
    let (len, method, target, minor, count) = {
        // Left uninitialised: the parser writes only the slots of the lines it finds.
        let mut headers = [MaybeUninit::uninit(); MAX_HEADERS];
        let mut req = httparse::Request::new(&mut []);
        let len = match req.parse_with_uninit_headers(buf, &mut headers) {
            Ok(httparse::Status::Complete(len)) if len > max => {
                return Err(HeadError::TooLarge(max))
            }
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() >= max => {
                return Err(HeadError::TooLarge(max))
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyHeaders),
            Err(e) => return Err(e.into()),
        };
        let base = buf.as_ptr() as usize;
        let offset = |s: &[u8]| (s.as_ptr() as usize - base) as u32;
        let mut count = 0;
        for (span, h) in spans.iter_mut().zip(req.headers.iter()) {
            *span = (
                offset(h.name.as_bytes()),
                h.name.len() as u32,
                offset(h.value),
                h.value.len() as u32,
            );
            count += 1;
        }
        let method = Method::from_bytes(req.method.unwrap_or_default().as_bytes())
            .map_err(|_| HeadError::Method)?;
        let path = req.path.unwrap_or_default();
        if path.len() > MAX_URI {
            return Err(HeadError::UriTooLong);
        }
        let target = (offset(path.as_bytes()) as usize, path.len());
        (len, method, target, req.version.unwrap_or(1), count)
    };
    let head = buf.split_to(len).freeze();
    let uri = Uri::from_maybe_shared(head.slice(target.0..target.0 + target.1))
        .map_err(|_| HeadError::Uri)?;
    let http11 = minor == 1;
    let mut headers = HeaderMap::with_capacity(count + ADDED);
    let mut seen = Seen {
        keep_alive: http11,
        ..Seen::default()
    };
    for &(name, name_len, value, value_len) in &spans[..count] {
        let (name, value) = (name as usize, value as usize);
        let name = HeaderName::from_bytes(&head[name..name + name_len as usize])
            .map_err(|_| HeadError::Header)?;
        let value = HeaderValue::from_maybe_shared(head.slice(value..value + value_len as usize))
            .map_err(|_| HeadError::Header)?;
        if seen.see(&name, &value, http11)? {
            headers.append(name, value);
        }
    }
    if seen.te.is_some() && seen.length_seen {
        // RFC 9112 6.3: Transfer-Encoding alone frames the body; the connection is not reused.
        headers.remove(header::CONTENT_LENGTH);
        seen.keep_alive = false;
    } else if let Some(n) = seen.length.filter(|_| seen.length_list) {
        // RFC 9110 8.6: a list of identical values is that value; it goes on as one value, so
        // that no hop after this one can read the list otherwise.
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    let framing = match (seen.te, seen.length) {
        (Some(true), _) => Framing::Chunked(Chunk::Size),
        (Some(false), _) => {
            return Err(HeadError::Framing(
                "Transfer-Encoding does not end in chunked",
            ))
        }
        (None, Some(n)) if n > 0 => Framing::Length(n),
        (None, _) => Framing::Done,
    };
    let mut req = Request::new(());
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.version_mut() = if http11 {
        Version::HTTP_11
    } else {
        Version::HTTP_10
    };
    let upgrade = (seen.upgrade && http11) || *req.method() == Method::CONNECT;
    *req.headers_mut() = headers;
    Ok(Some(Head {
        req,
        framing,
        keep_alive: seen.keep_alive,
        expect_continue: seen.expect_continue && http11,
        upgrade,
    }))
}

/// What a request's framing and connection headers say, gathered while its head is read.
#[derive(Default)]
struct Seen {
    /// Whether the last transfer coding is `chunked`, once a `Transfer-Encoding` was seen.
    te: Option<bool>,
    length: Option<u64>,
    length_seen: bool,
    /// Whether a `Content-Length` value was a list (of identical values, or refused).
    length_list: bool,
    keep_alive: bool,
    close: bool,
    expect_continue: bool,
    upgrade: bool,
}

impl Seen {
    /// Notes one header field; false when it is not kept (a repeated equal `Content-Length`).
    fn see(
        &mut self,
        name: &HeaderName,
        value: &HeaderValue,
        http11: bool,
    ) -> Result<bool, HeadError> {
        let bytes = value.as_bytes();
        if *name == header::TRANSFER_ENCODING {
            if !http11 {
                return Err(HeadError::Framing(
                    "Transfer-Encoding in an HTTP/1.0 request",
                ));
            }
            let last = bytes.rsplit(|b| *b == b',').next().unwrap_or(b"");
            self.te = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if *name == header::CONTENT_LENGTH {
            self.length_seen = true;
            self.length_list |= bytes.contains(&b',');
            let n = content_length(bytes).ok_or(HeadError::Framing("invalid Content-Length"))?;
            match self.length {
                Some(l) if l != n => return Err(HeadError::Framing("differing Content-Length")),
                Some(_) => return Ok(false),
                None => self.length = Some(n),
            }
        } else if *name == header::CONNECTION {
            let has = |token: &[u8]| {
                bytes
                    .split(|b| *b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
            };
            if self.close || has(b"close") {
                self.close = true;
                self.keep_alive = false;
            } else if !http11 && has(b"keep-alive") {
                self.keep_alive = true;
            }
        } else if *name == header::EXPECT {
            self.expect_continue = bytes.eq_ignore_ascii_case(b"100-continue");
        } else if *name == header::UPGRADE {
            self.upgrade = true;
        }
        Ok(true)
    }
}

/// A `Content-Length` value: digits only (a list of equal values counts as one), at most 19
/// of them.
fn content_length(value: &[u8]) -> Option<u64> {
    let mut found = None;
    for item in value.split(|b| *b == b',') {
        let item = item.trim_ascii();
        if item.is_empty() || item.len() > 19 || !item.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = std::str::from_utf8(item).ok()?.parse::<u64>().ok()?;
        match found {
            Some(f) if f != n => return None,
            _ => found = Some(n),
        }
    }
    found
}

/// A request read whole: its head, body data and trailers.
pub type ReadRequest = (Request<()>, Vec<u8>, Option<HeaderMap>);

/// A request read whole from `data`, fed `piece` bytes at a time, as the server reads it: its
/// head and its body (data and trailers); `Ok(None)` while incomplete, the error's text when
/// refused. For the fuzz target: what is decided must not depend on how the bytes arrive.
pub fn read_request(data: &[u8], piece: usize) -> Result<Option<ReadRequest>, String> {
    let piece = piece.max(1);
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let head = loop {
        let end = (fed + piece).min(data.len());
        buf.extend_from_slice(&data[fed..end]);
        fed = end;
        match parse_head(&mut buf, 16 * 1024).map_err(|e| e.to_string())? {
            Some(head) => break head,
            None if fed == data.len() => return Ok(None),
            None => {}
        }
    };
    let (mut framing, mut limits) = (head.framing, Limits::default());
    let (mut body, mut trailers) = (Vec::new(), None);
    loop {
        match framing.step(&mut buf, fed == data.len(), &mut limits) {
            Ok(Step::Frame(frame)) => match frame.into_data() {
                Ok(d) => body.extend_from_slice(&d),
                Err(frame) => trailers = frame.into_trailers().ok(),
            },
            Ok(Step::End) => return Ok(Some((head.req, body, trailers))),
            Ok(Step::Read) => {
                let end = (fed + piece).min(data.len());
                buf.extend_from_slice(&data[fed..end]);
                fed = end;
            }
            Err(BodyError::Incomplete) => return Ok(None),
            Err(e) => return Err(e.to_string()),
        }
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
