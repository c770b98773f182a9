//! Drain and rollout through the binary: SIGTERM closes idle keep-alive connections at once and
//! the process exits when its last request ends; a second instance on the same port
//! (SO_REUSEPORT) takes over with no failed request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{config, free_port, serve_ready, wait_get, write, Running};

/// Sends SIGTERM without waiting.
fn sigterm(r: &Running) {
    let pid = r.0.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(sent.is_ok_and(|s| s.success()), "kill -TERM failed");
}

/// Waits (bounded by `limit`) for the process to exit; its exit code.
fn exited_within(r: &mut Running, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = r.0.try_wait() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("still running {limit:?} after SIGTERM");
}

/// Reads one HTTP/1.1 response with a `Content-Length` body: (status, lower-cased head).
fn read_response(s: &mut BufReader<TcpStream>) -> std::io::Result<(u16, String)> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if s.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line.to_ascii_lowercase());
    }
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or(std::io::ErrorKind::InvalidData)?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    Ok((code, head))
}

fn open(addr: SocketAddr) -> std::io::Result<BufReader<TcpStream>> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(BufReader::new(s))
}

/// One GET on a keep-alive connection: (status, head).
fn exchange(conn: &mut BufReader<TcpStream>, path: &str) -> std::io::Result<(u16, String)> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: site\r\n\r\n");
    conn.get_mut().write_all(req.as_bytes())?;
    read_response(conn)
}

/// A keep-alive client as HTTP clients behave: requests go over one connection until the
/// server sends `Connection: close` or closes it; a request that fails on a reused connection
/// before any response byte (the server closed it, or it was reset) is retried once on a new
/// connection, as clients do for idempotent requests. Anything else counts as a failure.
struct Client {
    addr: SocketAddr,
    conn: Option<BufReader<TcpStream>>,
}

impl Client {
    fn get(&mut self, path: &str) -> Result<u16, String> {
        let reused = self.conn.is_some();
        let conn = match self.conn.take() {
            Some(c) => c,
            None => open(self.addr).map_err(|e| format!("connect: {e}"))?,
        };
        let mut conn = conn;
        let answer = match exchange(&mut conn, path) {
            Err(e) if reused => {
                let mut fresh = open(self.addr).map_err(|e| format!("reconnect: {e}"))?;
                let retried = exchange(&mut fresh, path).map_err(|e2| format!("{e}, then {e2}"));
                conn = fresh;
                retried?
            }
            other => other.map_err(|e| format!("new connection: {e}"))?,
        };
        if !answer.1.contains("connection: close") {
            self.conn = Some(conn);
        }
        Ok(answer.0)
    }
}

#[test]
fn sigterm_closes_idle_connections_at_once_and_exits_after_the_last_request() {
    let (port, backend, admin) = (free_port(), free_port(), free_port());
    let _echo = Running::spawn(&["echo", "--listen", &format!("127.0.0.1:{backend}")]);
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "config.yaml", &config(port, backend, "/one"));
    let admin_addr: SocketAddr = ([127, 0, 0, 1], admin).into();
    let mut serve = serve_ready(dir.path(), admin_addr, "20s");
    let proxy: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_get(proxy, "/one", |c, _| c == 200);

    let mut idle = open(proxy).unwrap();
    assert_eq!(exchange(&mut idle, "/one").unwrap().0, 200);
    let mut busy = open(proxy).unwrap();
    busy.get_mut()
        .write_all(b"GET /one?delay=1500ms HTTP/1.1\r\nHost: site\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));

    sigterm(&serve);
    // The idle connection is closed long before the in-flight request ends.
    idle.get_mut()
        .set_read_timeout(Some(Duration::from_millis(900)))
        .unwrap();
    let mut rest = Vec::new();
    let closed = idle.read_to_end(&mut rest);
    assert!(closed.is_ok(), "idle connection still open: {closed:?}");
    assert!(
        serve.0.try_wait().unwrap().is_none(),
        "exited with a request in flight"
    );
    let (code, head) = read_response(&mut busy).expect("in-flight request completed");
    assert_eq!(code, 200);
    assert!(head.contains("connection: close"), "{head}");
    // Exit follows the last response, far inside the 20 s drain timeout.
    assert_eq!(exited_within(&mut serve, Duration::from_secs(5)), Some(0));
}

#[test]
fn a_second_instance_takes_over_the_port_with_no_failed_request() {
    let (port, backend) = (free_port(), free_port());
    let (admin_old, admin_new) = (free_port(), free_port());
    let _echo = Running::spawn(&["echo", "--listen", &format!("127.0.0.1:{backend}")]);
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "config.yaml", &config(port, backend, "/one"));
    let start = |admin: u16| serve_ready(dir.path(), ([127, 0, 0, 1], admin).into(), "10s");
    let mut old = start(admin_old);
    let proxy: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_get(proxy, "/one", |c, _| c == 200);

    // The client loop: sequential keep-alive requests until told to stop (bounded).
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let client = std::thread::spawn(move || {
        let mut c = Client {
            addr: proxy,
            conn: None,
        };
        let (mut ok, mut failures) = (0u32, Vec::new());
        let deadline = Instant::now() + Duration::from_secs(60);
        for _ in 0..200_000 {
            if flag.load(Ordering::Acquire) || Instant::now() > deadline {
                break;
            }
            match c.get("/one") {
                Ok(200) => ok += 1,
                other => failures.push(format!("{other:?}")),
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        (ok, failures)
    });

    std::thread::sleep(Duration::from_millis(300));
    let new_admin: SocketAddr = ([127, 0, 0, 1], admin_new).into();
    let _new = start(admin_new);
    std::thread::sleep(Duration::from_millis(500));
    sigterm(&old);
    assert_eq!(exited_within(&mut old, Duration::from_secs(10)), Some(0));
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Release);
    let (ok, failures) = client.join().unwrap();
    assert!(
        failures.is_empty(),
        "{} failed of {}: {failures:?}",
        failures.len(),
        ok as usize + failures.len()
    );
    assert!(ok > 50, "only {ok} requests");
    // The new instance served requests on the port.
    let (_, metrics) = wait_get(new_admin, "/metrics", |c, _| c == 200);
    let served: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("edgeplane_requests_total{"))
        .filter(|l| l.contains("code=\"200\"") && l.contains("route=\"HTTPRoute/default/web\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(served > 0, "the new instance served nothing:\n{metrics}");
    println!("rollout: {ok} requests, 0 failed, {served} served by the new instance");
}
