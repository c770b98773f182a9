//! An in-process Kubernetes API server for tests: real HTTP on loopback speaking the API wire
//! protocol (discovery, list, watch, get, create, update, patch, apply, delete, `/status`), so
//! the production kube client, watchers, reflectors and Lease-based election run against it
//! unchanged. Tests also reach inside: objects, write counts, injected failures, outages.
//! Creating a CustomResourceDefinition starts serving its kinds (deleting it stops), as a real
//! API server does once the CRD is established; `ApiServer::unregister` makes a kind absent.
//! Writes of the Gateway API and edgeplane.dev kinds get server-side field validation against
//! edgeplane's built-in schemas (`validation`): `fieldValidation=Strict`, kubectl's default,
//! refuses an unknown field as the API server does; the default `Warn` drops it with a
//! `Warning` header. Defaults, other schema checks and CEL rules are not applied here.
//! Gets and lists asked for `as=Table` (kubectl's server-side printing) answer a `Table` whose
//! cells take the first match of each printer column's JSONPath, as the API server prints them.

mod apply;
pub mod conversion;
pub mod discovery;
pub mod error;
pub mod http;
mod inspect;
pub mod kinds;
pub mod object;
pub mod patch;
pub mod selectors;
pub mod store;
pub mod table;
pub mod validation;
pub mod watch;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::task::{JoinHandle, JoinSet};

pub use error::ApiError;
pub use kinds::Kind;
pub use store::{Store, Target};

/// What a watch stream waits on: the store's resourceVersion after the last write, and an
/// epoch that, when bumped, ends every open watch (outages, compaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    pub rv: u64,
    pub epoch: u64,
}

/// One kind of write, as counted for "steady state writes nothing" assertions.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct WriteKey {
    /// `plural` for the core group, `plural.group` otherwise.
    pub resource: String,
    /// `create`, `update`, `patch`, `apply`, `delete` or `deletecollection`.
    pub verb: String,
    /// `""` for the main resource, `"status"` for the status subresource.
    pub subresource: String,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    pub method: String,
    pub path_and_query: String,
    pub status: u16,
}

/// A rule that makes matching requests fail with `code`, `remaining` more times.
#[derive(Debug, Clone)]
struct FailRule {
    method: Option<String>,
    path_contains: String,
    remaining: u32,
    code: u16,
}

/// State shared by the accept loop, every connection and the test.
pub struct Shared {
    store: Mutex<Store>,
    ticks: tokio::sync::watch::Sender<Tick>,
    faults: Mutex<(Vec<FailRule>, bool)>,
    writes: Mutex<BTreeMap<WriteKey, u64>>,
    requests: Mutex<Vec<RequestRecord>>,
    bookmark_interval: Mutex<Duration>,
    /// `namespace/name` of a Service -> where its webhook listens (conversion webhooks).
    services: Mutex<BTreeMap<String, SocketAddr>>,
    /// Conversion reviews sent to webhooks so far.
    conversions: std::sync::atomic::AtomicU64,
}

const REQUEST_LOG_LIMIT: usize = 10_000;

