//! The data plane's flags, shared by `serve` and `demo`: one per connection and request phase,
//! parsed into `ProxyOptions`. Defaults and their reasons live on `ProxyOptions`; the flags
//! read them from there.

use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::Args;

use super::flags::{duration_text, parse_duration};
use super::policy::PathPolicyArgs;
use super::resilience_args::ResilienceArgs;
use crate::proxy::{
    AccessSink, BudgetLimits, HashLimits, LogSpec, MinRate, ProxyOptions, TraceExport,
    TrustedProxies,
};
use crate::table::AccessLogFormat;

/// Values of `--access-log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccessLogArg {
    Json,
    Text,
    Off,
}

/// Each flag's default is the option's own default.
fn defaults() -> ProxyOptions {
    ProxyOptions::default()
}

/// A count that must be at least 1 (a limit of 0 would refuse everything).
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("`{s}`: {e}")),
    }
}

/// An `http://` URL with a host (the exporter speaks plain HTTP, as collectors beside the
/// proxy do).
fn parse_otlp_endpoint(s: &str) -> Result<String, String> {
    let uri: http::Uri = s.parse().map_err(|e| format!("`{s}`: {e}"))?;
    match (uri.scheme_str(), uri.host()) {
        (Some("http"), Some(_)) => Ok(s.to_owned()),
        _ => Err(format!(
            "`{s}`: an http:// URL with a host, e.g. http://otel-collector:4318"
        )),
    }
}

/// A share from 0.0 to 1.0.
fn parse_ratio(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        Ok(_) => Err("must be from 0.0 to 1.0".to_owned()),
        Err(e) => Err(format!("`{s}`: {e}")),
    }
}

