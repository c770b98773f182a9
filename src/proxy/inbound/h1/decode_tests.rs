use super::*;
use crate::proxy::h1wire::MAX_CHUNK_LINE;

fn head(text: &str) -> Result<Option<Head>, HeadError> {
    parse_head(&mut BytesMut::from(text), 8192)
}

fn refused(text: &str) -> StatusCode {
    match head(text) {
        Err(e) => e.status(),
        Ok(_) => panic!("accepted: {text:?}"),
    }
}

/// Decodes all of `wire` as a body with `framing`, fed `step` bytes at a time: the data, and
/// the trailers if any.
fn body(
    mut framing: Framing,
    wire: &[u8],
    step: usize,
) -> Result<(Vec<u8>, Option<HeaderMap>), BodyError> {
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let mut out = Vec::new();
    let mut trailers = None;
    let mut limits = Limits::default();
    for _ in 0..=wire.len() * 2 + 4 {
        match framing.step(&mut buf, fed == wire.len(), &mut limits)? {
            Step::Frame(f) => match f.into_data() {
                Ok(d) => out.extend_from_slice(&d),
                Err(f) => trailers = f.into_trailers().ok(),
            },
            Step::End => return Ok((out, trailers)),
            Step::Read => {
                let end = (fed + step).min(wire.len());
                buf.extend_from_slice(&wire[fed..end]);
                fed = end;
            }
        }
    }
    panic!("the decoder did not finish");
}

#[test]
fn a_head_is_parsed_into_the_request() {
    let h = head("POST http://site:81/a?b HTTP/1.1\r\nHost: other\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 3\r\n\r\nabc")
        .expect("parses")
        .expect("complete");
    assert_eq!(h.req.method(), Method::POST);
    assert_eq!(h.req.uri().authority().map(|a| a.as_str()), Some("site:81"));
    assert_eq!(h.req.headers()["host"], "other");
    let values: Vec<_> = h.req.headers().get_all("x-a").iter().collect();
    assert_eq!(values, ["1", "2"]);
    assert_eq!(h.framing, Framing::Length(3));
    assert!(h.keep_alive);
}

#[test]
fn incomplete_heads_wait_and_oversized_ones_get_431() {
    assert!(head("GET / HTTP/1.1\r\nA: b\r\n")
        .expect("partial")
        .is_none());
    let big = format!("GET / HTTP/1.1\r\nA: {}", "x".repeat(9000));
    assert_eq!(refused(&big), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    let many: String = (0..101).map(|i| format!("h{i}: v\r\n")).collect();
    assert_eq!(
        refused(&format!("GET / HTTP/1.1\r\n{many}\r\n")),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    );
    let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_URI));
    assert_eq!(
        parse_head(&mut BytesMut::from(long.as_str()), 1 << 20)
            .err()
            .map(|e| e.status()),
        Some(StatusCode::URI_TOO_LONG)
    );
}

#[test]
fn malformed_heads_get_400() {
    for text in [
        "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nA: \x01\r\n\r\n",
    ] {
        assert_eq!(refused(text), StatusCode::BAD_REQUEST, "{text:?}");
    }
}

#[test]
fn bare_lf_heads_are_accepted_as_hyper_does() {
    let h = head("GET / HTTP/1.1\nHost: a\n\n")
        .expect("parses")
        .expect("complete");
    assert_eq!(h.req.headers()["host"], "a");
}

