//! A backend that fails on command: a small keep-alive HTTP/1.1 server over raw TCP that
//! answers `200` with its name, or a chosen status, or hangs, or waits until the test lets it
//! answer, or resets the connection, and
//! counts the requests it received and keeps their heads, so tests can tell what the proxy
//! sent and how often.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::net::bind_loopback;

/// What the backend does with the next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `200` with the backend's name as the body.
    Ok,
    /// This status, with the backend's name as the body.
    Status(u16),
    /// Reads the request and never answers.
    Hang,
    /// Reads the request and resets the connection (RST) without answering.
    Reset,
    /// Answers the first request of each connection, resets at the second: a keep-alive
    /// connection that died while idle in the proxy's pool.
    ResetReused,
    /// Answers with this status after this delay.
    Late(Duration, u16),
    /// Reads the request and answers `200` once [`Faulty::release`] lets it.
    Gated,
}

/// A running faulty backend.
pub struct Faulty {
    pub addr: SocketAddr,
    pub name: String,
    requests: Arc<AtomicUsize>,
    heads: Heads,
    mode: Arc<Mutex<Mode>>,
    gate: Arc<Semaphore>,
    task: JoinHandle<()>,
}

impl Faulty {
    /// Requests received so far (answered or not).
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Acquire)
    }

    /// The heads of the requests received so far (lower-cased), in the order they came.
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().expect("heads lock").clone()
    }

    /// Changes what the backend does from the next request on.
    pub fn set(&self, mode: Mode) {
        *self.mode.lock().expect("mode lock") = mode;
    }

    /// Lets `n` requests waiting in [`Mode::Gated`] (or the next to arrive) answer.
    pub fn release(&self, n: usize) {
        self.gate.add_permits(n);
    }
}

impl Drop for Faulty {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Request heads as received, shared by the backend's connections.
type Heads = Arc<Mutex<Vec<String>>>;

/// Starts a backend named `name` in `mode` on a loopback port.
pub async fn start_faulty(name: &str, mode: Mode) -> Faulty {
    let listener = bind_loopback().await;
    let addr = listener.local_addr().expect("address");
    let requests = Arc::new(AtomicUsize::new(0));
    let heads = Heads::default();
    let mode = Arc::new(Mutex::new(mode));
    let gate = Arc::new(Semaphore::new(0));
    let (count, current, body) = (requests.clone(), mode.clone(), name.to_owned());
    let seen = heads.clone();
    let opens = gate.clone();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (count, current, body) = (count.clone(), current.clone(), body.clone());
            tokio::spawn(serve(
                stream,
                count,
                seen.clone(),
                current,
                opens.clone(),
                body,
            ));
        }
    });
    Faulty {
        addr,
        name: name.into(),
        requests,
        heads,
        mode,
        gate,
        task,
    }
}

async fn serve(
    mut stream: TcpStream,
    count: Arc<AtomicUsize>,
    heads: Heads,
    mode: Arc<Mutex<Mode>>,
    gate: Arc<Semaphore>,
    name: String,
) {
    let mut buf = Vec::new();
    let mut served = 0;
    loop {
        let Some(head) = read_request(&mut stream, &mut buf).await else {
            return;
        };
        heads.lock().expect("heads lock").push(head);
        count.fetch_add(1, Ordering::AcqRel);
        served += 1;
        let now = *mode.lock().expect("mode lock");
        let status = match now {
            Mode::Ok => 200,
            Mode::Status(s) => s,
            Mode::Late(d, s) => {
                tokio::time::sleep(d).await;
                s
            }
            Mode::Gated => match gate.acquire().await {
                Ok(permit) => {
                    permit.forget();
                    200
                }
                Err(_) => return,
            },
            Mode::Hang => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return;
            }
            Mode::ResetReused if served == 1 => 200,
            Mode::Reset | Mode::ResetReused => {
                let _ = stream.set_zero_linger();
                return;
            }
        };
        let reply = format!(
            "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n{name}",
            name.len()
        );
        if stream.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Reads one request head and its `content-length` body: the head, lower-cased; `None` when
/// the peer closed.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    buf.drain(..head_end + length);
    Some(head)
}
