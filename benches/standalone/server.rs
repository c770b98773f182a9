//! The `edgeplane serve --config-dir` process the standalone benchmark drives: its start and
//! readiness, its resident memory (from `/proc/PID/status`) and its rebuild metric. Loopback
//! only; every wait is bounded.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::manifests::HTTP_PORT;
use crate::support::client::{get, send, TestClient};
use crate::support::net::{free_addr, loopback_ip};

/// A running `edgeplane serve --config-dir`; killed when dropped.
pub struct Server {
    child: Child,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts the binary (or the one `STANDALONE_BIN` names) on `dir` on a loopback IP of
    /// its own; its log goes to stderr when `STANDALONE_LOG` is set, else nowhere.
    pub fn start(dir: &Path) -> std::io::Result<Self> {
        let bind = loopback_ip();
        let admin = SocketAddr::new(bind, free_addr().port());
        let log = if std::env::var_os("STANDALONE_LOG").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        };
        // `STANDALONE_BIN` measures another build of the binary (to compare two versions).
        let bin = std::env::var_os("STANDALONE_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_edgeplane").into());
        let child = Command::new(bin)
            .args(["serve", "--config-dir"])
            .arg(dir)
            .args(["--bind-address", &bind.to_string()])
            .args(["--admin-addr", &admin.to_string()])
            .args(["--dashboard-addr", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        Ok(Self {
            child,
            proxy: SocketAddr::new(bind, HTTP_PORT),
            admin,
        })
    }

    /// Waits (at most `limit`) until `/readyz` answers 200.
    pub async fn ready(&self, client: &TestClient, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let host = self.admin.to_string();
            if matches!(send(client, get(self.admin, &host, "/readyz")).await, Ok(r) if r.status == 200)
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// Resident memory of the process in KiB (`VmRSS` of `/proc/PID/status`).
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// `(count, sum in seconds)` of successful rebuilds, from `/metrics`.
    pub async fn rebuilds(&self, client: &TestClient) -> Option<(u64, f64)> {
        let host = self.admin.to_string();
        let reply = send(client, get(self.admin, &host, "/metrics"))
            .await
            .ok()?;
        let text = String::from_utf8_lossy(&reply.body);
        let value = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name) && l.contains("result=\"ok\""))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<f64>().ok())
        };
        let count = value("edgeplane_rebuild_duration_seconds_count")?;
        let sum = value("edgeplane_rebuild_duration_seconds_sum")?;
        Some((count as u64, sum))
    }
}

/// Polls GET `host` `path` until an answer 200 from echo pod `pod`, until `deadline`; false
/// when it never came.
pub async fn until_served(
    client: &TestClient,
    addr: SocketAddr,
    (host, path): (&str, &str),
    pod: &str,
    deadline: Instant,
) -> bool {
    while Instant::now() < deadline {
        if let Ok(r) = send(client, get(addr, host, path)).await {
            if r.status == 200 && r.pod().as_deref() == Some(pod) {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    false
}

/// The machine's 1-minute load average (`/proc/loadavg`), printed beside the figures it
/// disturbs; `?` where it cannot be read.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}
