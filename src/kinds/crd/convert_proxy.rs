//! `ProxyConfig` spec mappings between `v1alpha1` (flat, drain in whole seconds) and
//! `v1beta1` (grouped, drain as a duration). Each direction gives the closest value the
//! target version can hold; [`super::convert`] keeps the rest. Pure.

use serde_json::Value;

use super::convert::duration_millis;
use super::proxy_config as beta;
use super::v1alpha1::proxy_config as alpha;

/// `v1alpha1` spec to `v1beta1`.
pub fn up(spec: Value) -> Result<Value, String> {
    let a: alpha::ProxyConfigSpec = serde_json::from_value(spec).map_err(|e| e.to_string())?;
    let b = beta::ProxyConfigSpec {
        service: (a.service_type.is_some() || !a.service_annotations.is_empty()).then_some({
            beta::GatewayServiceConfig {
                type_: a.service_type,
                annotations: a.service_annotations,
                ..beta::GatewayServiceConfig::default()
            }
        }),
        access_log: (a.access_log_format.is_some() || !a.access_log_fields.is_empty()).then_some({
            beta::AccessLogConfig {
                format: a.access_log_format,
                fields: a.access_log_fields,
            }
        }),
        limits: (a.max_request_header_bytes.is_some() || a.max_request_body_bytes.is_some())
            .then_some(beta::RequestLimits {
                max_request_header_bytes: a.max_request_header_bytes,
                max_request_body_bytes: a.max_request_body_bytes,
            }),
        client_timeouts: (a.handshake_timeout.is_some()
            || a.request_header_timeout.is_some()
            || a.body_idle_timeout.is_some()
            || a.idle_timeout.is_some()
            || a.tcp_idle_timeout.is_some())
        .then_some(beta::ClientTimeouts {
            handshake: a.handshake_timeout,
            request_header: a.request_header_timeout,
            body_idle: a.body_idle_timeout,
            idle: a.idle_timeout,
            tcp_idle: a.tcp_idle_timeout,
        }),
        http2: (a.http2_max_concurrent_streams.is_some()
            || a.http2_keepalive_interval.is_some()
            || a.http2_keepalive_timeout.is_some())
        .then_some(beta::Http2Config {
            max_concurrent_streams: a.http2_max_concurrent_streams,
            keepalive_interval: a.http2_keepalive_interval,
            keepalive_timeout: a.http2_keepalive_timeout,
        }),
        trusted_proxies: a.trusted_proxy_cidrs,
        drain_duration: a.drain_seconds.map(seconds_duration),
    };
    serde_json::to_value(b).map_err(|e| e.to_string())
}

/// `seconds` as a Gateway API duration in the largest whole units (`90` is `1m30s`), so that
/// every value below 100,000 hours (far above `drainSeconds`' maximum of 99,999) keeps within
/// the five digits a duration's parts may have and reads back as the same number.
fn seconds_duration(seconds: u32) -> String {
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    let mut text = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            text.push_str(&format!("{n}{unit}"));
        }
    }
    if text.is_empty() {
        text.push_str("0s");
    }
    text
}

/// `v1beta1` spec to `v1alpha1`: a drain duration becomes whole seconds, rounded up.
pub fn down(spec: Value) -> Result<Value, String> {
    let b: beta::ProxyConfigSpec = serde_json::from_value(spec).map_err(|e| e.to_string())?;
    let service = b.service.unwrap_or_default();
    let log = b.access_log.unwrap_or_default();
    let limits = b.limits.unwrap_or_default();
    let timeouts = b.client_timeouts.unwrap_or_default();
    let http2 = b.http2.unwrap_or_default();
    let a = alpha::ProxyConfigSpec {
        service_type: service.type_,
        service_annotations: service.annotations,
        access_log_format: log.format,
        access_log_fields: log.fields,
        max_request_header_bytes: limits.max_request_header_bytes,
        max_request_body_bytes: limits.max_request_body_bytes,
        handshake_timeout: timeouts.handshake,
        request_header_timeout: timeouts.request_header,
        body_idle_timeout: timeouts.body_idle,
        idle_timeout: timeouts.idle,
        tcp_idle_timeout: timeouts.tcp_idle,
        http2_max_concurrent_streams: http2.max_concurrent_streams,
        http2_keepalive_interval: http2.keepalive_interval,
        http2_keepalive_timeout: http2.keepalive_timeout,
        trusted_proxy_cidrs: b.trusted_proxies,
        drain_seconds: b
            .drain_duration
            .as_deref()
            .and_then(duration_millis)
            .and_then(|ms| u32::try_from(ms.div_ceil(1000)).ok()),
    };
    serde_json::to_value(a).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_read_back_as_the_same_duration() {
        for (seconds, text) in [(0, "0s"), (90, "1m30s"), (3600, "1h"), (403_200, "112h")] {
            assert_eq!(seconds_duration(seconds), text);
        }
        for seconds in [1, 59, 61, 99_999, 3_599_999, 359_999_999] {
            let millis = duration_millis(&seconds_duration(seconds));
            assert_eq!(millis, Some(u64::from(seconds) * 1000), "{seconds}");
        }
    }
}
