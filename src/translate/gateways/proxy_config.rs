//! `ProxyConfig` compiled to the table's [`ListenerSettings`]: every field checked as the CRD's
//! validation would (durations, CIDRs, number ranges), the first bad one named by its path in
//! the error. Which ProxyConfig a Gateway uses is `parameters`' business. Pure.

use std::time::Duration;

use ipnet::IpNet;

use crate::kinds::crd::proxy_config::{AccessLogFormat as SpecFormat, ProxyConfig};
use crate::snapshot::namespace_of;
use crate::table::{AccessLog, AccessLogFormat, ListenerSettings};
use crate::translate::common::duration::parse_duration;

/// Smallest `limits.maxRequestHeaderBytes`: a request line and a few headers.
pub const MIN_REQUEST_HEADER_BYTES: u32 = 1024;
/// Largest `limits.maxRequestHeaderBytes` (1 MiB).
pub const MAX_REQUEST_HEADER_BYTES: u32 = 1 << 20;

/// A field of a ProxyConfig that cannot be served, named by its path under `spec`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyConfigError {
    #[error("spec.{field}: invalid duration {value:?}")]
    Duration { field: &'static str, value: String },
    #[error("spec.{field}: must be longer than 0s")]
    ZeroDuration { field: &'static str },
    #[error("spec.trustedProxies[{index}]: invalid CIDR {value:?}")]
    Cidr { index: usize, value: String },
    #[error("spec.{field}: {value} is out of range ({range})")]
    Range {
        field: &'static str,
        value: u64,
        range: &'static str,
    },
}

/// Compiles `config` to the settings of the sockets its Gateways bind.
pub fn compile_proxy_config(config: &ProxyConfig) -> Result<ListenerSettings, ProxyConfigError> {
    let spec = &config.spec;
    let source = format!(
        "{}/{}",
        namespace_of(&config.metadata),
        config.metadata.name.as_deref().unwrap_or("")
    );
    let mut out = ListenerSettings {
        source,
        ..ListenerSettings::default()
    };
    if let Some(log) = &spec.access_log {
        let format = match log.format.unwrap_or(SpecFormat::Json) {
            SpecFormat::Json => AccessLogFormat::Json,
            SpecFormat::Text => AccessLogFormat::Text,
            SpecFormat::Off => AccessLogFormat::Off,
        };
        let fields = log
            .fields
            .iter()
            .filter_map(|f| serde_json::to_value(f).ok())
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        out.access_log = Some(AccessLog { format, fields });
    }
    if let Some(limits) = &spec.limits {
        if let Some(n) = limits.max_request_header_bytes {
            if !(MIN_REQUEST_HEADER_BYTES..=MAX_REQUEST_HEADER_BYTES).contains(&n) {
                return Err(ProxyConfigError::Range {
                    field: "limits.maxRequestHeaderBytes",
                    value: n.into(),
                    range: "1024 to 1048576",
                });
            }
            out.max_request_header_bytes = Some(n);
        }
        if let Some(n) = limits.max_request_body_bytes {
            if n == 0 {
                return Err(ProxyConfigError::Range {
                    field: "limits.maxRequestBodyBytes",
                    value: n,
                    range: "at least 1",
                });
            }
            out.max_request_body_bytes = Some(n);
        }
    }
    if let Some(t) = &spec.client_timeouts {
        out.handshake_timeout = duration("clientTimeouts.handshake", &t.handshake)?;
        out.header_read_timeout = duration("clientTimeouts.requestHeader", &t.request_header)?;
        out.body_idle_timeout = duration("clientTimeouts.bodyIdle", &t.body_idle)?;
        out.idle_timeout = duration("clientTimeouts.idle", &t.idle)?;
        out.tcp_idle_timeout = duration("clientTimeouts.tcpIdle", &t.tcp_idle)?;
    }
    if let Some(h2) = &spec.http2 {
        if let Some(n) = h2.max_concurrent_streams {
            if n == 0 {
                return Err(ProxyConfigError::Range {
                    field: "http2.maxConcurrentStreams",
                    value: 0,
                    range: "at least 1",
                });
            }
            out.http2_max_concurrent_streams = Some(n);
        }
        out.http2_keepalive_interval = duration("http2.keepaliveInterval", &h2.keepalive_interval)?;
        out.http2_keepalive_timeout = duration("http2.keepaliveTimeout", &h2.keepalive_timeout)?;
    }
    if !spec.trusted_proxies.is_empty() {
        let mut nets = Vec::with_capacity(spec.trusted_proxies.len());
        for (index, value) in spec.trusted_proxies.iter().enumerate() {
            let net = parse_cidr(value).ok_or_else(|| ProxyConfigError::Cidr {
                index,
                value: value.clone(),
            })?;
            nets.push(net);
        }
        out.trusted_proxies = Some(nets);
    }
    out.drain = duration("drainDuration", &spec.drain_duration)?;
    Ok(out)
}

/// A CIDR (`10.0.0.0/8`, `2001:db8::/32`) or a single address (`/32` or `/128`).
pub fn parse_cidr(text: &str) -> Option<IpNet> {
    let text = text.trim();
    text.parse::<IpNet>()
        .ok()
        .or_else(|| text.parse::<std::net::IpAddr>().ok().map(IpNet::from))
}

/// An optional Gateway API duration that must be longer than zero.
fn duration(
    field: &'static str,
    value: &Option<String>,
) -> Result<Option<Duration>, ProxyConfigError> {
    let Some(text) = value else {
        return Ok(None);
    };
    let d = parse_duration(text).map_err(|_| ProxyConfigError::Duration {
        field,
        value: text.clone(),
    })?;
    if d.is_zero() {
        return Err(ProxyConfigError::ZeroDuration { field });
    }
    Ok(Some(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(spec: &str) -> ProxyConfig {
        serde_yaml_ng::from_str(&format!(
            "metadata: {{name: pc, namespace: sys}}\nspec: {spec}"
        ))
        .unwrap()
    }

    #[test]
    fn every_field_compiles() {
        let c = config(
            "{accessLog: {format: Text, fields: [clientAddress, status]}, \
             limits: {maxRequestHeaderBytes: 16384, maxRequestBodyBytes: 1000}, \
             clientTimeouts: {handshake: 5s, requestHeader: 10s, bodyIdle: 30s, idle: 1m, \
             tcpIdle: 2h}, \
             http2: {maxConcurrentStreams: 50, keepaliveInterval: 20s, keepaliveTimeout: 5s}, \
             trustedProxies: [10.0.0.0/8, 192.168.1.1], drainDuration: 15s}",
        );
        let s = compile_proxy_config(&c).unwrap();
        assert_eq!(s.source, "sys/pc");
        let log = s.access_log.unwrap();
        assert_eq!(log.format, AccessLogFormat::Text);
        assert_eq!(log.fields, ["clientAddress", "status"]);
        assert_eq!(s.max_request_header_bytes, Some(16384));
        assert_eq!(s.max_request_body_bytes, Some(1000));
        assert_eq!(s.handshake_timeout, Some(Duration::from_secs(5)));
        assert_eq!(s.header_read_timeout, Some(Duration::from_secs(10)));
        assert_eq!(s.body_idle_timeout, Some(Duration::from_secs(30)));
        assert_eq!(s.idle_timeout, Some(Duration::from_secs(60)));
        assert_eq!(s.tcp_idle_timeout, Some(Duration::from_secs(7200)));
        assert_eq!(s.http2_max_concurrent_streams, Some(50));
        assert_eq!(s.http2_keepalive_interval, Some(Duration::from_secs(20)));
        assert_eq!(s.http2_keepalive_timeout, Some(Duration::from_secs(5)));
        let nets: Vec<String> = s
            .trusted_proxies
            .unwrap()
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(nets, ["10.0.0.0/8", "192.168.1.1/32"]);
        assert_eq!(s.drain, Some(Duration::from_secs(15)));
    }

    #[test]
    fn bad_values_name_their_field() {
        let msg = |spec: &str| compile_proxy_config(&config(spec)).unwrap_err().to_string();
        assert_eq!(
            msg("{clientTimeouts: {idle: 5x}}"),
            "spec.clientTimeouts.idle: invalid duration \"5x\""
        );
        assert_eq!(
            msg("{drainDuration: 0s}"),
            "spec.drainDuration: must be longer than 0s"
        );
        assert_eq!(
            msg("{trustedProxies: [10.0.0.0/8, 10.0.0.0/99]}"),
            "spec.trustedProxies[1]: invalid CIDR \"10.0.0.0/99\""
        );
        assert_eq!(
            msg("{limits: {maxRequestHeaderBytes: 10}}"),
            "spec.limits.maxRequestHeaderBytes: 10 is out of range (1024 to 1048576)"
        );
        assert!(msg("{http2: {maxConcurrentStreams: 0}}").starts_with("spec.http2."));
        assert_eq!(
            msg("{clientTimeouts: {tcpIdle: 0s}}"),
            "spec.clientTimeouts.tcpIdle: must be longer than 0s"
        );
    }
}
