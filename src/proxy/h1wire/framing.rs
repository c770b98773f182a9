//! Decoding an HTTP/1.1 request body by its length or its chunks, strictly: chunk lines end in
//! CRLF (a bare LF or CR is refused, as hyper does), sizes are hex that fits in 64 bits,
//! extensions hold no control bytes but tab, trailers are bounded.

use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http_body::Frame;

/// Longest chunk-size line (with its extensions) accepted.
pub(crate) const MAX_CHUNK_LINE: usize = 4096;

/// Most bytes of chunk extensions accepted over a whole body.
const MAX_EXTENSIONS: usize = 16 * 1024;

/// Most bytes of trailer fields accepted.
const MAX_TRAILERS: usize = 16 * 1024;

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
