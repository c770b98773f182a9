//! Two data-plane workers (`TOKIO_WORKER_THREADS=2`) through the real binary: each worker
//! accepts on its own socket of the listener, so connections are served by both; the
//! listener's `--max-connections` counts the connections of both workers together; SIGTERM
//! lets requests in flight on either worker finish before the process exits.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::{admin_get, echo_fleet, get, route, serve_env, service, test_net, write, Conn, BASE};

/// The value of the series `series` (name and labels as exposed) in `/metrics`, 0 if absent.
async fn metric(admin: SocketAddr, series: &str) -> f64 {
    let (_, text) = admin_get(admin, "/metrics").await.expect("metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Connections accepted so far by workers 0 and 1.
async fn accepted(admin: SocketAddr) -> [f64; 2] {
    [
        metric(admin, "edgeplane_worker_connections_total{worker=\"0\"}").await,
        metric(admin, "edgeplane_worker_connections_total{worker=\"1\"}").await,
    ]
}

/// Waits (bounded) until the listener has `n` connections open.
async fn wait_open(admin: SocketAddr, proxy: SocketAddr, n: f64) {
    let series = format!("edgeplane_connections_open{{listener=\"{proxy}\"}}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let open = metric(admin, &series).await;
        if open == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{open} connections open, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn two_workers_share_a_listener_its_connection_limit_and_its_drain() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let all = format!("{BASE}{}{}", service("v1", &v1), route("r", "/", "v1"));
    write(dir.path(), "all.yaml", &all);
    let flags = ["--max-connections", "4"];
    let env = [("TOKIO_WORKER_THREADS", "2")];
    let mut server = serve_env(dir.path(), net, &flags, Stdio::inherit(), &env).await;
    let (proxy, admin) = (server.proxy, server.admin);
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(proxy, "/").await.map(|r| r.0).unwrap_or(0) != 200 {
        assert!(Instant::now() < deadline, "the route was never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_open(admin, proxy, 0.0).await;

    // New connections land on either worker's socket (the kernel hashes each connection's
    // addresses): keep one served connection of each worker. 40 tries leave both unseen with a
    // chance of 2^-39.
    let mut held: [Option<Conn>; 2] = [None, None];
    let mut before = accepted(admin).await;
    for _ in 0..40 {
        if held.iter().all(Option::is_some) {
            break;
        }
        let mut conn = Conn::open(proxy).await.expect("connect");
        assert_eq!(conn.get("/").await.expect("served").0, 200);
        let after = accepted(admin).await;
        let worker = (0..2)
            .find(|&w| after[w] > before[w])
            .expect("a worker accepted");
        assert_eq!(after[0] + after[1], before[0] + before[1] + 1.0);
        before = after;
        if held[worker].is_none() {
            held[worker] = Some(conn);
        } else {
            drop(conn);
        }
        // The next connection only opens once the dropped one is closed.
        wait_open(admin, proxy, held.iter().flatten().count() as f64).await;
    }
    let [Some(first), Some(second)] = held else {
        panic!("one worker served every connection: {before:?}");
    };

    // The limit is the listener's, across workers: with 4 open (at least one on each worker),
    // every further connection is closed at accept, whichever worker's socket takes it.
    let mut extra = Vec::new();
    for _ in 0..2 {
        let mut conn = Conn::open(proxy).await.expect("connect");
        assert_eq!(conn.get("/").await.expect("served").0, 200);
        extra.push(conn);
    }
    wait_open(admin, proxy, 4.0).await;
    let refused_series = format!("edgeplane_connections_refused_total{{listener=\"{proxy}\"}}");
    let refused_before = metric(admin, &refused_series).await;
    for _ in 0..8 {
        let mut stream = TcpStream::connect(proxy).await.expect("the kernel accepts");
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("closed at once, not served");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
    assert_eq!(metric(admin, &refused_series).await, refused_before + 8.0);
    drop(extra);
    wait_open(admin, proxy, 2.0).await;

    // SIGTERM with a request in flight on each worker: both finish, then the process exits.
    let slow = |mut conn: Conn| tokio::spawn(async move { conn.get("/slow?delay=1s").await });
    let (a, b) = (slow(first), slow(second));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = server.child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(killed.success());
    for in_flight in [a, b] {
        let (status, _) = in_flight
            .await
            .expect("join")
            .expect("finished in the drain");
        assert_eq!(status, 200);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "edgeplane did not exit after draining"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
