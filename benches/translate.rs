//! Full translation (snapshot -> route table + status) of 1,000 and 10,000 HTTPRoutes attached to
//! one Gateway, each with its own Service and EndpointSlice; and incremental translation of one
//! changed route, one changed EndpointSlice, or one EndpointSlice added and removed, at 1,000,
//! 5,000, 10,000 and 50,000 routes; and one added route at as many routes of one hostname each
//! (the propagation benchmarks' shape), and the metric label handles of the table such a
//! change produces, and the sealing of its status report.

use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use edgeplane::metrics::Metrics;
use edgeplane::provider::manifest::{parse_manifests, Object};
use edgeplane::snapshot::Snapshot;
use edgeplane::status::SealedReport;
use edgeplane::table::ServedCertificates;
use edgeplane::translate::{translate, Incremental, TranslateOptions, DEFAULT_CONTROLLER_NAME};

/// The allocator of the `edgeplane` binary, so that translation costs what it costs there.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Manifests of one class, one Gateway with an HTTP listener, and `routes` routes with backends.
pub fn manifests(routes: usize) -> String {
    let mut y = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: bench}}\n\
         spec: {{controllerName: {DEFAULT_CONTROLLER_NAME}}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: bench}}\n\
         spec:\n  gatewayClassName: bench\n  listeners:\n  - {{name: http, port: 8080, protocol: HTTP}}\n"
    );
    for i in 0..routes {
        let _ = write!(
            y,
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
             metadata: {{name: r{i}, namespace: bench}}\n\
             spec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [\"h{h}.example.com\"]\n  rules:\n\
             \x20 - matches: [{{path: {{type: PathPrefix, value: /svc-{i}}}}}, {{headers: [{{name: x-route, value: \"{i}\"}}]}}]\n\
             \x20   filters: [{{type: RequestHeaderModifier, requestHeaderModifier: {{set: [{{name: x-r, value: \"{i}\"}}]}}}}]\n\
             \x20   backendRefs: [{{name: s{i}, port: 80}}]\n\
             ---\napiVersion: v1\nkind: Service\nmetadata: {{name: s{i}, namespace: bench}}\n\
             spec: {{ports: [{{name: http, port: 80, targetPort: 8080}}]}}\n\
             ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: s{i}-a, namespace: bench, labels: {{kubernetes.io/service-name: s{i}}}}}\n\
             addressType: IPv4\nports: [{{name: http, port: 8080}}]\n\
             endpoints: [{{addresses: [\"10.0.{a}.{b}\"], conditions: {{ready: true}}}}]\n",
            h = i % 100,
            a = (i / 250) % 250,
            b = i % 250 + 1,
        );
    }
    y
}

/// The route counts of a group: `TRANSLATE_SIZES` (comma-separated) when set, so that a profiler
/// run sets up only the size it measures, else `default`.
fn sizes(default: &[usize]) -> Vec<usize> {
    match std::env::var("TRANSLATE_SIZES") {
        Ok(v) => v.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
        Err(_) => default.to_vec(),
    }
}

/// The objects of `text`, parsed a few hundred KiB of documents at a time: one file may expand
/// to at most 16 MiB, and 50,000 routes are more.
fn parse(text: &str) -> Vec<Object> {
    let mut objects = Vec::new();
    let mut chunk = String::new();
    for doc in text.split("\n---\n") {
        if chunk.len() + doc.len() > 256 * 1024 {
            objects
                .extend(parse_manifests(Path::new("bench.yaml"), &chunk).expect("manifests parse"));
            chunk.clear();
        }
        chunk.push_str("\n---\n");
        chunk.push_str(doc);
    }
    objects.extend(parse_manifests(Path::new("bench.yaml"), &chunk).expect("manifests parse"));
    objects
}

fn snapshot(routes: usize) -> Snapshot {
    let objects = parse(&manifests(routes));
    Snapshot::from_objects(objects)
}

fn options() -> TranslateOptions {
    TranslateOptions {
        ingress: Default::default(),
        controller_name: DEFAULT_CONTROLLER_NAME.into(),
        bind_address: "127.0.0.1".parse().expect("valid address"),
        now: jiff::Timestamp::UNIX_EPOCH,
        generation: 1,
        port_map: Default::default(),
        capabilities: edgeplane::translate::Capabilities::STANDALONE,
    }
}

