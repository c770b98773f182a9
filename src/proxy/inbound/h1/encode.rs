//! Writing an HTTP/1.1 response head: the status line and headers straight from the response's
//! parts into the connection's write buffer, with the framing this server chooses (RFC 9112 6.3):
//! no body for HEAD, 1xx, 204 and 304; the response's `Content-Length`, else a known exact size,
//! else chunks (HTTP/1.1) or the connection's close (HTTP/1.0). A `Date` is added, formatted once
//! per second per thread.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use http::header::{self, HeaderValue};
use http::{Method, Response, StatusCode, Version};
use http_body::Body;

/// What the request said that shapes the response's head.
pub struct Asked<'a> {
    pub method: &'a Method,
    pub version: Version,
    /// The connection may stay open after this exchange.
    pub keep_alive: bool,
}

/// How the response body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyOut {
    /// No body is sent (HEAD, 1xx, 204, 304, or an empty one with its length said).
    None,
    /// Its bytes as they are, framed by `Content-Length`.
    Length(u64),
    /// In chunks.
    Chunked,
    /// As they are, ended by closing the connection (HTTP/1.0 without a known length).
    UntilClose,
}

/// Writes the head of `resp` into `out`; returns how the body is framed and whether the
/// connection stays open after it.
pub fn head<B: Body>(resp: &Response<B>, asked: &Asked<'_>, out: &mut BytesMut) -> (BodyOut, bool) {
    let status = resp.status();
    out.extend_from_slice(match asked.version {
        Version::HTTP_10 => b"HTTP/1.0 ",
        _ => b"HTTP/1.1 ",
    });
    out.extend_from_slice(status.as_str().as_bytes());
    out.extend_from_slice(b" ");
    out.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes());
    out.extend_from_slice(b"\r\n");
    let bodiless = *asked.method == Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let mut length = None;
    let mut has_date = false;
    let mut has_connection = false;
    for (name, value) in resp.headers() {
        if *name == header::TRANSFER_ENCODING {
            continue;
        }
        if *name == header::CONTENT_LENGTH {
            if status.is_informational() || status == StatusCode::NO_CONTENT {
                continue;
            }
            length = std::str::from_utf8(value.as_bytes())
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok());
        }
        has_date |= *name == header::DATE;
        has_connection |= *name == header::CONNECTION;
        put(out, name.as_str().as_bytes(), value);
    }
    let body = resp.body();
    let framing = if bodiless {
        BodyOut::None
    } else if let Some(n) = length {
        if n == 0 {
            BodyOut::None
        } else {
            BodyOut::Length(n)
        }
    } else if body.is_end_stream() {
        out.extend_from_slice(b"content-length: 0\r\n");
        BodyOut::None
    } else if let Some(n) = body.size_hint().exact() {
        let _ = write!(out, "content-length: {n}\r\n");
        if n == 0 {
            BodyOut::None
        } else {
            BodyOut::Length(n)
        }
    } else if asked.version == Version::HTTP_11 {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        BodyOut::Chunked
    } else {
        BodyOut::UntilClose
    };
    let keep_alive = asked.keep_alive && framing != BodyOut::UntilClose;
    if !has_connection {
        match (keep_alive, asked.version) {
            (false, _) if status != StatusCode::SWITCHING_PROTOCOLS => {
                out.extend_from_slice(b"connection: close\r\n")
            }
            (true, Version::HTTP_10) => out.extend_from_slice(b"connection: keep-alive\r\n"),
            _ => {}
        }
    }
    if !has_date {
        out.extend_from_slice(b"date: ");
        date(out);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    (framing, keep_alive)
}

fn put(out: &mut BytesMut, name: &[u8], value: &HeaderValue) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The head of an answer the server gives itself (a refused head): status, no body, and
/// `Connection: close`.
pub fn refusal(status: StatusCode, out: &mut BytesMut) {
    let _ = write!(
        out,
        "HTTP/1.1 {} {}\r\ncontent-length: 0\r\nconnection: close\r\ndate: ",
        status.as_str(),
        status.canonical_reason().unwrap_or("<none>")
    );
    date(out);
    out.extend_from_slice(b"\r\n\r\n");
}

