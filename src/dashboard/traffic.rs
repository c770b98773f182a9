//! Live traffic per route and per backend, from the metrics registry: requests so far, request
//! rate, share of 5xx answers and p99 duration over the last seconds. Samples of the counters
//! `edgeplane_requests_total` and histograms `edgeplane_request_duration_seconds` are grouped
//! by their `route` label and, where the series carry one, their `backend` label; any other
//! labels are summed over, so more labels on those families change nothing here.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus::proto::{MetricFamily, MetricType};
use serde::{Deserialize, Serialize};

use crate::metrics::Metrics;

const REQUESTS: &str = "edgeplane_requests_total";
const DURATION: &str = "edgeplane_request_duration_seconds";

/// Samples are at least this far apart; a request sooner reuses the latest.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Rates are computed over up to this much time.
const WINDOW: Duration = Duration::from_secs(15);
/// Samples kept (bounded whatever the polling rate).
const KEEP: usize = 32;

/// What `/api/traffic` answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Traffic {
    /// Seconds the rates are computed over (0 on the first sample: no rates yet).
    pub window_seconds: f64,
    /// By `route` label.
    pub routes: Vec<TrafficRow>,
    /// By `backend` label (empty while the request series carry none).
    pub backends: Vec<TrafficRow>,
}

/// The traffic of one route or backend.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrafficRow {
    /// The label value (`route` or `backend`).
    pub name: String,
    /// Requests counted since start.
    pub requests: u64,
    /// Requests per second over the window.
    pub rate: f64,
    /// Share of the window's requests answered with a 5xx (`None` without requests).
    pub error_rate: Option<f64>,
    /// 99th percentile of the window's request durations in seconds, interpolated within
    /// the histogram's buckets as Prometheus' `histogram_quantile` does (`None` without
    /// requests).
    pub p99_seconds: Option<f64>,
}

/// Counts of one group at one time.
#[derive(Debug, Clone, Default)]
struct Counts {
    requests: u64,
    errors: u64,
    /// Cumulative bucket counts by upper bound (as bits of the f64, which sort alike for
    /// positive bounds), and the total count.
    buckets: BTreeMap<u64, u64>,
    observed: u64,
}

#[derive(Debug, Clone, Default)]
struct Sample {
    routes: BTreeMap<String, Counts>,
    backends: BTreeMap<String, Counts>,
}

/// The recent samples, shared by every client of the dashboard.
#[derive(Debug, Default)]
pub struct Sampler {
    samples: Mutex<VecDeque<(Instant, Sample)>>,
}

impl Sampler {
    /// Samples `metrics` (unless the latest sample is under a second old) and computes the
    /// traffic over the window.
    pub fn sample(&self, metrics: &Metrics) -> Traffic {
        self.sample_with(|| metrics.gather())
    }

    /// [`Sampler::sample`] of the families `gather` returns.
    fn sample_with(&self, gather: impl FnOnce() -> Vec<MetricFamily>) -> Traffic {
        let now = Instant::now();
        let Ok(mut samples) = self.samples.lock() else {
            return Traffic::default();
        };
        let fresh = samples
            .back()
            .is_some_and(|(at, _)| now.duration_since(*at) < SAMPLE_EVERY);
        if !fresh {
            if samples.len() >= KEEP {
                samples.pop_front();
            }
            samples.push_back((now, read(&gather())));
        }
        let Some((latest_at, latest)) = samples.back() else {
            return Traffic::default();
        };
        // The oldest sample still inside the window (the latest alone gives no rates).
        let base = samples
            .iter()
            .find(|(at, _)| latest_at.duration_since(*at) <= WINDOW);
        let (base_at, base) = match base {
            Some((at, s)) if at != latest_at => (*at, Some(s)),
            _ => (*latest_at, None),
        };
        let window = latest_at.duration_since(base_at).as_secs_f64();
        Traffic {
            window_seconds: window,
            routes: rows(&latest.routes, base.map(|b| &b.routes), window),
            backends: rows(&latest.backends, base.map(|b| &b.backends), window),
        }
    }
}

fn rows(
    latest: &BTreeMap<String, Counts>,
    base: Option<&BTreeMap<String, Counts>>,
    window: f64,
) -> Vec<TrafficRow> {
    latest
        .iter()
        .map(|(name, now)| {
            let empty = Counts::default();
            let then = base.and_then(|b| b.get(name)).unwrap_or(&empty);
            let requests = now.requests.saturating_sub(then.requests);
            let errors = now.errors.saturating_sub(then.errors);
            let has_window = base.is_some() && window > 0.0;
            let buckets: Vec<(f64, u64)> = now
                .buckets
                .iter()
                .map(|(bound, n)| {
                    let before = then.buckets.get(bound).copied().unwrap_or(0);
                    (f64::from_bits(*bound), n.saturating_sub(before))
                })
                .collect();
            let observed = now.observed.saturating_sub(then.observed);
            TrafficRow {
                name: name.clone(),
                requests: now.requests,
                rate: if has_window {
                    requests as f64 / window
                } else {
                    0.0
                },
                error_rate: (has_window && requests > 0).then(|| errors as f64 / requests as f64),
                p99_seconds: if has_window {
                    quantile(0.99, &buckets, observed)
                } else {
                    None
                },
            }
        })
        .collect()
}

