//! A client that sends GETs to routes that stay valid while the benchmark changes others,
//! counting answers that are not 2xx. It pauses a millisecond between requests so that it
//! does not take the CPU the measured process needs; bounded in time even if never stopped.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::support::client::{get, h1_client, send};

/// The running client.
pub struct Load {
    stop: Arc<AtomicBool>,
    task: JoinHandle<()>,
    sent: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl Load {
    /// Cycles over `hosts` (path `/`) on one keep-alive client until stopped or `limit`.
    pub fn start(addr: SocketAddr, hosts: Vec<String>, limit: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let (s, n, f, fs) = (stop.clone(), sent.clone(), failed.clone(), failures.clone());
        let task = tokio::spawn(async move {
            let client = h1_client();
            let deadline = Instant::now() + limit;
            for host in hosts.iter().cycle() {
                if s.load(Ordering::Relaxed) || Instant::now() > deadline {
                    break;
                }
                let failure = match send(&client, get(addr, host, "/")).await {
                    Ok(r) if r.status.is_success() => None,
                    Ok(r) => Some(format!("{host}: {}", r.status)),
                    Err(e) => Some(format!("{host}: {e}")),
                };
                n.fetch_add(1, Ordering::Relaxed);
                if let Some(failure) = failure {
                    f.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut v) = fs.lock() {
                        if v.len() < 10 {
                            v.push(failure);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        Self {
            stop,
            task,
            sent,
            failed,
            failures,
        }
    }

    /// Stops the client; returns (requests sent, failures, the first failures).
    pub async fn finish(self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = tokio::time::timeout(Duration::from_secs(15), self.task).await;
        let failures = self.failures.lock().map(|v| v.clone()).unwrap_or_default();
        (
            self.sent.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            failures,
        )
    }
}