thread_local! {
    /// The second last formatted and its IMF-fixdate.
    static DATE: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

/// Appends the current time as an IMF-fixdate (RFC 9110 5.6.7), formatted again only when the
/// second changes.
fn date(out: &mut BytesMut) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.0 != now {
            let text = jiff::Timestamp::from_second(now as i64)
                .map(|t| t.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string())
                .unwrap_or_default();
            if text.len() == 29 {
                cached.1.copy_from_slice(text.as_bytes());
                cached.0 = now;
            }
        }
        out.extend_from_slice(&cached.1);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::body::ProxyBody;
    use http_body_util::{BodyExt, Empty, Full, StreamBody};

    fn boxed<B>(body: B) -> ProxyBody
    where
        B: Body<Data = bytes::Bytes, Error = std::convert::Infallible> + Send + 'static,
    {
        body.map_err(|never| match never {}).boxed_unsync()
    }

    fn encoded(
        resp: &Response<ProxyBody>,
        method: Method,
        version: Version,
        keep: bool,
    ) -> (String, BodyOut, bool) {
        let mut out = BytesMut::new();
        let asked = Asked {
            method: &method,
            version,
            keep_alive: keep,
        };
        let (framing, keep) = head(resp, &asked, &mut out);
        let text = String::from_utf8(out.to_vec()).expect("text");
        // The date changes; everything else is compared.
        let text = text
            .lines()
            .filter(|l| !l.starts_with("date: "))
            .collect::<Vec<_>>()
            .join("\n");
        (text, framing, keep)
    }

    #[test]
    fn bodies_are_framed_by_length_chunks_or_close() {
        let full = Response::new(boxed(Full::new(bytes::Bytes::from_static(b"hello"))));
        let (text, framing, keep) = encoded(&full, Method::GET, Version::HTTP_11, true);
        assert_eq!(text, "HTTP/1.1 200 OK\ncontent-length: 5\n");
        assert_eq!((framing, keep), (BodyOut::Length(5), true));
        let stream = || {
            let s = futures_util::stream::iter(vec![Ok::<_, std::convert::Infallible>(
                http_body::Frame::data(bytes::Bytes::from_static(b"a")),
            )]);
            Response::new(boxed(StreamBody::new(s)))
        };
        let (text, framing, _) = encoded(&stream(), Method::GET, Version::HTTP_11, true);
        assert_eq!(text, "HTTP/1.1 200 OK\ntransfer-encoding: chunked\n");
        assert_eq!(framing, BodyOut::Chunked);
        let (text, framing, keep) = encoded(&stream(), Method::GET, Version::HTTP_10, true);
        assert_eq!(text, "HTTP/1.0 200 OK\nconnection: close\n");
        assert_eq!((framing, keep), (BodyOut::UntilClose, false));
        let empty = Response::new(boxed(Empty::new()));
        let (text, framing, _) = encoded(&empty, Method::GET, Version::HTTP_10, true);
        assert_eq!(
            text,
            "HTTP/1.0 200 OK\ncontent-length: 0\nconnection: keep-alive\n"
        );
        assert_eq!(framing, BodyOut::None);
    }

    #[test]
    fn head_1xx_204_and_304_have_no_body() {
        let mut resp = Response::new(boxed(Full::new(bytes::Bytes::from_static(b"hello"))));
        let (text, framing, _) = encoded(&resp, Method::HEAD, Version::HTTP_11, true);
        assert_eq!(text, "HTTP/1.1 200 OK\n");
        assert_eq!(framing, BodyOut::None);
        for status in [StatusCode::NO_CONTENT, StatusCode::NOT_MODIFIED] {
            *resp.status_mut() = status;
            resp.headers_mut().insert(
                header::TRANSFER_ENCODING,
                HeaderValue::from_static("chunked"),
            );
            let (text, framing, _) = encoded(&resp, Method::GET, Version::HTTP_11, true);
            assert!(!text.contains("transfer-encoding"), "{text}");
            assert_eq!(framing, BodyOut::None);
        }
    }

    #[test]
    fn a_closing_connection_says_so_and_has_a_date() {
        let resp = Response::new(boxed(Empty::new()));
        let mut out = BytesMut::new();
        let asked = Asked {
            method: &Method::GET,
            version: Version::HTTP_11,
            keep_alive: false,
        };
        head(&resp, &asked, &mut out);
        let text = String::from_utf8(out.to_vec()).expect("text");
        assert!(text.contains("connection: close\r\n"), "{text}");
        let date = text
            .lines()
            .find_map(|l| l.strip_prefix("date: "))
            .expect("date");
        assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
    }
}
