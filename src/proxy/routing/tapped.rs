//! The request tracer's record of one request ([`crate::proxy::tap`]): what the request head
//! was, taken when a subscription wants it, and what routing did with it, put together when the
//! response head is ready. Only requests a tracer waits for pay for any of this.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use http::{HeaderMap, Method, Request, Uri, Version};

use crate::proxy::tap::{request_host, Tap, TapBackend, TapRecord};
use crate::proxy::upstream::balance::Backends;
use crate::proxy::upstream::trail::Attempt;
use crate::table::explain::considered;
use crate::table::{BackendTarget, RequestView, RouteRule, RouteTable};

/// A traced request's head, kept until its end.
pub(crate) struct Tapped {
    time: jiff::Timestamp,
    start: Instant,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    version: Version,
    client: IpAddr,
}

/// What routing did with a traced request.
pub(crate) struct Way<'a> {
    pub table: &'a RouteTable,
    pub listener: SocketAddr,
    pub rule: Option<&'a RouteRule>,
    /// The index of the rule's backendRef the request went to.
    pub backend: Option<usize>,
    /// Endpoint health (which endpoints are ejected).
    pub balancer: &'a Backends,
    /// The upstream attempts, in order.
    pub attempts: Vec<Attempt>,
    pub endpoint: Option<SocketAddr>,
    pub status: u16,
    pub error: Option<String>,
    pub request_id: &'a str,
    pub trace_id: u128,
    /// When routing had chosen (or refused).
    pub routed: Instant,
}

impl Tapped {
    /// The head of `req` when a subscription of `tap` wants it.
    pub(crate) fn begin<B>(tap: &Tap, req: &Request<B>, start: Instant) -> Option<Self> {
        tap.wants(req.uri(), req.headers()).then(|| Self {
            time: jiff::Timestamp::now(),
            start,
            method: req.method().clone(),
            uri: req.uri().clone(),
            headers: req.headers().clone(),
            version: req.version(),
            client: IpAddr::from([0, 0, 0, 0]),
        })
    }

    /// The client address the trusted forwarded headers name.
    pub(crate) fn client(self, client: IpAddr) -> Self {
        Self { client, ..self }
    }

    /// Hands the request's record to the subscriptions that want it.
    pub(crate) fn finish(self, tap: &Tap, way: Way<'_>) {
        let host = request_host(&self.uri, &self.headers);
        let socket = way.table.listener(&way.listener);
        let view = RequestView {
            host: &host,
            path: self.uri.path(),
            query: self.uri.query(),
            method: &self.method,
            headers: &self.headers,
        };
        let record = TapRecord {
            time: self.time.to_string(),
            client: self.client,
            method: self.method.to_string(),
            host: host.clone(),
            path: self
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_owned(),
            protocol: format!("{:?}", self.version),
            listener: way.listener,
            gateways: socket
                .map(|l| l.sources.iter().map(ToString::to_string).collect())
                .unwrap_or_default(),
            considered: socket.map(|l| considered(l, &view)).unwrap_or_default(),
            route: way
                .rule
                .map(|r| format!("{}/{}", r.route.kind(), r.route.label())),
            rule: way.rule.map(|r| match &r.rule_name {
                Some(name) => name.to_string(),
                None => r.rule_index.to_string(),
            }),
            filters: way
                .rule
                .and_then(|r| serde_json::to_value(&*r.filters).ok())
                .unwrap_or_default(),
            listener_policy: socket
                .and_then(|l| l.hosts.candidates(&host).next())
                .and_then(|h| h.policy.as_ref())
                .and_then(|p| serde_json::to_value(&**p).ok())
                .unwrap_or_default(),
            backends: way
                .rule
                .map(|r| backends(r, way.backend, way.balancer))
                .unwrap_or_default(),
            attempts: way.attempts,
            endpoint: way.endpoint,
            status: way.status,
            error: way.error,
            request_id: way.request_id.to_owned(),
            trace_id: format!("{:032x}", way.trace_id),
            routing_us: micros(way.routed.saturating_duration_since(self.start)),
            upstream_us: micros(way.routed.elapsed()),
            total_us: micros(self.start.elapsed()),
        };
        tap.publish(&record, &self.uri, &self.headers);
    }
}

fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The rule's backends as the tracer shows them, `picked` marking the one the request went to
/// (and how: by weight, or bound by the session).
fn backends(rule: &RouteRule, picked: Option<usize>, balancer: &Backends) -> Vec<TapBackend> {
    let ejected = balancer.ejected();
    let total: u32 = rule.backends.backends.iter().map(|b| b.weight).sum();
    let how = match (&rule.filters.session, rule.backends.backends.len()) {
        (Some(_), _) => "session, else by weight",
        (None, 1) => "the only backendRef",
        (None, _) => "by weight",
    };
    rule.backends
        .backends
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut shown = match &b.target {
                BackendTarget::Service(s) => TapBackend {
                    backend: format!(
                        "{}/{}:{}",
                        s.service.namespace, s.service.name, s.service.port
                    ),
                    weight: b.weight,
                    ready_endpoints: s.endpoints.len(),
                    terminating_endpoints: s.terminating.len(),
                    ejected_endpoints: (s.endpoints.iter().chain(&s.terminating))
                        .filter(|a| ejected.binary_search(a).is_ok())
                        .copied()
                        .collect(),
                    balance: serde_json::to_value(&s.balance).unwrap_or_default(),
                    picked: None,
                },
                BackendTarget::Invalid { reason } => TapBackend {
                    backend: format!("invalid: {reason}"),
                    weight: b.weight,
                    ready_endpoints: 0,
                    terminating_endpoints: 0,
                    ejected_endpoints: Vec::new(),
                    balance: serde_json::Value::Null,
                    picked: None,
                },
            };
            if picked == Some(i) {
                shown.picked = Some(format!("{how} ({} of {total})", b.weight));
            }
            shown
        })
        .collect()
}
