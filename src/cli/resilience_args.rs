//! Flags of outlier detection and circuit breaking, parsed into `OutlierOptions` and
//! `BreakerLimits`; defaults and their reasons live on those types.

use std::time::Duration;

use clap::Args;

use super::flags::{duration_text, parse_duration};
use crate::proxy::{BreakerLimits, OutlierOptions};

fn outlier() -> OutlierOptions {
    OutlierOptions::default()
}

fn limits() -> BreakerLimits {
    BreakerLimits::default()
}

/// How failing and overloaded backends are handled.
#[derive(Debug, Args)]
pub struct ResilienceArgs {
    /// Consecutive failures (any 5xx response, a refused or failed connection or exchange)
    /// that eject an endpoint from balancing; 0 turns ejection off.
    #[arg(long, default_value_t = outlier().consecutive_failures)]
    pub outlier_consecutive_failures: u32,
    /// Length of an endpoint's first ejection; the n-th lasts n times as long.
    #[arg(long, default_value = duration_text(outlier().base_ejection), value_parser = parse_duration)]
    pub outlier_base_ejection_time: Duration,
    /// Longest ejection.
    #[arg(long, default_value = duration_text(outlier().max_ejection), value_parser = parse_duration)]
    pub outlier_max_ejection_time: Duration,
    /// Share of a Service's endpoints (percent) that may be ejected at once; one always stays.
    #[arg(long, default_value_t = outlier().max_ejected_percent, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub outlier_max_ejected_percent: u8,
    /// Requests in flight per Service; more are answered 503 at once.
    #[arg(long, default_value_t = limits().max_requests)]
    pub max_upstream_requests: usize,
    /// Requests per Service waiting for a response head; more are answered 503 at once.
    #[arg(long, default_value_t = limits().max_pending)]
    pub max_upstream_pending: usize,
    /// Upstream HTTP/1.1 connections per Service; when all are busy a request that needs
    /// another is answered 503.
    #[arg(long, default_value_t = limits().max_connections)]
    pub max_upstream_connections: usize,
}

impl ResilienceArgs {
    /// The outlier detection options these flags describe.
    pub fn outlier(&self) -> OutlierOptions {
        OutlierOptions {
            consecutive_failures: self.outlier_consecutive_failures,
            base_ejection: self.outlier_base_ejection_time,
            max_ejection: self.outlier_max_ejection_time,
            max_ejected_percent: self.outlier_max_ejected_percent,
        }
    }

    /// The circuit-breaker limits these flags describe.
    pub fn limits(&self) -> BreakerLimits {
        BreakerLimits {
            max_requests: self.max_upstream_requests,
            max_pending: self.max_upstream_pending,
            max_connections: self.max_upstream_connections,
        }
    }
}