/// The `q` quantile of a cumulative histogram (`buckets` sorted by upper bound, `count`
/// observations in all), interpolated linearly within the bucket it falls in; observations
/// above the last bound answer that bound. `None` without observations.
pub fn quantile(q: f64, buckets: &[(f64, u64)], count: u64) -> Option<f64> {
    if count == 0 {
        return None;
    }
    let rank = q * count as f64;
    let mut lower = (0.0, 0u64);
    for &(bound, cumulative) in buckets {
        if cumulative as f64 >= rank {
            let inside = (cumulative - lower.1) as f64;
            if inside <= 0.0 {
                return Some(bound);
            }
            return Some(lower.0 + (bound - lower.0) * (rank - lower.1 as f64) / inside);
        }
        lower = (bound, cumulative);
    }
    buckets.last().map(|b| b.0)
}

/// Groups the request families of one gather by route and backend.
fn read(families: &[MetricFamily]) -> Sample {
    let mut sample = Sample::default();
    for family in families {
        let name = family.name();
        for m in family.get_metric() {
            let mut route = None;
            let mut backend = None;
            let mut code = "";
            for l in m.get_label() {
                match l.name() {
                    "route" => route = Some(l.value()),
                    "backend" if !l.value().is_empty() => backend = Some(l.value()),
                    "code" => code = l.value(),
                    _ => {}
                }
            }
            let Some(route) = route else { continue };
            let add = |c: &mut Counts| {
                if name == REQUESTS && family.get_field_type() == MetricType::COUNTER {
                    let n = m.get_counter().get_value() as u64;
                    c.requests += n;
                    if code.starts_with('5') {
                        c.errors += n;
                    }
                } else if name == DURATION && family.get_field_type() == MetricType::HISTOGRAM {
                    let h = m.get_histogram();
                    c.observed += h.get_sample_count();
                    for b in h.get_bucket() {
                        *c.buckets.entry(b.upper_bound().to_bits()).or_default() +=
                            b.cumulative_count();
                    }
                }
            };
            add(sample.routes.entry(route.to_owned()).or_default());
            if let Some(backend) = backend {
                add(sample.backends.entry(backend.to_owned()).or_default());
            }
        }
    }
    sample
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_interpolates_like_prometheus() {
        let b = [(0.1, 50), (0.5, 90), (1.0, 100)];
        assert_eq!(quantile(0.5, &b, 100), Some(0.1));
        let p99 = quantile(0.99, &b, 100).unwrap();
        assert!((p99 - 0.95).abs() < 1e-9, "{p99}");
        assert_eq!(quantile(0.99, &[(0.1, 1)], 5), Some(0.1));
        assert_eq!(quantile(0.99, &b, 0), None);
    }

    /// A registry with the request families labelled as the proxy may label them, more
    /// labels included.
    fn families() -> (
        prometheus::Registry,
        prometheus::IntCounterVec,
        prometheus::HistogramVec,
    ) {
        let registry = prometheus::Registry::new();
        let labels = ["gateway", "route", "backend", "code"];
        let requests =
            prometheus::IntCounterVec::new(prometheus::Opts::new(REQUESTS, "r"), &labels).unwrap();
        let seconds = prometheus::HistogramVec::new(
            prometheus::HistogramOpts::new(DURATION, "d").buckets(vec![0.1, 1.0]),
            &labels,
        )
        .unwrap();
        registry.register(Box::new(requests.clone())).unwrap();
        registry.register(Box::new(seconds.clone())).unwrap();
        (registry, requests, seconds)
    }

    #[test]
    fn requests_are_grouped_by_route_and_backend_whatever_other_labels() {
        let (registry, requests, seconds) = families();
        let count = |gw: &str, backend: &str, code: &str, took: f64| {
            let labels = [gw, "HTTPRoute/default/a", backend, code];
            requests.with_label_values(&labels).inc();
            seconds.with_label_values(&labels).observe(took);
        };
        count("default/g1", "default/svc:80", "200", 0.05);
        count("default/g2", "default/svc:80", "502", 0.05);
        count("default/g1", "", "301", 0.05);
        let sampler = Sampler::default();
        let t = sampler.sample_with(|| registry.gather());
        let a = t
            .routes
            .iter()
            .find(|r| r.name == "HTTPRoute/default/a")
            .unwrap();
        assert_eq!(a.requests, 3);
        assert_eq!(a.error_rate, None, "no window on the first sample");
        assert_eq!(t.backends.len(), 1, "an empty backend label is no backend");
        assert_eq!(t.backends[0].requests, 2);
        // The next sample, two seconds later, has a window.
        if let Ok(mut s) = sampler.samples.lock() {
            let (at, _) = s.back_mut().unwrap();
            *at -= Duration::from_secs(2);
        }
        count("default/g1", "default/svc:80", "503", 0.5);
        count("default/g1", "default/svc:80", "200", 0.5);
        let t = sampler.sample_with(|| registry.gather());
        let a = t
            .routes
            .iter()
            .find(|r| r.name == "HTTPRoute/default/a")
            .unwrap();
        assert_eq!(a.requests, 5);
        assert_eq!(a.error_rate, Some(0.5));
        assert!(t.window_seconds >= 2.0 && a.rate > 0.0);
        let p99 = a.p99_seconds.unwrap();
        assert!(p99 > 0.1 && p99 <= 1.0, "{p99}");
        assert_eq!(t.backends[0].error_rate, Some(0.5));
    }
}
