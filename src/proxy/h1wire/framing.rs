//! Decoding an HTTP/1.1 body by its length, its chunks or the connection's close: one decoder
//! for request bodies (`h1wire::RecvBody`) and response bodies (`upstream::h1`), the rules of
//! each in a [`Rules`]. Requests are read strictly: chunk lines end in CRLF (a bare LF or CR is
//! refused, as hyper does), sizes are hex that fits in 64 bits, extensions hold no control bytes
//! but tab, trailers are bounded and kept. Responses are read as leniently as backends need
//! (a bare LF ends a line, extensions are skipped unchecked, trailers are dropped), with the
//! same bounds on each line.

use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http_body::Frame;

/// Longest chunk-size line (with its extensions) accepted.
pub(crate) const MAX_CHUNK_LINE: usize = 4096;

/// Most bytes of chunk extensions accepted over a whole request body.
const MAX_EXTENSIONS: usize = 16 * 1024;

/// Most bytes of trailer fields accepted in a request.
const MAX_TRAILERS: usize = 16 * 1024;

/// Most bytes of trailer fields read (and dropped) in a response: a response head's bound.
const MAX_RESPONSE_TRAILERS: usize = 64 * 1024;

/// Most trailer fields accepted.
const MAX_HEADERS: usize = 100;

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

/// Where the reading of a body stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// This many bytes are still to come.
    Length(u64),
    /// Chunked transfer coding, at this point of a chunk.
    Chunked(Chunk),
    /// The body ends when the connection closes (responses only).
    Close,
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

/// How a chunked body is read: the same steps for requests and responses, with these bounds.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Longest chunk-size line (with its extensions).
    max_line: usize,
    /// Most bytes of chunk extensions over a whole body.
    max_extensions: usize,
    /// Most bytes of trailer fields over a whole body.
    max_trailers: usize,
    /// Lines end in CRLF only and extensions are checked (else a bare LF ends a line and
    /// blanks may surround the size).
    strict: bool,
    /// Trailer fields are parsed and returned as a frame (else skipped).
    keep_trailers: bool,
}

/// The rules of a request body: strict, bounded, trailers kept.
const REQUEST: Rules = Rules {
    max_line: MAX_CHUNK_LINE,
    max_extensions: MAX_EXTENSIONS,
    max_trailers: MAX_TRAILERS,
    strict: true,
    keep_trailers: true,
};

/// The rules of a response body: lenient line ends, trailers dropped.
const RESPONSE: Rules = Rules {
    max_line: MAX_CHUNK_LINE,
    max_extensions: usize::MAX,
    max_trailers: MAX_RESPONSE_TRAILERS,
    strict: false,
    keep_trailers: false,
};

/// Decoding state beyond the position: the rules, and the bytes of extensions and trailers
/// seen so far. The default is a request body's.
pub struct Limits {
    rules: Rules,
    extensions: usize,
    trailers: Option<HeaderMap>,
    trailer_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self::new(REQUEST)
    }
}

impl Limits {
    fn new(rules: Rules) -> Self {
        Self {
            rules,
            extensions: 0,
            trailers: None,
            trailer_bytes: 0,
        }
    }

    /// The state of a response body read from a backend.
    pub fn response() -> Self {
        Self::new(RESPONSE)
    }
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
                Self::Close => {
                    if !buf.is_empty() {
                        return Ok(Step::Frame(Frame::data(buf.split().freeze())));
                    }
                    if eof {
                        *self = Self::Done;
                        return Ok(Step::End);
                    }
                    return Ok(Step::Read);
                }
                Self::Chunked(chunk) => {
                    let rules = seen.rules;
                    let limit = match chunk {
                        Chunk::Trailers => rules.max_trailers - seen.trailer_bytes,
                        _ => rules.max_line,
                    };
                    let Some(line) = take_line(buf, limit, rules.strict)? else {
                        return if eof {
                            Err(BodyError::Incomplete)
                        } else {
                            Ok(Step::Read)
                        };
                    };
                    *self = match *chunk {
                        Chunk::Size => match chunk_size(&line, &mut seen.extensions, &rules)? {
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
                            if rules.keep_trailers {
                                trailer(&line, seen.trailers.get_or_insert_with(HeaderMap::new))?;
                            }
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
            Self::Chunked(_) | Self::Close => None,
        }
    }
}

/// Takes one line from the front of `buf`, without its line end; `None` while incomplete.
/// `strict`: it must end in CRLF (a bare LF or CR is refused, as hyper does); else a bare LF
/// ends it too.
fn take_line(
    buf: &mut BytesMut,
    limit: usize,
    strict: bool,
) -> Result<Option<BytesMut>, BodyError> {
    match buf.iter().position(|b| *b == b'\n') {
        Some(end) if end > limit => Err(BodyError::Chunk("line too long")),
        Some(end) => {
            let crlf = end > 0 && buf[end - 1] == b'\r';
            if strict && (!crlf || buf[..end - 1].contains(&b'\r')) {
                return Err(BodyError::Chunk("line not ended by CRLF"));
            }
            let mut line = buf.split_to(end + 1);
            line.truncate(end - usize::from(crlf));
            Ok(Some(line))
        }
        None if buf.len() > limit => Err(BodyError::Chunk("line too long")),
        None => Ok(None),
    }
}

/// The size of a chunk-size line: hex digits, optional blanks, then extensions (`;`; strictly,
/// no control bytes but tab), whose bytes count towards `extensions`. Leniently, blanks may
/// also lead.
fn chunk_size(line: &[u8], extensions: &mut usize, rules: &Rules) -> Result<u64, BodyError> {
    let line = match rules.strict {
        true => line,
        false => line.trim_ascii_start(),
    };
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
    if !rules.strict {
        return Ok(size);
    }
    if rest.iter().any(|b| b.is_ascii_control() && *b != b'\t') {
        return Err(BodyError::Chunk("invalid extension"));
    }
    *extensions += rest.len();
    if *extensions > rules.max_extensions {
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
