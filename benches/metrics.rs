//! The per-request cost of the request metrics: what the proxy does for each request (find the
//! rule's handles in the table's index, count the request and observe its duration) beside
//! what it did before the label handles (`with_label_values` on `route` and `code`), and what
//! the seven labels would cost looked up per request.

use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use edgeplane::metrics::{method_index, Metrics, SeriesIndex};
use edgeplane::provider::manifest::parse_manifests;
use edgeplane::snapshot::Snapshot;
use edgeplane::translate::{translate, TranslateOptions, DEFAULT_CONTROLLER_NAME};
use http::{Method, StatusCode};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};

const MANIFESTS: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: edge}
spec: {controllerName: edgeplane.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: edge
  listeners: [{name: http, port: 8080, protocol: HTTP}]
---
apiVersion: v1
kind: Service
metadata: {name: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop}
spec:
  parentRefs: [{name: gw}]
  rules: [{name: main, backendRefs: [{name: shop, port: 80}]}]
"#;

fn bench(c: &mut Criterion) {
    let objects = parse_manifests(Path::new("bench.yaml"), MANIFESTS).expect("manifests");
    let options = TranslateOptions {
        ingress: Default::default(),
        controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        bind_address: "127.0.0.1".parse().expect("ip"),
        now: jiff::Timestamp::now(),
        generation: 1,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    };
    let table = translate(&Snapshot::from_objects(objects), &options).table;
    let metrics = Metrics::new();
    metrics.attach(&table);
    let listener = table.listeners.values().next().expect("a listener");
    let vhost = listener.hosts.iter().next().expect("a host");
    let rule = vhost.rules.first().expect("a rule");
    let elapsed = Duration::from_micros(420);
    let mut group = c.benchmark_group("request metrics");
    group.bench_function("handles: index lookup + count + duration", |b| {
        b.iter(|| {
            let index = SeriesIndex::of(&table).expect("attached");
            let cell = index
                .rule(listener, vhost.listener, rule)
                .and_then(|s| s.cell(Some(0)))
                .expect("cell");
            cell.record(
                &metrics.http,
                method_index(&Method::GET),
                StatusCode::OK,
                elapsed,
            );
        })
    });
    let requests = IntCounterVec::new(Opts::new("r", "r"), &["route", "code"]).expect("valid");
    let seconds = HistogramVec::new(HistogramOpts::new("s", "s"), &["route"]).expect("valid");
    group.bench_function("before: with_label_values(route, code)", |b| {
        b.iter(|| {
            let route = rule.route.label();
            requests
                .with_label_values(&[route, StatusCode::OK.as_str()])
                .inc();
            seconds
                .with_label_values(&[route])
                .observe(elapsed.as_secs_f64());
        })
    });
    let labels = [
        "default/gw",
        "http",
        "HTTPRoute/default/shop",
        "main",
        "default/shop:80",
        "GET",
        "200",
    ];
    group.bench_function("seven labels by with_label_values", |b| {
        b.iter(|| {
            metrics.http.requests.with_label_values(&labels).inc();
            metrics
                .http
                .duration
                .with_label_values(&labels)
                .observe(elapsed.as_secs_f64());
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
