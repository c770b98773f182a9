//! The settings one client connection is served with: the command line's (`ProxyOptions`),
//! overridden field by field by the ProxyConfig of its listener socket
//! (`ListenerTable::settings`) as the live table has it when the connection is accepted. A
//! connection keeps its settings for its whole life: a changed ProxyConfig applies to new
//! connections only, so a request never sees its limits change half-way.

use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;

use crate::proxy::access_log::LogSpec;
use crate::proxy::options::ProxyOptions;
use crate::proxy::trusted::TrustedProxies;
use crate::table::ListenerSettings;

/// Smallest request head buffer hyper accepts; a lower `maxRequestHeaderBytes` is enforced by
/// the request handler's own count.
const MIN_HEAD_BUFFER: usize = 8192;

/// Effective per-connection settings.
#[derive(Debug, Clone)]
pub(crate) struct ConnSettings {
    pub handshake_timeout: Duration,
    pub header_read_timeout: Duration,
    pub body_idle_timeout: Duration,
    pub idle_timeout: Duration,
    pub http2_keepalive_interval: Duration,
    pub http2_keepalive_timeout: Duration,
    pub http2_max_concurrent_streams: u32,
    /// Request heads larger than this get 431.
    pub max_request_header_bytes: Option<u32>,
    /// Request bodies larger than this get 413 (a TrafficPolicy's lower limit wins).
    pub max_request_body: Option<u64>,
    /// Peers whose forwarded headers are believed on this connection.
    pub trusted_proxies: TrustedProxies,
    /// The access log of requests on this connection.
    pub access_log: LogSpec,
}

impl ConnSettings {
    /// The command line's settings, with `access_log` as the default log.
    pub(crate) fn from_options(options: &ProxyOptions, access_log: LogSpec) -> Self {
        Self {
            handshake_timeout: options.handshake_timeout,
            header_read_timeout: options.header_read_timeout,
            body_idle_timeout: options.body_idle_timeout,
            idle_timeout: options.idle_timeout,
            http2_keepalive_interval: options.http2_keepalive_interval,
            http2_keepalive_timeout: options.http2_keepalive_timeout,
            http2_max_concurrent_streams: options.http2_max_concurrent_streams,
            max_request_header_bytes: None,
            max_request_body: None,
            trusted_proxies: options.trusted_proxies.clone(),
            access_log,
        }
    }

    /// These settings with a ProxyConfig's over them.
    pub(crate) fn with(&self, s: &ListenerSettings) -> Self {
        Self {
            handshake_timeout: s.handshake_timeout.unwrap_or(self.handshake_timeout),
            header_read_timeout: s.header_read_timeout.unwrap_or(self.header_read_timeout),
            body_idle_timeout: s.body_idle_timeout.unwrap_or(self.body_idle_timeout),
            idle_timeout: s.idle_timeout.unwrap_or(self.idle_timeout),
            http2_keepalive_interval: s
                .http2_keepalive_interval
                .unwrap_or(self.http2_keepalive_interval),
            http2_keepalive_timeout: s
                .http2_keepalive_timeout
                .unwrap_or(self.http2_keepalive_timeout),
            http2_max_concurrent_streams: s
                .http2_max_concurrent_streams
                .unwrap_or(self.http2_max_concurrent_streams),
            max_request_header_bytes: s.max_request_header_bytes.or(self.max_request_header_bytes),
            max_request_body: s.max_request_body_bytes.or(self.max_request_body),
            trusted_proxies: s
                .trusted_proxies
                .as_ref()
                .map_or_else(|| self.trusted_proxies.clone(), |nets| trusted(nets)),
            access_log: s
                .access_log
                .as_ref()
                .map_or_else(|| self.access_log.clone(), LogSpec::from_table),
        }
    }

    /// The buffer size that lets hyper read heads up to the header limit (and refuse larger
    /// ones with 431 itself when they do not fit).
    pub(crate) fn head_buffer(&self) -> Option<usize> {
        self.max_request_header_bytes
            .map(|n| (n as usize).max(MIN_HEAD_BUFFER))
    }
}

fn trusted(nets: &[IpNet]) -> TrustedProxies {
    TrustedProxies::from_nets(nets.iter().map(|n| n.trunc()).collect())
}

/// Settings of connections accepted on `listener` now: shared defaults when its ProxyConfig
/// sets nothing.
pub(crate) fn for_listener(
    defaults: &Arc<ConnSettings>,
    settings: Option<&ListenerSettings>,
) -> Arc<ConnSettings> {
    match settings {
        None => defaults.clone(),
        Some(s) => Arc::new(defaults.with(s)),
    }
}
