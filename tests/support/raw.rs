//! Raw sockets for requests a well-behaved client library refuses to send: exact HTTP/1.1 bytes,
//! and a minimal HTTP/2 client that writes its own HPACK (literal fields, no Huffman) so a
//! request may lack `:authority`. Every read is bounded in time and size.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Time limit of one raw exchange.
const LIMIT: Duration = Duration::from_secs(5);
/// Most bytes read from one raw exchange.
const MAX_READ: usize = 1 << 20;

/// A parsed HTTP/1.1 response.
#[derive(Debug)]
pub struct RawReply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl RawReply {
    /// A string field of the echo backend's JSON body.
    pub fn field(&self, name: &str) -> Option<String> {
        let json: serde_json::Value = serde_json::from_str(&self.body).ok()?;
        json[name].as_str().map(str::to_owned)
    }

    /// The echo backend that answered.
    pub fn pod(&self) -> Option<String> {
        self.field("pod")
    }
}

/// Writes `bytes` on a fresh connection and reads the first response (the head, and the body
/// as far as `Content-Length` says, or until the peer closes).
pub async fn send_h1(addr: SocketAddr, bytes: &[u8]) -> RawReply {
    let fut = async {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(bytes).await.expect("write");
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            if let Some(end) = find(&raw, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&raw[..end]).into_owned();
                let want = content_length(&head);
                if want.is_some_and(|n| raw.len() >= end + 4 + n) {
                    break;
                }
            }
            let n = s.read(&mut buf).await.unwrap_or(0);
            if n == 0 || raw.len() > MAX_READ {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
        }
        raw
    };
    let raw = tokio::time::timeout(LIMIT, fut)
        .await
        .expect("reply in time");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = match content_length(head) {
        Some(n) => body.get(..n).unwrap_or(body).to_owned(),
        None => body.to_owned(),
    };
    RawReply {
        status,
        head: head.to_owned(),
        body,
    }
}

/// `GET target` with the given extra header lines (each ending in CRLF).
pub async fn get_h1(addr: SocketAddr, target: &str, headers: &str) -> RawReply {
    let req = format!("GET {target} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n");
    send_h1(addr, req.as_bytes()).await
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn content_length(head: &str) -> Option<usize> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
}

/// An HPACK literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2).
fn literal(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0x00);
    for s in [name, value] {
        assert!(s.len() < 127, "short strings only");
        out.push(s.len() as u8);
        out.extend_from_slice(s.as_bytes());
    }
}

/// Sends one HTTP/2 GET (prior knowledge) with exactly the given pseudo and regular header
/// fields and returns the response `:status`, or `None` when the stream was reset.
pub async fn h2_status(addr: SocketAddr, fields: &[(&str, &str)]) -> Option<u16> {
    let fut = async {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        out.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]); // empty SETTINGS
        let mut block = Vec::new();
        for (n, v) in fields {
            literal(&mut block, n, v);
        }
        let len = block.len();
        out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8]);
        out.extend_from_slice(&[0x1, 0x5, 0, 0, 0, 1]); // HEADERS, END_STREAM|END_HEADERS, id 1
        out.extend_from_slice(&block);
        s.write_all(&out).await.expect("write");
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        for _ in 0..64 {
            // Walk complete frames: (length, type, flags, stream).
            let mut at = 0;
            while raw.len() >= at + 9 {
                let len = usize::from(raw[at]) << 16
                    | usize::from(raw[at + 1]) << 8
                    | usize::from(raw[at + 2]);
                let (kind, stream) = (raw[at + 3], raw[at + 8] & 0x7F);
                if raw.len() < at + 9 + len {
                    break;
                }
                let payload = &raw[at + 9..at + 9 + len];
                if stream == 1 && kind == 0x3 {
                    return None; // RST_STREAM
                }
                if stream == 1 && kind == 0x1 {
                    // hyper encodes :status from the static table: 0x88 is 200 ... 0x8E is 500.
                    return match payload.first() {
                        Some(0x88) => Some(200),
                        Some(0x89) => Some(204),
                        Some(0x8A) => Some(206),
                        Some(0x8B) => Some(304),
                        Some(0x8C) => Some(400),
                        Some(0x8D) => Some(404),
                        Some(0x8E) => Some(500),
                        _ => literal_status(payload),
                    };
                }
                if kind == 0x7 {
                    return None; // GOAWAY
                }
                at += 9 + len;
            }
            let n = s.read(&mut buf).await.unwrap_or(0);
            if n == 0 || raw.len() > MAX_READ {
                return None;
            }
            raw.extend_from_slice(&buf[..n]);
        }
        None
    };
    tokio::time::timeout(LIMIT, fut)
        .await
        .expect("h2 reply in time")
}

/// `:status` sent as a literal with an indexed name (`0x08` or `0x48` + 3 digits, no Huffman).
fn literal_status(payload: &[u8]) -> Option<u16> {
    match payload {
        [0x08 | 0x48, 3, a, b, c, ..] => std::str::from_utf8(&[*a, *b, *c]).ok()?.parse().ok(),
        _ => None,
    }
}
