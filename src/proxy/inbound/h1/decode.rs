//! Reading an HTTP/1.1 request: the head parsed once with `httparse`, straight into the `http`
//! types (header values share the bytes read), with the framing checks request smuggling relies
//! on failing (RFC 9112 6.3); then the body by its length or its chunks, strictly: chunk lines end
//! in CRLF, sizes are hex that fits, extensions hold no control bytes, trailers are bounded.

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode, Uri, Version};
use http_body::Frame;

/// Most header lines a request head may have (hyper's default).
const MAX_HEADERS: usize = 100;

/// Longest request target accepted (hyper's limit): longer ones get 414.
const MAX_URI: usize = (u16::MAX - 1) as usize;

/// Longest chunk-size line (with its extensions) accepted.
const MAX_CHUNK_LINE: usize = 4096;

/// Most bytes of chunk extensions accepted over a whole body.
const MAX_EXTENSIONS: usize = 16 * 1024;

/// Most bytes of trailer fields accepted.
const MAX_TRAILERS: usize = 16 * 1024;

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

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("connection closed before the end of the request body")]
    Incomplete,
    #[error("malformed chunked request body: {0}")]
    Chunk(&'static str),
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
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

/// Parses a request head from the front of `buf`, taking its bytes out of `buf`. `None` while
/// the head is incomplete and smaller than `max` bytes.
pub fn parse_head(buf: &mut BytesMut, max: usize) -> Result<Option<Head>, HeadError> {
    let mut spans = [(0u32, 0u32, 0u32, 0u32); MAX_HEADERS];
    let (len, method, target, minor, count) = {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let len = match req.parse(buf) {
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
    let mut headers = HeaderMap::with_capacity(count);
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

/// Where the reading of a request body stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// This many bytes are still to come.
    Length(u64),
    /// Chunked transfer coding, at this point of a chunk.
    Chunked(Chunk),
    /// The body has ended.
    Done,
}

/// The position within chunked coding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer fields up to an empty line.
    Trailers,
}

/// What the body decoder needs next.
pub enum Step {
    /// A piece of the body, or its trailers.
    Frame(Frame<Bytes>),
    /// More bytes from the connection.
    Read,
    /// The body has ended.
    End,
}

/// Decoding state beyond the position: bytes of extensions and trailers seen so far.
#[derive(Default)]
pub struct Limits {
    extensions: usize,
    trailers: Option<HeaderMap>,
    trailer_bytes: usize,
}

impl Framing {
    /// The next step of decoding the body from `buf`; `eof` says the connection has closed.
    pub fn step(
        &mut self,
        buf: &mut BytesMut,
        eof: bool,
        seen: &mut Limits,
    ) -> Result<Step, BodyError> {
        loop {
            match self {
                Self::Done => return Ok(Step::End),
                Self::Length(left) | Self::Chunked(Chunk::Data(left)) => {
                    if buf.is_empty() {
                        return if eof {
                            Err(BodyError::Incomplete)
                        } else {
                            Ok(Step::Read)
                        };
                    }
                    let take = (*left).min(buf.len() as u64) as usize;
                    *left -= take as u64;
                    if *left == 0 {
                        *self = match self {
                            Self::Length(_) => Self::Done,
                            _ => Self::Chunked(Chunk::DataEnd),
                        };
                    }
                    return Ok(Step::Frame(Frame::data(buf.split_to(take).freeze())));
                }
                Self::Chunked(chunk) => {
                    let limit = match chunk {
                        Chunk::Trailers => MAX_TRAILERS - seen.trailer_bytes,
                        _ => MAX_CHUNK_LINE,
                    };
                    let Some(line) = take_line(buf, limit)? else {
                        return if eof {
                            Err(BodyError::Incomplete)
                        } else {
                            Ok(Step::Read)
                        };
                    };
                    *self = match *chunk {
                        Chunk::Size => match chunk_size(&line, &mut seen.extensions)? {
                            0 => Self::Chunked(Chunk::Trailers),
                            n => Self::Chunked(Chunk::Data(n)),
                        },
                        Chunk::DataEnd if line.is_empty() => Self::Chunked(Chunk::Size),
                        Chunk::DataEnd => {
                            return Err(BodyError::Chunk("data longer than its size"))
                        }
                        Chunk::Trailers if line.is_empty() => {
                            *self = Self::Done;
                            if let Some(trailers) = seen.trailers.take() {
                                return Ok(Step::Frame(Frame::trailers(trailers)));
                            }
                            return Ok(Step::End);
                        }
                        Chunk::Trailers => {
                            seen.trailer_bytes += line.len() + 2;
                            trailer(&line, seen.trailers.get_or_insert_with(HeaderMap::new))?;
                            Self::Chunked(Chunk::Trailers)
                        }
                        Chunk::Data(_) => return Err(BodyError::Chunk("state")),
                    };
                }
            }
        }
    }

    /// Bytes still expected, when known.
    pub fn remaining(&self) -> Option<u64> {
        match self {
            Self::Length(n) => Some(*n),
            Self::Done => Some(0),
            Self::Chunked(_) => None,
        }
    }
}

/// Takes one line, which must end in CRLF (a bare LF or CR is refused, as hyper does), from the
/// front of `buf`, without its CRLF; `None` while incomplete.
fn take_line(buf: &mut BytesMut, limit: usize) -> Result<Option<BytesMut>, BodyError> {
    match buf.iter().position(|b| *b == b'\n') {
        Some(end) if end > limit => Err(BodyError::Chunk("line too long")),
        Some(end) => {
            if end == 0 || buf[end - 1] != b'\r' || buf[..end - 1].contains(&b'\r') {
                return Err(BodyError::Chunk("line not ended by CRLF"));
            }
            let mut line = buf.split_to(end + 1);
            line.truncate(end - 1);
            Ok(Some(line))
        }
        None if buf.len() > limit => Err(BodyError::Chunk("line too long")),
        None => Ok(None),
    }
}

/// The size of a chunk-size line: hex digits, optional blanks, then extensions (`;` and no
/// control bytes but tab), whose bytes count towards `extensions`.
fn chunk_size(line: &[u8], extensions: &mut usize) -> Result<u64, BodyError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(BodyError::Chunk("invalid size"));
    }
    if digits > 16 {
        return Err(BodyError::Chunk("size too large"));
    }
    let size = line[..digits].iter().try_fold(0u64, |n, b| {
        let d = u64::from((*b as char).to_digit(16).unwrap_or(0));
        n.checked_mul(16).and_then(|n| n.checked_add(d))
    });
    let size = size.ok_or(BodyError::Chunk("size too large"))?;
    let rest = &line[digits..];
    let rest = &rest[rest
        .iter()
        .take_while(|b| **b == b' ' || **b == b'\t')
        .count()..];
    if rest.is_empty() {
        return Ok(size);
    }
    if rest[0] != b';' {
        return Err(BodyError::Chunk("invalid size"));
    }
    if rest.iter().any(|b| b.is_ascii_control() && *b != b'\t') {
        return Err(BodyError::Chunk("invalid extension"));
    }
    *extensions += rest.len();
    if *extensions > MAX_EXTENSIONS {
        return Err(BodyError::Chunk("extensions too large"));
    }
    Ok(size)
}

/// Adds one trailer field line to `trailers`.
fn trailer(line: &[u8], trailers: &mut HeaderMap) -> Result<(), BodyError> {
    let colon = line
        .iter()
        .position(|b| *b == b':')
        .ok_or(BodyError::Chunk("invalid trailer"))?;
    let name =
        HeaderName::from_bytes(&line[..colon]).map_err(|_| BodyError::Chunk("invalid trailer"))?;
    let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii())
        .map_err(|_| BodyError::Chunk("invalid trailer"))?;
    if trailers.len() >= MAX_HEADERS {
        return Err(BodyError::Chunk("too many trailers"));
    }
    trailers.append(name, value);
    Ok(())
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