/// Timeouts and limits of client connections and upstream pools.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// Time a new connection has to finish the TLS handshake and show its protocol (for
    /// HTTP/2: the whole client preface and SETTINGS); else it is closed.
    #[arg(long, default_value = duration_text(defaults().handshake_timeout), value_parser = parse_duration)]
    pub handshake_timeout: Duration,
    /// Time an HTTP/1.1 client has to send a request head, counted from when the connection
    /// waits for one (so it also bounds silent keep-alive connections).
    #[arg(long, default_value = duration_text(defaults().header_read_timeout), value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// A request body that sends nothing for this long is aborted (408, or a reset stream once
    /// the response has begun).
    #[arg(long, default_value = duration_text(defaults().body_idle_timeout), value_parser = parse_duration)]
    pub body_idle_timeout: Duration,
    /// The slowest a request body may arrive (bytes per second, averaged over the time spent
    /// waiting for it) once `--min-body-rate-grace` is over; slower is 408. 0 turns it off.
    /// gRPC requests are exempt.
    #[arg(long, value_name = "BYTES_PER_SECOND", default_value_t = defaults().min_body_rate.bytes_per_second)]
    pub min_body_rate: u64,
    /// Waiting time for a request body before `--min-body-rate` applies.
    #[arg(long, default_value = duration_text(defaults().min_body_rate.grace), value_parser = parse_duration)]
    pub min_body_rate_grace: Duration,
    /// Longest request target (path and query, in bytes); longer is 414.
    #[arg(long, value_name = "BYTES", default_value_t = defaults().max_request_target)]
    pub max_request_target: usize,
    /// Upstream HTTP/1.1 requests one client connection may have in flight at once (each
    /// holds an upstream connection); its further requests wait for one to finish.
    #[arg(long, default_value_t = defaults().max_upstream_per_client, value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize))]
    pub max_upstream_per_client: usize,
    /// Longest wait for an upstream response head (504); a route's shorter `timeouts` win.
    #[arg(long, default_value = duration_text(defaults().upstream_response_timeout), value_parser = parse_duration)]
    pub upstream_response_timeout: Duration,
    /// Client connections with no request in flight for this long are closed (HTTP/1.1
    /// keep-alive, HTTP/2 without streams).
    #[arg(long, default_value = duration_text(defaults().idle_timeout), value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// Interval of HTTP/2 keep-alive PINGs to clients.
    #[arg(long, default_value = duration_text(defaults().http2_keepalive_interval), value_parser = parse_duration)]
    pub http2_keepalive_interval: Duration,
    /// An HTTP/2 PING unanswered for this long closes the connection.
    #[arg(long, default_value = duration_text(defaults().http2_keepalive_timeout), value_parser = parse_duration)]
    pub http2_keepalive_timeout: Duration,
    /// Streams one HTTP/2 client connection may have open at once.
    #[arg(long, default_value_t = defaults().http2_max_concurrent_streams)]
    pub http2_max_concurrent_streams: u32,
    /// Open client connections per listener address, across the data-plane workers; more are
    /// closed as soon as accepted.
    #[arg(long, default_value_t = defaults().max_connections)]
    pub max_connections: usize,
    /// Idle pooled HTTP/1.1 connections kept per upstream endpoint and data-plane worker.
    #[arg(long, default_value_t = defaults().upstream_max_idle_per_endpoint)]
    pub upstream_max_idle: usize,
    /// Pooled upstream connections unused for this long are closed.
    #[arg(long, default_value = duration_text(defaults().upstream_idle_timeout), value_parser = parse_duration)]
    pub upstream_idle_timeout: Duration,
    /// Time to open an upstream TCP connection (504 after it).
    #[arg(long, default_value = duration_text(defaults().connect_timeout), value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Peers (IPs or CIDRs, v4 and v6, comma-separated) whose `X-Forwarded-For`, `-Proto` and
    /// `-Host` are kept and extended; from any other peer they are replaced. Default: none.
    #[arg(long, value_name = "CIDR[,CIDR...]", default_value_t = defaults().trusted_proxies, hide_default_value = true)]
    pub trusted_proxies: TrustedProxies,
    /// A UDP session (one client address on a UDP listener, with its own upstream socket)
    /// whose client sends nothing for this long is ended (backend replies do not keep it).
    #[arg(long, default_value = duration_text(defaults().udp_idle_timeout), value_parser = parse_duration)]
    pub udp_idle_timeout: Duration,
    /// UDP sessions one client IP address (IPv6: one /64) may hold on a UDP listener (from
    /// different source ports); datagrams that would open more are dropped. Default: a
    /// quarter of --max-connections.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub udp_max_sessions_per_source: Option<usize>,
    /// A TCP or TLS stream (TCPRoute, TLSRoute) with no byte either way for this long is
    /// closed, with its backend connection; `0s` keeps silent streams open. A ProxyConfig's
    /// `clientTimeouts.tcpIdle` overrides it per listener.
    #[arg(long, default_value = duration_text(defaults().tcp_idle_timeout), value_parser = parse_duration)]
    pub tcp_idle_timeout: Duration,
    /// Share of a Service's active requests that may be retries in flight (percent).
    #[arg(long, default_value_t = defaults().retry_budget.percent, value_parser = clap::value_parser!(u32).range(0..=100),
        help_heading = "Resilience")]
    pub retry_budget_percent: u32,
    /// Retries a Service may always have in flight, however few requests it has.
    #[arg(long, default_value_t = defaults().retry_budget.min_concurrent, help_heading = "Resilience")]
    pub retry_budget_min: usize,
    /// Access log of every listener whose ProxyConfig sets none: one line per request (and
    /// per TCP stream and UDP session), as JSON or `key=value` text. Off by default, so
    /// throughput is comparable with proxies benchmarked without access logs; a ProxyConfig's
    /// `accessLog` overrides it per listener.
    #[arg(long, value_enum, default_value = "off", help_heading = "Access log")]
    pub access_log: AccessLogArg,
    /// Write access log lines to this file (appended, created when missing, reopened on
    /// SIGHUP and when a log rotator moved it) instead of standard output.
    #[arg(long, value_name = "PATH", help_heading = "Access log")]
    pub access_log_file: Option<std::path::PathBuf>,
    /// Lines waiting for the access log's writer; when the sink lags past it, lines are
    /// dropped and counted (`edgeplane_access_log_dropped_total`), never waited for.
    #[arg(long, default_value_t = defaults().access_log_queue, value_parser = at_least_one,
        help_heading = "Access log")]
    pub access_log_queue: usize,
    /// Export the spans of sampled requests over OTLP/HTTP (protobuf) to this collector, e.g.
    /// `http://otel-collector:4318` (posted to `/v1/traces` unless the URL has a path). Off
    /// by default; `traceparent` is continued either way.
    #[arg(long, value_name = "URL", value_parser = parse_otlp_endpoint, help_heading = "Tracing")]
    pub otlp_endpoint: Option<String>,
    /// Share of requests without a sampled parent whose spans are exported (0.0 to 1.0);
    /// a request whose `traceparent` is sampled always is.
    #[arg(long, default_value_t = 1.0, value_parser = parse_ratio, help_heading = "Tracing")]
    pub otlp_sample_ratio: f64,
    /// Basic-auth bcrypt checks that may run at once (at least 1), on blocking threads, never
    /// on those serving requests.
    #[arg(long, default_value_t = defaults().basic_auth.workers, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub basic_auth_workers: usize,
    /// Basic-auth bcrypt checks that may wait for a worker; past it a request is answered
    /// 503 with `Retry-After` and `x-edgeplane-overloaded: basic-auth`.
    #[arg(long, default_value_t = defaults().basic_auth.queue)]
    pub basic_auth_queue: usize,
    #[command(flatten)]
    pub path_policy: PathPolicyArgs,
    #[command(flatten, next_help_heading = "Resilience")]
    pub resilience: ResilienceArgs,
}

