//! The request tracer's tap: `edgeplane trace` (through the dashboard's `/api/trace`)
//! subscribes with a filter (host, path prefix, headers), and the next requests that match
//! are recorded with their way through the proxy: the listener, the rules tried and why they
//! did not match, the rule's filters and policies, the backends and the endpoint picked, the
//! timings and the status. A request pays one atomic load while nobody watches.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, HeaderName, Uri};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::proxy::upstream::trail::Attempt;
use crate::table::explain::Considered;

/// Which requests a subscription wants; every given part must hold.
#[derive(Debug, Clone, Default)]
pub struct TapFilter {
    /// The request's host (without port), case-insensitively.
    pub host: Option<String>,
    /// A prefix of the request's path.
    pub path_prefix: Option<String>,
    /// Headers the request carries with exactly these values.
    pub headers: Vec<(HeaderName, String)>,
}

impl TapFilter {
    fn wants(&self, host: &str, uri: &Uri, headers: &HeaderMap) -> bool {
        self.host
            .as_ref()
            .is_none_or(|h| h.eq_ignore_ascii_case(host))
            && self
                .path_prefix
                .as_ref()
                .is_none_or(|p| uri.path().starts_with(p.as_str()))
            && self.headers.iter().all(|(n, v)| {
                headers
                    .get_all(n)
                    .iter()
                    .any(|x| x.as_bytes() == v.as_bytes())
            })
    }
}

/// One traced request, as `edgeplane trace` prints it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TapRecord {
    pub time: String,
    pub client: IpAddr,
    pub method: String,
    pub host: String,
    pub path: String,
    pub protocol: String,
    /// The socket that accepted the request.
    pub listener: SocketAddr,
    /// The Gateway listeners bound on that socket.
    pub gateways: Vec<String>,
    /// The rules checked, in routing's order, up to the one that matched.
    pub considered: Vec<Considered>,
    /// `Kind/namespace/name` of the route that answered, if one did.
    pub route: Option<String>,
    pub rule: Option<String>,
    /// The matched rule's filters and TrafficPolicy settings, as `/debug/config` shows them.
    pub filters: serde_json::Value,
    /// The TrafficPolicy settings of the Gateway and listener the host is served for.
    pub listener_policy: serde_json::Value,
    /// The rule's backends with their weights and endpoint counts.
    pub backends: Vec<TapBackend>,
    /// The upstream attempts: endpoint, why it was picked, how it ended, whether it was tried
    /// again.
    #[serde(default)]
    pub attempts: Vec<Attempt>,
    /// The endpoint that answered.
    pub endpoint: Option<SocketAddr>,
    pub status: u16,
    /// Why the proxy answered itself with an error (a policy refusal, no endpoint, ...).
    pub error: Option<String>,
    pub request_id: String,
    pub trace_id: String,
    /// Microseconds from the request head to a rule and its checks done.
    pub routing_us: u64,
    /// Microseconds from there to the response head (the upstream exchange and retries).
    pub upstream_us: u64,
    pub total_us: u64,
}

/// A backend of the matched rule.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TapBackend {
    /// `namespace/service:port`, or why the backendRef is invalid.
    pub backend: String,
    pub weight: u32,
    pub ready_endpoints: usize,
    pub terminating_endpoints: usize,
    /// The endpoints outlier detection has ejected now.
    #[serde(default)]
    pub ejected_endpoints: Vec<SocketAddr>,
    /// How an endpoint is picked (`/debug/config`'s balance setting).
    pub balance: serde_json::Value,
    /// Set on the backendRef the request went to: how it was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub picked: Option<String>,
}

struct Subscriber {
    id: u64,
    filter: TapFilter,
    /// Records it still takes: a subscriber whose reader stalls holds at most its count.
    remaining: usize,
    records: mpsc::UnboundedSender<TapRecord>,
}

/// The subscriptions of the process.
#[derive(Default)]
pub struct Tap {
    watching: AtomicUsize,
    next_id: AtomicU64,
    subscribers: Mutex<Vec<Subscriber>>,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap")
            .field("watching", &self.watching.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A subscription: its records arrive on [`Subscription::next`]; dropping it ends it.
pub struct Subscription {
    tap: Arc<Tap>,
    id: u64,
    records: mpsc::UnboundedReceiver<TapRecord>,
}

impl Subscription {
    /// The next matching request's record, or `None` after `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<TapRecord> {
        tokio::time::timeout(wait, self.records.recv())
            .await
            .ok()
            .flatten()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Ok(mut subs) = self.tap.subscribers.lock() {
            subs.retain(|s| s.id != self.id);
            self.tap.watching.store(subs.len(), Ordering::Relaxed);
        }
    }
}

impl Tap {
    /// Subscribes to the next `count` requests `filter` wants.
    pub fn subscribe(self: &Arc<Self>, filter: TapFilter, count: usize) -> Subscription {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut subs) = self.subscribers.lock() {
            subs.push(Subscriber {
                id,
                filter,
                remaining: count,
                records: tx,
            });
            self.watching.store(subs.len(), Ordering::Relaxed);
        }
        Subscription {
            tap: self.clone(),
            id,
            records: rx,
        }
    }

    /// True when a subscription wants a request with this head (one atomic load when none is
    /// open).
    pub(crate) fn wants(&self, uri: &Uri, headers: &HeaderMap) -> bool {
        if self.watching.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let host = request_host(uri, headers);
        self.subscribers
            .lock()
            .is_ok_and(|subs| subs.iter().any(|s| s.filter.wants(&host, uri, headers)))
    }

    /// Hands `record` to every subscription that wants it.
    pub(crate) fn publish(&self, record: &TapRecord, uri: &Uri, headers: &HeaderMap) {
        let host = request_host(uri, headers);
        if let Ok(mut subs) = self.subscribers.lock() {
            let wanting = subs
                .iter_mut()
                .filter(|s| s.remaining > 0 && s.filter.wants(&host, uri, headers));
            for s in wanting {
                s.remaining -= 1;
                let _ = s.records.send(record.clone());
            }
        }
    }
}

/// The request's host without port, lower-cased: `Host`, else the URI's authority.
pub(crate) fn request_host(uri: &Uri, headers: &HeaderMap) -> String {
    let raw = headers
        .get(http::header::HOST)
        .map(|h| h.as_bytes())
        .or_else(|| uri.authority().map(|a| a.as_str().as_bytes()))
        .unwrap_or(b"");
    crate::request::host::parse_authority(raw)
        .map(|a| a.routing_name())
        .unwrap_or_default()
}