#[test]
fn framing_headers_that_allow_smuggling_are_refused() {
    for text in [
        "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 0x3\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        assert_eq!(refused(text), StatusCode::BAD_REQUEST, "{text:?}");
    }
    let same = head("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n")
        .expect("parses")
        .expect("complete");
    assert_eq!(same.framing, Framing::Length(3));
    assert_eq!(
        same.req.headers().get_all("content-length").iter().count(),
        1
    );
    // A list of identical values is that value (RFC 9110 8.6), and goes on as one: the next
    // hop reads no list it might take otherwise.
    let list = head("POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n")
        .expect("parses")
        .expect("complete");
    assert_eq!(list.framing, Framing::Length(3));
    let forwarded: Vec<_> = list
        .req
        .headers()
        .get_all("content-length")
        .iter()
        .collect();
    assert_eq!(forwarded, ["3"]);
    // Transfer-Encoding frames the body; the Content-Length goes and the connection is not
    // reused after the exchange.
    let both = head("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
        .expect("parses")
        .expect("complete");
    assert_eq!(both.framing, Framing::Chunked(Chunk::Size));
    assert!(both.req.headers().get("content-length").is_none());
    assert!(!both.keep_alive);
}

#[test]
fn keep_alive_follows_the_version_and_connection() {
    let keep = |text: &str| head(text).expect("parses").expect("complete").keep_alive;
    assert!(keep("GET / HTTP/1.1\r\n\r\n"));
    assert!(!keep("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
    assert!(!keep(
        "GET / HTTP/1.1\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n"
    ));
    assert!(!keep("GET / HTTP/1.0\r\n\r\n"));
    assert!(keep("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
}

#[test]
fn expect_continue_and_upgrades_are_noted_on_http11_only() {
    let h = head("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nUpgrade: websocket\r\n\r\n")
        .expect("parses")
        .expect("complete");
    assert!(h.expect_continue && h.upgrade);
    let h = head("POST / HTTP/1.0\r\nExpect: 100-continue\r\nUpgrade: websocket\r\n\r\n")
        .expect("parses")
        .expect("complete");
    assert!(!h.expect_continue && !h.upgrade);
}

#[test]
fn pipelined_heads_are_taken_one_at_a_time() {
    let mut buf = BytesMut::from("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
    let a = parse_head(&mut buf, 8192)
        .expect("parses")
        .expect("complete");
    let b = parse_head(&mut buf, 8192)
        .expect("parses")
        .expect("complete");
    assert_eq!((a.req.uri().path(), b.req.uri().path()), ("/a", "/b"));
    assert!(buf.is_empty());
}

#[test]
fn bodies_decode_by_length_and_chunks_in_any_pieces() {
    for step in [1, 3, 100] {
        let (data, _) = body(Framing::Length(5), b"hello", step).expect("decodes");
        assert_eq!(data, b"hello");
        let wire = b"5;name=value\r\nhello\r\n1 \r\n!\r\n0\r\nx-sum: 6\r\n\r\n";
        let (data, trailers) = body(Framing::Chunked(Chunk::Size), wire, step).expect("decodes");
        assert_eq!(data, b"hello!");
        assert_eq!(trailers.expect("trailers")["x-sum"], "6");
    }
    assert!(matches!(
        body(Framing::Length(5), b"hel", 2),
        Err(BodyError::Incomplete)
    ));
}

#[test]
fn malformed_chunks_are_refused() {
    for wire in [
        &b"zz\r\nhello\r\n0\r\n\r\n"[..],
        b"5\nhello\r\n0\r\n\r\n",
        b"5\r\nhello\n0\r\n\r\n",
        b"5\r\nhelloX\r\n0\r\n\r\n",
        b"5;a\x00b\r\nhello\r\n0\r\n\r\n",
        b"5;a\rb\r\nhello\r\n0\r\n\r\n",
        b"fffffffffffffffff\r\n",
        b"-5\r\nhello\r\n0\r\n\r\n",
        b"5 5\r\nhello\r\n0\r\n\r\n",
        b"0\r\nbad trailer\r\n\r\n",
        b"0\r\n",
    ] {
        assert!(
            body(Framing::Chunked(Chunk::Size), wire, 4).is_err(),
            "{}",
            String::from_utf8_lossy(wire)
        );
    }
    let long = format!("1;{}\r\n", "x".repeat(MAX_CHUNK_LINE));
    assert!(body(Framing::Chunked(Chunk::Size), long.as_bytes(), 64).is_err());
}