/// `snap` with route `r0`'s first path changed (a new object, as a provider hands over).
fn with_changed_route(snap: &Snapshot) -> Snapshot {
    let mut out = snap.clone();
    let mut route = (*out.http_routes[0]).clone();
    if let Some(path) = route
        .spec
        .rules
        .as_mut()
        .and_then(|r| r.first_mut())
        .and_then(|r| r.matches.as_mut())
        .and_then(|m| m.first_mut())
        .and_then(|m| m.path.as_mut())
    {
        path.value = Some("/changed".into());
    }
    out.http_routes[0] = Arc::new(route);
    out
}

/// `snap` with the first EndpointSlice's address changed.
fn with_changed_endpoints(snap: &Snapshot) -> Snapshot {
    let mut out = snap.clone();
    let mut slice = (*out.endpoint_slices[0]).clone();
    if let Some(e) = slice.endpoints.first_mut() {
        e.addresses = vec!["10.255.0.1".into()];
    }
    out.endpoint_slices[0] = Arc::new(slice);
    out
}

/// `snap` with a second EndpointSlice for the first route's Service, among the others as a
/// new object sorts in a provider's store.
fn with_added_slice(snap: &Snapshot) -> Snapshot {
    let mut out = snap.clone();
    let mut slice = (*out.endpoint_slices[0]).clone();
    slice.metadata.name = Some("s0-b".into());
    if let Some(e) = slice.endpoints.first_mut() {
        e.addresses = vec!["10.255.0.2".into()];
    }
    out.endpoint_slices.insert(1, Arc::new(slice));
    out
}

/// One change per iteration: translations alternate between two snapshots that differ in one
/// object, through one long-lived `Incremental`.
fn bench_incremental(c: &mut Criterion) {
    let options = options();
    let served = ServedCertificates::default();
    let mut group = c.benchmark_group("incremental");
    group.sample_size(20);
    for routes in sizes(&[1_000, 5_000, 10_000, 50_000]) {
        let base = snapshot(routes);
        let cases = [
            ("route", with_changed_route(&base)),
            ("endpoints", with_changed_endpoints(&base)),
            ("slice-added", with_added_slice(&base)),
        ];
        for (what, changed) in cases {
            let pair = [base.clone(), changed];
            let mut memory = Incremental::default();
            memory.translate(&pair[0], &options, &served);
            let mut next = 1;
            group.bench_function(BenchmarkId::new(what, routes), |b| {
                b.iter(|| {
                    let out = memory.translate(&pair[next], &options, &served);
                    next = 1 - next;
                    assert_eq!(out.table.rule_count(), routes * 2);
                    out
                })
            });
        }
    }
    group.finish();
}

fn bench_translate(c: &mut Criterion) {
    let options = options();
    let mut group = c.benchmark_group("translate");
    group.sample_size(10);
    for routes in sizes(&[1_000, 10_000]) {
        let snap = snapshot(routes);
        group.bench_with_input(BenchmarkId::from_parameter(routes), &snap, |b, snap| {
            b.iter(|| {
                let out = translate(snap, &options);
                assert_eq!(out.table.rule_count(), routes * 2);
            })
        });
    }
    group.finish();
}

