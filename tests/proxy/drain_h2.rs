//! The drain on an HTTP/2 connection with a stream in flight, over a raw socket so that every
//! frame is seen: the client gets GOAWAY while its response is pending, the response still
//! completes on the same connection, and then the server closes it.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::connections::{connect, proxy_to, PREFACE, SETTINGS};
use crate::support::echo::start_echo;

/// A SETTINGS acknowledgement.
const SETTINGS_ACK: &[u8] = &[0, 0, 0, 4, 1, 0, 0, 0, 0];
/// Frame types and flags of RFC 9113.
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 1;
/// Upper bound of the whole exchange; the drain itself allows 20 s.
const EXCHANGE_WITHIN: Duration = Duration::from_secs(10);

/// One HTTP/2 frame as read from the socket.
#[derive(Debug)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// A HEADERS frame for `GET path` with `:authority` `authority` on stream 1, ending the stream.
/// HPACK: indexed `:method GET` (2) and `:scheme http` (6); `:path` (4) and `:authority` (1) as
/// literals without indexing, without Huffman coding.
fn get_request(authority: &str, path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x04, path.len() as u8];
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, authority.len() as u8]);
    block.extend_from_slice(authority.as_bytes());
    let len = (block.len() as u32).to_be_bytes();
    let mut frame = vec![
        len[1],
        len[2],
        len[3],
        HEADERS,
        0x4 | END_STREAM,
        0,
        0,
        0,
        1,
    ];
    frame.extend_from_slice(&block);
    frame
}

/// Splits `bytes` into frames; a trailing partial frame is left out.
fn frames(mut bytes: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        let Some(payload) = bytes.get(9..9 + len) else {
            break;
        };
        out.push(Frame {
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff,
            payload: payload.to_vec(),
        });
        bytes = &bytes[9 + len..];
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_sends_goaway_completes_the_stream_in_flight_then_closes() {
    let echo = start_echo("e").await;
    let (addr, p) = proxy_to(echo.addr, |o| o.drain_timeout = Duration::from_secs(20)).await;
    let mut conn = connect(addr).await;
    conn.write_all(&[PREFACE, SETTINGS, SETTINGS_ACK].concat())
        .await
        .unwrap();
    // The backend answers after a second, so the stream is in flight when the drain begins.
    conn.write_all(&get_request("h", "/slow?delay=1s"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let proxy = p.proxy.clone();
    let shutdown = tokio::spawn(async move { proxy.shutdown().await });
    let mut bytes = Vec::new();
    let read_to_close = async {
        let mut buf = [0u8; 4096];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(EXCHANGE_WITHIN, read_to_close)
        .await
        .expect("the connection was not closed after its last stream ended");
    let frames = frames(&bytes);
    let kinds: Vec<(u8, u32)> = frames.iter().map(|f| (f.kind, f.stream)).collect();

    let goaway = frames
        .iter()
        .position(|f| f.kind == GOAWAY)
        .unwrap_or_else(|| panic!("no GOAWAY: {kinds:?}"));
    let last_stream = u32::from_be_bytes(frames[goaway].payload[..4].try_into().unwrap());
    assert!(
        last_stream >= 1,
        "GOAWAY refuses the stream in flight: {kinds:?}"
    );
    // NO_ERROR: a graceful close, not a failure.
    assert_eq!(frames[goaway].payload[4..8], [0, 0, 0, 0], "{kinds:?}");

    let head = frames
        .iter()
        .position(|f| f.kind == HEADERS && f.stream == 1)
        .unwrap_or_else(|| panic!("no response HEADERS on stream 1: {kinds:?}"));
    // HPACK static index 8 is `:status 200`.
    assert_eq!(frames[head].payload.first(), Some(&0x88), "{kinds:?}");
    let end = frames
        .iter()
        .position(|f| {
            f.stream == 1 && f.flags & END_STREAM != 0 && matches!(f.kind, DATA | HEADERS)
        })
        .unwrap_or_else(|| panic!("the response on stream 1 never ended: {kinds:?}"));
    let body: Vec<u8> = frames
        .iter()
        .filter(|f| f.kind == DATA && f.stream == 1)
        .flat_map(|f| f.payload.iter().copied())
        .collect();
    let json: serde_json::Value = serde_json::from_slice(&body).expect("echo JSON body");
    assert_eq!(json["path"], "/slow?delay=1s");
    assert!(
        goaway < end,
        "GOAWAY came only after the response ended: {kinds:?}"
    );
    assert!(
        frames.iter().skip(end + 1).all(|f| f.stream == 0),
        "stream frames after the end of the response: {kinds:?}"
    );
    tokio::time::timeout(EXCHANGE_WITHIN, shutdown)
        .await
        .expect("the drain ended with the last stream")
        .unwrap();
}