impl Shared {
    fn new() -> Shared {
        let (ticks, _) = tokio::sync::watch::channel(Tick { rv: 1, epoch: 0 });
        Shared {
            store: Mutex::new(Store::new()),
            ticks,
            faults: Mutex::new((Vec::new(), false)),
            writes: Mutex::new(BTreeMap::new()),
            requests: Mutex::new(Vec::new()),
            bookmark_interval: Mutex::new(Duration::from_secs(2)),
            services: Mutex::new(BTreeMap::new()),
            conversions: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The store, locked. Never held across an await.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the store and wakes the watches when it wrote something.
    pub fn write<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let (out, rv) = {
            let mut store = self.store();
            let out = f(&mut store);
            (out, store.current_rv())
        };
        self.ticks.send_if_modified(|t| {
            let changed = t.rv != rv;
            t.rv = rv;
            changed
        });
        out
    }

    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Tick> {
        self.ticks.subscribe()
    }

    /// Ends every open watch stream.
    pub fn close_watches(&self) {
        self.ticks.send_modify(|t| t.epoch += 1);
    }

    pub fn bookmark_interval(&self) -> Duration {
        *self
            .bookmark_interval
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The injected failure code for this request, if any (consumes one use of a rule).
    fn fault(&self, method: &str, path: &str) -> Option<u16> {
        let mut faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        if faults.1 {
            return Some(500);
        }
        let rule = faults.0.iter_mut().find(|r| {
            r.remaining > 0
                && r.method
                    .as_deref()
                    .is_none_or(|m| m.eq_ignore_ascii_case(method))
                && path.contains(&r.path_contains)
        })?;
        rule.remaining -= 1;
        Some(rule.code)
    }

    /// Where the Service `ns/name` is reached (as the cluster network would route it).
    pub fn service_address(&self, ns: &str, name: &str) -> Option<SocketAddr> {
        self.services
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&format!("{ns}/{name}"))
            .copied()
    }

    fn count_conversion(&self) {
        self.conversions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn count_write(&self, kind: &Kind, verb: &str, subresource: &str) {
        let key = WriteKey {
            resource: kind.resource(),
            verb: verb.to_string(),
            subresource: subresource.to_string(),
        };
        *self
            .writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default() += 1;
    }

    fn log_request(&self, record: RequestRecord) {
        let mut log = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() >= REQUEST_LOG_LIMIT {
            log.remove(0);
        }
        log.push(record);
    }
}

/// A running emulator. Dropping it stops the server.
pub struct ApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl ApiServer {
    /// Starts on a random loopback address.
    pub async fn start() -> ApiServer {
        let listener = super::net::bind_loopback().await;
        Self::serve(listener, Arc::new(Shared::new()))
    }

    /// Starts on `addr` (a loopback address, port 0 for any).
    pub async fn start_on(addr: SocketAddr) -> std::io::Result<ApiServer> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        Ok(Self::serve(listener, Arc::new(Shared::new())))
    }

    fn serve(listener: tokio::net::TcpListener, shared: Arc<Shared>) -> ApiServer {
        let addr = listener
            .local_addr()
            .expect("bound listener has an address");
        let task = spawn_accept(listener, shared.clone());
        ApiServer {
            shared,
            addr,
            task: Mutex::new(Some(task)),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ip:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The shared state (store, ticks) for helpers that need more than the methods below.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// A client configuration for this server: plain HTTP, default namespace `default`.
    pub fn config(&self) -> kube::Config {
        let uri: ::http::Uri = self.url().parse().expect("emulator URL parses");
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".to_string();
        config.connect_timeout = Some(Duration::from_secs(2));
        config
    }

    /// A production `kube::Client` talking to this server.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config()).expect("kube client for the emulator")
    }

    /// The kubeconfig a process needs to reach this server (for `KUBECONFIG`).
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: emulator\n  cluster:\n    server: {}\n\
             users:\n- name: emulator\n  user: {{}}\ncontexts:\n- name: emulator\n  context:\n    \
             cluster: emulator\n    user: emulator\n    namespace: default\n\
             current-context: emulator\n",
            self.url()
        )
    }

    /// Writes [`Self::kubeconfig_yaml`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml())
    }

    /// Stops listening and drops every open connection (watches end abruptly). Objects stay.
    pub async fn stop(&self) {
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
    }

    /// Listens again on the same address, with the same objects and history.
    pub async fn restart(&self) -> std::io::Result<()> {
        self.stop().await;
        let deadline = Instant::now() + Duration::from_secs(5);
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let task = spawn_accept(listener, self.shared.clone());
        *self.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        Ok(())
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(task) = self
            .task
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

/// Accepts connections until aborted; aborting drops the `JoinSet` and with it every open
/// connection.
fn spawn_accept(listener: tokio::net::TcpListener, shared: Arc<Shared>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut conns = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        conns.spawn(http::serve_connection(stream, shared.clone()));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    })
}