/// Manifests in the propagation benchmarks' shape: one Gateway, `routes` HTTPRoutes with one
/// hostname each (`base-<i>.example`), all sending to one Service.
fn own_host_manifests(routes: usize) -> String {
    let mut y = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: bench}}\n\
         spec: {{controllerName: {DEFAULT_CONTROLLER_NAME}}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: bench}}\n\
         spec:\n  gatewayClassName: bench\n  listeners:\n  - {{name: http, port: 8080, protocol: HTTP}}\n\
         ---\napiVersion: v1\nkind: Service\nmetadata: {{name: echo, namespace: bench}}\n\
         spec: {{ports: [{{name: http, port: 80, targetPort: 8080}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: echo-1, namespace: bench, labels: {{kubernetes.io/service-name: echo}}}}\n\
         addressType: IPv4\nports: [{{name: http, port: 8080}}]\n\
         endpoints: [{{addresses: [\"10.0.0.1\"], conditions: {{ready: true}}}}]\n"
    );
    for i in 0..routes {
        let _ = write!(
            y,
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
             metadata: {{name: r-base-{i}, namespace: bench}}\n\
             spec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [\"base-{i}.example\"]\n\
             \x20 rules: [{{backendRefs: [{{name: echo, port: 80}}]}}]\n"
        );
    }
    y
}

/// One route added and removed per iteration at N routes of their own hostname (what the
/// propagation benchmarks measure end to end): translations alternate between a snapshot and
/// the same with one more route, through one long-lived `Incremental`.
fn bench_added(c: &mut Criterion) {
    let options = options();
    let served = ServedCertificates::default();
    let mut group = c.benchmark_group("added");
    group.sample_size(20);
    for routes in sizes(&[1_000, 5_000, 10_000, 50_000]) {
        let text = own_host_manifests(routes + 1);
        let objects = parse(&text);
        let with = Snapshot::from_objects(objects);
        let mut without = with.clone();
        // The added route sorts among the others, as a new object does in a provider's store.
        without.http_routes.remove(routes / 2);
        let pair = [without, with];
        let mut memory = Incremental::default();
        memory.translate(&pair[0], &options, &served);
        let mut next = 1;
        group.bench_function(BenchmarkId::from_parameter(routes), |b| {
            b.iter(|| {
                let out = memory.translate(&pair[next], &options, &served);
                assert_eq!(out.table.rule_count(), routes + next);
                next = 1 - next;
                out
            })
        });
    }
    group.finish();
}

/// The label handles of one table after one route was added or removed among N routes of one
/// hostname each (what the reconciler resolves after each translation, before the swap):
/// tables come from alternating translations as in `added/N`, each given its handles once.
fn bench_handles(c: &mut Criterion) {
    let options = options();
    let served = ServedCertificates::default();
    let mut group = c.benchmark_group("handles");
    group.sample_size(20);
    for routes in sizes(&[1_000, 5_000]) {
        let text = own_host_manifests(routes + 1);
        let objects = parse(&text);
        let with = Snapshot::from_objects(objects);
        let mut without = with.clone();
        without.http_routes.remove(routes / 2);
        let pair = [without, with];
        let mut memory = Incremental::default();
        let metrics = Metrics::new();
        metrics.attach(&memory.translate(&pair[0], &options, &served).table);
        let mut next = 1;
        group.bench_function(BenchmarkId::from_parameter(routes), |b| {
            b.iter_batched(
                || {
                    let out = memory.translate(&pair[next], &options, &served);
                    next = 1 - next;
                    out
                },
                |out| {
                    metrics.attach(&out.table);
                    out
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// Sealing the status report of one translation after one route was added or removed among N
/// routes of one hostname each, against the report sealed before it (what the reconciler does
/// after each swap): reports come from alternating translations as in `added/N`.
fn bench_seal(c: &mut Criterion) {
    let options = options();
    let served = ServedCertificates::default();
    let mut group = c.benchmark_group("seal");
    group.sample_size(20);
    for routes in sizes(&[1_000, 10_000, 50_000]) {
        let text = own_host_manifests(routes + 1);
        let objects = parse(&text);
        let with = Snapshot::from_objects(objects);
        let mut without = with.clone();
        without.http_routes.remove(routes / 2);
        let pair = [without, with];
        let mut memory = Incremental::default();
        let mut sealed = SealedReport::from(memory.translate(&pair[0], &options, &served).status);
        let mut next = 1;
        group.bench_function(BenchmarkId::from_parameter(routes), |b| {
            b.iter_batched(
                || {
                    let out = memory.translate(&pair[next], &options, &served);
                    next = 1 - next;
                    out.status
                },
                |status| {
                    let now = status.seal(&sealed);
                    std::mem::replace(&mut sealed, now)
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    bench_translate,
    bench_incremental,
    bench_added,
    bench_handles,
    bench_seal
);
criterion_main!(benches);
