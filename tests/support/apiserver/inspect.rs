//! What tests do to a running emulator besides HTTP: outages and injected failures, history
//! compaction, registering kinds, reading and writing objects directly, write counts, the
//! request log and bounded waits.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use edgeplane::kinds::KindSet;
use serde_json::Value;

use super::{ApiError, ApiServer, FailRule, Kind, RequestRecord, Target, WriteKey};

impl ApiServer {
    /// While `true`, every request answers 500 and open watches are closed. (Not 503: kube's
    /// client retries 429, 503 and 504 up to 15 times with backoff, hiding a short outage.)
    pub fn set_unavailable(&self, unavailable: bool) {
        self.shared
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1 = unavailable;
        if unavailable {
            self.shared.close_watches();
        }
    }

    /// The next `count` requests whose path contains `path_contains` (and whose method is
    /// `method`, when given) answer `code` with a `Status` body.
    pub fn fail_requests(&self, method: Option<&str>, path_contains: &str, count: u32, code: u16) {
        self.shared
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .push(FailRule {
                method: method.map(str::to_string),
                path_contains: path_contains.to_string(),
                remaining: count,
                code,
            });
    }

    /// Adds a served kind (for example an `edgeplane.dev` CRD).
    pub fn register(&self, kind: Kind) {
        self.shared.store().kinds.register(kind);
    }

    /// Stops serving every version of `resource` (`plural.group`), as in a cluster where its
    /// CRD is not installed.
    pub fn unregister(&self, resource: &str) {
        self.shared.store().kinds.unregister(resource);
    }

    /// Routes the Service `ns/name` (a conversion webhook's `clientConfig.service`) to `addr`.
    pub fn set_service_address(&self, ns: &str, name: &str, addr: std::net::SocketAddr) {
        self.shared
            .services
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(format!("{ns}/{name}"), addr);
    }

