//! Route lookup cost as the table grows: 10 to 50,000 routes on one host, the same counts
//! spread over 1,000 hosts, and 1,000 to 50,000 routes with a host each (the standalone
//! benchmark's shape). Lookup must stay flat in every dimension.

use std::net::SocketAddr;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use edgeplane::table::{
    BackendSet, ListenerTable, PathMatch, RequestMatch, RequestView, RouteRef, RouteRule,
    RuleFilters, VirtualHost,
};
use http::{HeaderMap, Method};

fn rule(route: usize, path: PathMatch) -> Arc<RouteRule> {
    Arc::new(RouteRule {
        route: Arc::new(RouteRef::new(
            "HTTPRoute",
            "bench",
            &format!("route-{route}"),
        )),
        created: route as i64,
        rule_index: 0,
        match_index: 0,
        rule_name: None,
        matcher: RequestMatch {
            path,
            ..RequestMatch::any()
        },
        filters: Arc::new(RuleFilters::default()),
        backends: Arc::new(BackendSet::default()),
    })
}

/// `routes` routes, each with an exact and a prefix match, spread round-robin over `hosts` hosts.
fn listener(routes: usize, hosts: usize) -> ListenerTable {
    let mut per_host: Vec<Vec<Arc<RouteRule>>> = vec![Vec::new(); hosts];
    for r in 0..routes {
        let rules = &mut per_host[r % hosts];
        rules.push(rule(r, PathMatch::prefix(&format!("/svc-{r}/api"))));
        rules.push(rule(r, PathMatch::Exact(format!("/svc-{r}/health"))));
    }
    let vhosts: Vec<VirtualHost> = per_host
        .into_iter()
        .enumerate()
        .map(|(h, rules)| VirtualHost::new(format!("host-{h}.example.com"), rules))
        .collect();
    let addr: SocketAddr = "127.0.0.1:8080".parse().expect("valid address");
    ListenerTable::new(addr, vec![], vhosts)
}

fn bench_lookup(c: &mut Criterion) {
    let headers = HeaderMap::new();
    let mut group = c.benchmark_group("lookup");
    for (routes, hosts) in [
        (10, 1),
        (1_000, 1),
        (10_000, 1),
        (50_000, 1),
        (10, 10),
        (1_000, 1_000),
        (10_000, 1_000),
        (50_000, 1_000),
        (5_000, 5_000),
        (10_000, 10_000),
        (50_000, 50_000),
    ] {
        let table = listener(routes, hosts);
        // The last route of the last host: no early exit helps it.
        let target = routes - 1;
        let host = format!("host-{}.example.com", target % hosts);
        let path = format!("/svc-{target}/api/v1/items");
        let id = BenchmarkId::new(format!("{hosts}-hosts"), routes);
        group.bench_with_input(id, &(), |b, _| {
            b.iter(|| {
                let view = RequestView {
                    host: &host,
                    path: &path,
                    query: None,
                    method: &Method::GET,
                    headers: &headers,
                };
                let found = table.route(std::hint::black_box(&view));
                assert!(found.is_some());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_lookup);
criterion_main!(benches);
