//! A standalone stack in-process, wired as `serve --config-dir` wires it: the file provider
//! watching a temporary directory, the reconcile loop and the proxy on a loopback IP of the
//! test's own. Plus manifest builders and a continuous client that counts failures.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgeplane::admission::builtin;
use edgeplane::metrics::Metrics;
use edgeplane::provider::file::{watch_dir, ConfigDir, DirWatcher};
use edgeplane::proxy::Proxy;
use edgeplane::reconcile::{Published, ReconcileOptions, Reconciler};
use edgeplane::translate::DEFAULT_CONTROLLER_NAME;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::support::client::{get, h1_client, send};
use crate::support::net::loopback_ip;
use crate::support::proxy::test_options;

/// The HTTP listener port of the test Gateway (above 1024: the suite runs unprivileged).
pub const HTTP_PORT: u16 = 8080;
/// The HTTPS listener port of the test Gateway.
pub const HTTPS_PORT: u16 = 8443;

pub struct Standalone {
    pub dir: tempfile::TempDir,
    pub bind: IpAddr,
    pub published: Arc<Published>,
    pub proxy: Arc<Proxy>,
    _watcher: DirWatcher,
    reconcile: JoinHandle<()>,
}

impl Standalone {
    /// Starts on the files already written in `dir`; waits for the first table.
    pub async fn start(dir: tempfile::TempDir) -> Self {
        let bind = loopback_ip();
        let metrics = Metrics::new();
        let mut config = ConfigDir::new(dir.path(), builtin::crds());
        let loaded = config.load().expect("config dir loads");
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        let (tx, rx) = watch::channel(Arc::new(loaded.snapshot));
        let watcher = watch_dir(config, tx, metrics.clone()).expect("watch");
        let published = Published::new(metrics.clone());
        let proxy = Proxy::new(published.shared_table(), metrics, test_options());
        let reconciler = Reconciler::new(
            published.clone(),
            Some(proxy.clone()),
            ReconcileOptions {
                ingress: Default::default(),
                controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
                bind_address: bind,
                port_map: Default::default(),
                sources: Default::default(),
                capabilities: edgeplane::translate::Capabilities::STANDALONE,
            },
        );
        let reconcile = tokio::spawn(reconciler.run(rx));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !published.is_ready() {
            assert!(Instant::now() < deadline, "no table published");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Self {
            dir,
            bind,
            published,
            proxy,
            _watcher: watcher,
            reconcile,
        }
    }

    pub fn addr(&self, port: u16) -> SocketAddr {
        SocketAddr::new(self.bind, port)
    }

    pub fn generation(&self) -> u64 {
        self.published.table().generation
    }

    /// Waits (bounded) until a table newer than `generation` is live.
    pub async fn wait_past(&self, generation: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.generation() <= generation {
            assert!(Instant::now() < deadline, "no new table after a change");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Polls until GET `host` `path` answers `status`; bounded.
    pub async fn wait_status(&self, host: &str, path: &str, status: u16) {
        let client = h1_client();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = send(&client, get(self.addr(HTTP_PORT), host, path))
                .await
                .map(|r| r.status.as_u16());
            if got.as_ref().ok() == Some(&status) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{host}{path}: wanted {status}, last {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub async fn stop(self) {
        self.reconcile.abort();
        self.proxy.shutdown().await;
    }
}

/// Writes `text` in place (truncate, write, close).
pub fn write(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).expect("write manifest");
}

/// Writes `text` atomically (temp file + rename), as deployment tools do.
pub fn write_atomic(dir: &Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).expect("write manifest");
    std::fs::rename(&tmp, dir.join(file)).expect("rename manifest");
}

/// GatewayClass `edge` and Gateway `gw` with an HTTP listener, and an HTTPS listener for
/// `*.secure.example` with Secret `cert` when `https`.
pub fn gateway(https: bool) -> String {
    let tls = if https {
        format!(
            "  - name: https\n    port: {HTTPS_PORT}\n    protocol: HTTPS\n    hostname: '*.secure.example'\n    tls: {{certificateRefs: [{{name: cert}}]}}\n"
        )
    } else {
        String::new()
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: edge}}\nspec: {{controllerName: {DEFAULT_CONTROLLER_NAME}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw}}\nspec:\n  gatewayClassName: edge\n  listeners:\n  - {{name: http, port: {HTTP_PORT}, protocol: HTTP}}\n{tls}"
    )
}

/// A Service `name` (port 80, named `http`) with one EndpointSlice per endpoint.
pub fn service(name: &str, endpoints: &[SocketAddr]) -> String {
    let mut out = format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec: {{ports: [{{name: http, port: 80}}]}}\n"
    );
    for e in endpoints {
        out.push_str(&format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-{port}-{ip}\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: http, port: {port}}}]\nendpoints: [{{addresses: ['{ip}'], conditions: {{ready: true}}}}]\n",
            port = e.port(),
            ip = e.ip(),
        ));
    }
    out
}

/// A route `name` for `host` sending PathPrefix `path` to Service `backend`.
pub fn route(name: &str, host: &str, path: &str, backend: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: ['{host}']\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: '{path}'}}}}]\n    backendRefs: [{{name: {backend}, port: 80}}]\n"
    )
}

/// Clients sending GETs back to back until stopped, counting answers and failures.
pub struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
    pub sent: Arc<AtomicU64>,
    pub failed: Arc<AtomicU64>,
    failures: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Load {
    /// One client task per `(host, path)`, each on its own keep-alive connection pool.
    pub fn start(addr: SocketAddr, targets: &[(&str, &str)]) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
        let tasks = targets
            .iter()
            .map(|(host, path)| {
                let (host, path) = (host.to_string(), path.to_string());
                let (stop, sent, failed, failures) =
                    (stop.clone(), sent.clone(), failed.clone(), failures.clone());
                tokio::spawn(async move {
                    let client = h1_client();
                    // Bounded even if nobody stops it.
                    let deadline = Instant::now() + Duration::from_secs(120);
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        let r = send(&client, get(addr, &host, &path)).await;
                        sent.fetch_add(1, Ordering::Relaxed);
                        let failure = match r {
                            Ok(r) if r.status.is_success() => None,
                            Ok(r) => Some(format!("{host}{path}: {} {:?}", r.status, r.body)),
                            Err(e) => Some(format!("{host}{path}: {e}")),
                        };
                        if let Some(f) = failure {
                            failed.fetch_add(1, Ordering::Relaxed);
                            if let Ok(mut v) = failures.lock() {
                                if v.len() < 10 {
                                    v.push(f);
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        Self {
            stop,
            tasks,
            sent,
            failed,
            failures,
        }
    }

    /// Stops the clients; returns (requests sent, failures, the first failures).
    pub async fn finish(self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(15), t).await;
        }
        let failures = self.failures.lock().map(|v| v.clone()).unwrap_or_default();
        (
            self.sent.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            failures,
        )
    }
}
