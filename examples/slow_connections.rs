//! Opens many slow connections against a running edgeplane and reports how many the server
//! still holds after a wait: the figures of docs/reliability.md.
//!
//! ```sh
//! cargo run --release --example slow_connections -- 127.0.0.1:8080 2000 preface-byte 12
//! ```
//!
//! Modes: `silent` (connect, send nothing), `preface-byte` (one byte of the HTTP/2 preface),
//! `preface-settings` (the preface and a SETTINGS frame, then nothing), `head` (half an HTTP/1.1
//! request head). Bounded: N connections, one wait, then exit.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: slow_connections ADDR [COUNT=2000] [MODE=preface-byte] [WAIT_SECS=12]";
    let addr: SocketAddr = args.first().ok_or(usage)?.parse()?;
    let count: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let mode = args.get(2).map(String::as_str).unwrap_or("preface-byte");
    let wait = Duration::from_secs(args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(12));
    let bytes: Vec<u8> = match mode {
        "silent" => Vec::new(),
        "preface-byte" => PREFACE[..1].to_vec(),
        "preface-settings" => [PREFACE, SETTINGS].concat(),
        "head" => b"GET / HTTP/1.1\r\nHost: slow\r\n".to_vec(),
        other => return Err(format!("unknown mode {other}; {usage}").into()),
    };
    let started = Instant::now();
    let mut conns = Vec::with_capacity(count);
    let mut failed = 0usize;
    for _ in 0..count {
        match tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await {
            Ok(Ok(mut s)) => {
                if s.write_all(&bytes).await.is_ok() {
                    conns.push(s);
                } else {
                    failed += 1;
                }
            }
            _ => failed += 1,
        }
    }
    println!(
        "{mode}: opened {} of {count} connections in {:?} ({failed} failed)",
        conns.len(),
        started.elapsed()
    );
    tokio::time::sleep(wait).await;
    let open = conns.iter().filter(|s| still_open(s)).count();
    println!(
        "{mode}: {open} of {} still open after {wait:?}",
        conns.len()
    );
    Ok(())
}

/// True when the server has neither closed nor reset the connection (reading would block).
fn still_open(s: &TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.try_read(&mut buf) {
            Ok(0) => return false,
            // Bytes the server sent (its SETTINGS, a GOAWAY): read on to see whether it closed.
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}