    /// Conversion reviews sent to webhooks so far (successful or not).
    pub fn conversions(&self) -> u64 {
        self.shared
            .conversions
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Serves every kind a declaration reads (a test's own `edgeplane::kinds!` set).
    pub fn register_declared<S: KindSet>(&self) {
        for kind in super::kinds::declared::<S>() {
            self.register(kind);
        }
    }

    /// Forgets the event history and closes open watches: watches resuming from any earlier
    /// resourceVersion get `410 Expired`, so watchers relist.
    pub fn compact_history(&self) {
        self.shared.store().compact();
        self.shared.close_watches();
    }

    /// Keeps at most `limit` events; older resourceVersions then expire.
    pub fn set_history_limit(&self, limit: usize) {
        self.shared.store().set_history_limit(limit);
    }

    /// How often watches that asked for bookmarks get one (default 2 s).
    pub fn set_bookmark_interval(&self, interval: Duration) {
        *self
            .shared
            .bookmark_interval
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = interval;
    }

    /// Ends every open watch stream; clients reconnect from their last resourceVersion.
    pub fn close_watches(&self) {
        self.shared.close_watches();
    }

    pub fn resource_version(&self) -> u64 {
        self.shared.store().current_rv()
    }

    fn kind(&self, resource: &str) -> Kind {
        self.shared
            .store()
            .kinds
            .find_resource(resource)
            .unwrap_or_else(|| panic!("unknown resource {resource}"))
    }

    /// Every object of `resource` (`plural` or `plural.group`) in every namespace.
    pub fn objects(&self, resource: &str) -> Vec<Value> {
        let kind = self.kind(resource);
        self.shared.store().list(&kind, None)
    }

    /// One object; `ns` is ignored for cluster-scoped kinds.
    pub fn object(&self, resource: &str, ns: &str, name: &str) -> Option<Value> {
        let kind = self.kind(resource);
        let ns = if kind.namespaced { ns } else { "" };
        self.shared.store().get(&kind, ns, name).ok()
    }

    /// Creates or replaces an object as the cluster would (status included), bypassing the
    /// HTTP layer and the write counts. Panics on an invalid object: it is test set-up.
    pub fn insert(&self, obj: Value) -> Value {
        self.shared.write(|store| {
            let kind = store
                .kinds
                .kind_of(&obj)
                .unwrap_or_else(|| panic!("unknown apiVersion/kind in {obj}"));
            let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str);
            let ns = if kind.namespaced {
                ns.unwrap_or("default")
            } else {
                ""
            }
            .to_string();
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let mut main = obj.clone();
            if let Some(m) = main.pointer_mut("/metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
            let stored = match store.get(&kind, &ns, &name) {
                Ok(_) => store.update(&kind, &ns, &name, main, Target::Main),
                Err(_) => store.create(&kind, &ns, main),
            }
            .unwrap_or_else(|e| panic!("insert {obj}: {e}"));
            match obj.get("status") {
                Some(_) if kind.status => {
                    let name = stored
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let mut status = obj.clone();
                    if let Some(m) = status
                        .pointer_mut("/metadata")
                        .and_then(Value::as_object_mut)
                    {
                        m.remove("resourceVersion");
                        m.insert("name".into(), Value::String(name.clone()));
                    }
                    store
                        .update(&kind, &ns, &name, status, Target::Status)
                        .unwrap_or_else(|e| panic!("insert status {obj}: {e}"))
                }
                _ => stored,
            }
        })
    }

    /// Deletes an object as a client DELETE would (finalizers honoured), without counting it.
    pub fn remove(&self, resource: &str, ns: &str, name: &str) -> Result<Value, ApiError> {
        let kind = self.kind(resource);
        let ns = if kind.namespaced { ns } else { "" };
        self.shared
            .write(|store| store.delete(&kind, ns, name, &Value::Null))
    }

    /// Removes an object so that no watch sees the DELETED event: the removal and a history
    /// compaction happen under one lock, then open watches close. Watchers learn of the
    /// deletion only by relisting after `410 Expired` (a delete missed during an outage).
    pub fn remove_unseen(&self, resource: &str, ns: &str, name: &str) -> Result<Value, ApiError> {
        let kind = self.kind(resource);
        let ns = if kind.namespaced { ns } else { "" };
        let removed = self.shared.write(|store| {
            let mut obj = store.get(&kind, ns, name)?;
            if let Some(m) = obj.pointer_mut("/metadata").and_then(Value::as_object_mut) {
                m.remove("finalizers");
            }
            store.update(&kind, ns, name, obj, Target::Main)?;
            let removed = store.delete(&kind, ns, name, &Value::Null);
            store.compact();
            removed
        });
        self.shared.close_watches();
        removed
    }

    /// Write requests received so far, by resource, verb and subresource (failed ones too).
    pub fn writes(&self) -> BTreeMap<WriteKey, u64> {
        self.shared
            .writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Write requests to `resource` (`plural` or `plural.group`) with `verb` (`None`: any)
    /// on `subresource` (`""` main, `"status"`).
    pub fn write_count(&self, resource: &str, verb: Option<&str>, subresource: &str) -> u64 {
        let resource = self.kind(resource).resource();
        self.writes()
            .iter()
            .filter(|(k, _)| {
                k.resource == resource
                    && verb.is_none_or(|v| v == k.verb)
                    && k.subresource == subresource
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// Every write request received so far.
    pub fn total_writes(&self) -> u64 {
        self.writes().values().sum()
    }

    /// The last requests (at most 10,000), oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits until `cond` holds, re-checking after every write and at least every 50 ms;
    /// `false` when `timeout` passes first.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut cond: impl FnMut(&ApiServer) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        let mut ticks = self.shared.subscribe();
        loop {
            if cond(self) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let wait = (deadline - now).min(Duration::from_millis(50));
            let _ = tokio::time::timeout(wait, ticks.changed()).await;
        }
    }
}