impl ProxyArgs {
    /// The options these flags describe, with `drain_timeout`.
    pub fn options(&self, drain_timeout: Duration) -> ProxyOptions {
        ProxyOptions {
            handshake_timeout: self.handshake_timeout,
            header_read_timeout: self.header_read_timeout,
            body_idle_timeout: self.body_idle_timeout,
            min_body_rate: MinRate {
                bytes_per_second: self.min_body_rate,
                grace: self.min_body_rate_grace,
            },
            max_request_target: self.max_request_target,
            max_upstream_per_client: self.max_upstream_per_client,
            upstream_response_timeout: self.upstream_response_timeout,
            idle_timeout: self.idle_timeout,
            http2_keepalive_interval: self.http2_keepalive_interval,
            http2_keepalive_timeout: self.http2_keepalive_timeout,
            http2_max_concurrent_streams: self.http2_max_concurrent_streams,
            max_connections: self.max_connections,
            upstream_max_idle_per_endpoint: self.upstream_max_idle,
            upstream_idle_timeout: self.upstream_idle_timeout,
            drain_timeout,
            // Not a flag: `serve` takes the process's CPUs or `TOKIO_WORKER_THREADS`.
            workers: defaults().workers,
            connect_timeout: self.connect_timeout,
            udp_idle_timeout: self.udp_idle_timeout,
            udp_max_sessions_per_source: self.udp_max_sessions_per_source,
            tcp_idle_timeout: self.tcp_idle_timeout,
            path_policy: self.path_policy.policy(),
            trusted_proxies: self.trusted_proxies.clone(),
            outlier: self.resilience.outlier(),
            breaker: self.resilience.limits(),
            retry_budget: BudgetLimits {
                percent: self.retry_budget_percent,
                min_concurrent: self.retry_budget_min,
            },
            access_log: LogSpec::new(match self.access_log {
                AccessLogArg::Json => AccessLogFormat::Json,
                AccessLogArg::Text => AccessLogFormat::Text,
                AccessLogArg::Off => AccessLogFormat::Off,
            }),
            access_sink: match &self.access_log_file {
                Some(path) => AccessSink::File(path.clone()),
                None => AccessSink::Stdout,
            },
            access_log_queue: self.access_log_queue,
            trace_export: self.otlp_endpoint.as_ref().map(|endpoint| TraceExport {
                endpoint: endpoint.clone(),
                sample_ratio: self.otlp_sample_ratio,
            }),
            basic_auth: HashLimits {
                workers: self.basic_auth_workers,
                queue: self.basic_auth_queue,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        proxy: ProxyArgs,
    }

    #[test]
    fn defaults_match_the_options_defaults() {
        let cli = Cli::try_parse_from(["x"]).unwrap();
        let parsed = format!("{:?}", cli.proxy.options(Duration::from_secs(30)));
        assert_eq!(parsed, format!("{:?}", ProxyOptions::default()));
    }

    #[test]
    fn flags_parse_durations_and_counts() {
        let cli = Cli::try_parse_from([
            "x",
            "--handshake-timeout",
            "500ms",
            "--idle-timeout",
            "2m",
            "--max-connections",
            "7",
            "--upstream-max-idle",
            "3",
            "--trusted-proxies",
            "10.0.0.0/8,::1",
            "--outlier-base-ejection-time",
            "2s",
            "--max-upstream-pending",
            "9",
            "--basic-auth-workers",
            "1",
            "--basic-auth-queue",
            "0",
            "--udp-max-sessions-per-source",
            "5",
            "--tcp-idle-timeout",
            "90s",
        ])
        .unwrap();
        let o = cli.proxy.options(Duration::from_secs(1));
        assert_eq!(o.handshake_timeout, Duration::from_millis(500));
        assert_eq!(o.idle_timeout, Duration::from_secs(120));
        assert_eq!(o.max_connections, 7);
        assert_eq!(o.upstream_max_idle_per_endpoint, 3);
        assert_eq!(o.outlier.base_ejection, Duration::from_secs(2));
        assert_eq!(o.breaker.max_pending, 9);
        assert_eq!(
            o.basic_auth,
            HashLimits {
                workers: 1,
                queue: 0
            }
        );
        assert!(Cli::try_parse_from(["x", "--basic-auth-workers", "0"]).is_err());
        assert_eq!(o.udp_sessions_per_source(), 5);
        assert_eq!(o.tcp_idle_timeout, Duration::from_secs(90));
        assert!(Cli::try_parse_from(["x", "--udp-max-sessions-per-source", "0"]).is_err());
        let quarter = Cli::try_parse_from(["x", "--max-connections", "7"]).unwrap();
        assert_eq!(
            quarter
                .proxy
                .options(Duration::ZERO)
                .udp_sessions_per_source(),
            1
        );
        let default = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(
            default
                .proxy
                .options(Duration::ZERO)
                .udp_sessions_per_source(),
            2500
        );
        assert!(Cli::try_parse_from(["x", "--outlier-max-ejected-percent", "101"]).is_err());
        assert!(o.trusted_proxies.contains("10.1.2.3".parse().unwrap()));
        assert!(o.trusted_proxies.contains("::1".parse().unwrap()));
        assert!(!o.trusted_proxies.contains("127.0.0.1".parse().unwrap()));
        assert!(Cli::try_parse_from(["x", "--trusted-proxies", "10.0.0.0/40"]).is_err());
        assert!(Cli::try_parse_from(["x", "--body-idle-timeout", "5x"]).is_err());
    }

    #[test]
    fn the_access_log_is_off_unless_asked_for() {
        let off = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(off.proxy.access_log, AccessLogArg::Off);
        let json = Cli::try_parse_from(["x", "--access-log", "json"]).unwrap();
        assert_eq!(json.proxy.access_log, AccessLogArg::Json);
        let text = Cli::try_parse_from(["x", "--access-log", "text"]).unwrap();
        assert_eq!(text.proxy.access_log, AccessLogArg::Text);
        assert!(Cli::try_parse_from(["x", "--access-log", "xml"]).is_err());
    }
}
