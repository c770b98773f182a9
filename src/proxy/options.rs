//! The data plane's timeouts and limits: one typed struct, its defaults and why each is what it
//! is. The command line fills it (`cli::proxy_args`); tests set short values.

use std::time::Duration;

use crate::proxy::access_log::{AccessSink, LogSpec};
use crate::proxy::body::MinRate;
use crate::proxy::policy::HashLimits;
use crate::proxy::trusted::TrustedProxies;
use crate::proxy::upstream::balance::{BreakerLimits, OutlierOptions};
use crate::proxy::upstream::retry::BudgetLimits;
use crate::request::PathPolicy;

/// Timeouts and limits of the data plane, one per phase of a connection and of a request.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// Time a new connection has to finish everything before HTTP: the TLS handshake on HTTPS
    /// sockets, the first bytes that tell HTTP/1.1 from HTTP/2, and for HTTP/2 the client
    /// preface with its SETTINGS frame. 10 s: a real client needs a round trip or two; a
    /// client that sends one byte of the preface and stops is closed after this.
    pub handshake_timeout: Duration,
    /// Time an HTTP/1.1 client has to send a complete request head (slowloris guard). hyper's
    /// timer starts when the connection waits for a head, so it also bounds a silent keep-alive
    /// connection. 10 s, like a browser's worst case on a slow link with room to spare.
    pub header_read_timeout: Duration,
    /// A request body that delivers no bytes for this long is aborted: 408 when no response head
    /// was sent yet, else the stream is reset; its upstream connection is not reused. 30 s:
    /// uploads on slow links pause, but not for half a minute.
    pub body_idle_timeout: Duration,
    /// The slowest a request body may arrive once the grace period is over, averaged over the
    /// time spent waiting for it; slower is 408. 240 B/s after 5 s, Kestrel's figures: a
    /// phone on a bad link sends far faster, a client that trickles a byte before each idle
    /// timeout does not. gRPC requests are exempt (streams pause between messages).
    pub min_body_rate: MinRate,
    /// Longest request target (path and query) in bytes; longer is 414. 8 KiB, nginx's
    /// default: it bounds the work of normalizing and matching a path (regular expressions run
    /// in time linear in the input) and what backends are sent.
    pub max_request_target: usize,
    /// Upstream requests one client connection may have in flight at once (each holds an
    /// upstream connection); its further requests wait for one of them to finish. 64: an
    /// HTTP/2 client's 256 streams cannot open 256 upstream connections, yet a page's burst of
    /// requests is hardly slowed.
    pub max_upstream_per_client: usize,
    /// Longest wait for an upstream response head when the rule sets no shorter
    /// `timeouts.request` / `timeouts.backendRequest`; answered 504. 60 s: generous for slow
    /// backends, yet a hung backend cannot hold a connection forever.
    pub upstream_response_timeout: Duration,
    /// A connection with no request in flight for this long is closed: HTTP/1.1 keep-alive
    /// connections, and HTTP/2 connections without streams (GOAWAY first). 60 s.
    pub idle_timeout: Duration,
    /// Interval of HTTP/2 keep-alive PINGs to clients. 30 s.
    pub http2_keepalive_interval: Duration,
    /// A PING unanswered for this long closes the HTTP/2 connection (a vanished peer). 10 s.
    pub http2_keepalive_timeout: Duration,
    /// Streams one HTTP/2 client may have open at once. 256.
    pub http2_max_concurrent_streams: u32,
    /// Open connections per listener address (all workers' sockets together); over it a new
    /// connection is accepted and closed at once, existing ones are served. 10,000: below the usual file descriptor limits.
    pub max_connections: usize,
    /// Idle pooled HTTP/1.1 connections kept per upstream endpoint and worker; a burst's extra
    /// connections are closed when they return to the pool. 32.
    pub upstream_max_idle_per_endpoint: usize,
    /// Pooled upstream connections unused for this long are closed (HTTP/1.1 and h2c). 90 s,
    /// below the common 120 s idle limit of backends, so the proxy closes first.
    pub upstream_idle_timeout: Duration,
    /// Data-plane workers: threads each running its own runtime, with its own socket per TCP
    /// listener and its own upstream pools. 1 (the default): the runtime that creates the proxy
    /// serves it, with no thread of its own. `serve` takes `TOKIO_WORKER_THREADS`, else one per
    /// CPU.
    pub workers: usize,
    /// Time in-flight requests get to finish at shutdown or when their listener is removed.
    pub drain_timeout: Duration,
    /// Time to establish an upstream TCP connection before answering 504.
    pub connect_timeout: Duration,
    /// A UDP session whose client sent no datagram for this long is ended and its upstream
    /// socket closed; backend replies do not count, so a backend (or a spoofed source it
    /// answers) cannot keep a session alive on its own. 60 s: longer than the usual keep-alive
    /// of UDP protocols (DNS retries, QUIC and WireGuard keep-alives), short enough to bound
    /// sessions of vanished clients.
    pub udp_idle_timeout: Duration,
    /// UDP sessions one client IP address (IPv6: one /64) may hold on a socket (each from
    /// another source port); a datagram that would open one more is dropped. `None`: a quarter
    /// of `max_connections` (2,500 by default; see [`Self::udp_sessions_per_source`]).
    pub udp_max_sessions_per_source: Option<usize>,
    /// A TCP or TLS stream (TCPRoute, TLSRoute) that carries no byte either way for this long
    /// is closed, with its backend connection; zero keeps silent streams open. 1 h, as
    /// Envoy's `tcp_proxy`: silent streams cannot hold every `max_connections` slot forever,
    /// while protocols with rare keep-alives stay up.
    pub tcp_idle_timeout: Duration,
    /// How request paths are canonicalized before routing (docs/security.md); the default
    /// rejects every ambiguous form.
    pub path_policy: PathPolicy,
    /// Peers whose `X-Forwarded-For`, `-Proto` and `-Host` are kept (docs/security.md); from
    /// every other peer they are replaced. None by default: a client's own claims are never
    /// passed on unless an operator names the proxies in front.
    pub trusted_proxies: TrustedProxies,
    /// Passive outlier detection: when endpoints are ejected from balancing, for how long.
    pub outlier: OutlierOptions,
    /// Circuit-breaker limits per Service (requests, pending requests, connections).
    pub breaker: BreakerLimits,
    /// How many retries may be in flight per Service: 20% of its active requests, and at least
    /// 3 (Envoy's and Finagle's budget): enough to ride out one bad endpoint, never enough to
    /// multiply the load on a failing Service.
    pub retry_budget: BudgetLimits,
    /// The pool basic-auth bcrypt checks run on: workers and queue (defaults and reasons on
    /// [`HashLimits`]); a check past both is answered 503 with `Retry-After`.
    pub basic_auth: HashLimits,
    /// The access log of listeners whose ProxyConfig sets none. Off by default: the proxy's
    /// throughput is compared with peers benchmarked without access logs, and a line per
    /// request costs a formatted write; operators turn it on (`--access-log json|text`).
    pub access_log: LogSpec,
    /// Where access log lines go: standard output, a file, or (tests) a list.
    pub access_sink: AccessSink,
    /// Lines the access log queues for its writer; lines past it are dropped and counted
    /// (`edgeplane_access_log_dropped_total`) rather than waited for.
    pub access_log_queue: usize,
    /// OTLP span export (`--otlp-endpoint`); off by default.
    pub trace_export: Option<crate::proxy::trace::TraceExport>,
}

impl ProxyOptions {
    /// The per-source UDP session limit in force: the one set, else a quarter of
    /// `max_connections` (at least 1). A quarter: one address (a host sending from many source
    /// ports) can no longer take every session of a socket and lock the others out until its
    /// sessions idle, yet clients behind one NAT address, or a test client opening a thousand
    /// sessions from one host (as the Gateway API conformance suite does), are served.
    pub fn udp_sessions_per_source(&self) -> usize {
        self.udp_max_sessions_per_source
            .unwrap_or(self.max_connections / 4)
            .max(1)
    }
}

impl Default for ProxyOptions {
    fn default() -> Self {
        Self {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            body_idle_timeout: Duration::from_secs(30),
            min_body_rate: MinRate {
                bytes_per_second: 240,
                grace: Duration::from_secs(5),
            },
            max_request_target: 8192,
            max_upstream_per_client: 64,
            upstream_response_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(10),
            http2_max_concurrent_streams: 256,
            max_connections: 10_000,
            upstream_max_idle_per_endpoint: 32,
            upstream_idle_timeout: Duration::from_secs(90),
            workers: 1,
            drain_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            udp_idle_timeout: Duration::from_secs(60),
            udp_max_sessions_per_source: None,
            tcp_idle_timeout: Duration::from_secs(3600),
            path_policy: PathPolicy::default(),
            trusted_proxies: TrustedProxies::default(),
            outlier: OutlierOptions::default(),
            breaker: BreakerLimits::default(),
            retry_budget: BudgetLimits::default(),
            basic_auth: HashLimits::default(),
            access_log: LogSpec::default(),
            access_sink: AccessSink::default(),
            access_log_queue: crate::proxy::access_log::DEFAULT_QUEUE,
            trace_export: None,
        }
    }
}
