//! The series index: a rule's cells made at its first request, handed over between tables, and the label sets of a removed rule taken out.

use std::time::Duration;

use super::*;
use crate::table::{
    BackendSet, ListenerTable, RequestMatch, RuleFilters, ServiceBackend, ServiceKey, VirtualHost,
    WeightedBackend,
};

/// A table of one socket with the HTTPRoute rules `routes`, each to Service `<name>:80`.
fn table(routes: &[&str]) -> RouteTable {
    let rules = routes
        .iter()
        .map(|name| {
            let service = ServiceBackend {
                service: ServiceKey {
                    namespace: "default".into(),
                    name: (*name).into(),
                    port: 80,
                },
                endpoints: Vec::new(),
                terminating: Vec::new(),
                protocol: Default::default(),
                balance: Default::default(),
                limits: None,
            };
            Arc::new(RouteRule {
                route: Arc::new(RouteRef::new("HTTPRoute", "default", name)),
                created: 0,
                rule_index: 0,
                match_index: 0,
                rule_name: None,
                matcher: RequestMatch::any(),
                filters: RuleFilters::none(),
                backends: Arc::new(BackendSet::new(vec![WeightedBackend {
                    weight: 1,
                    target: BackendTarget::Service(Arc::new(service)),
                    filters: RuleFilters::none(),
                }])),
            })
        })
        .collect();
    table_of(rules)
}

/// A table of one socket serving `rules`.
fn table_of(rules: Vec<Arc<RouteRule>>) -> RouteTable {
    let source = SocketSource::gateway("default", "gw", "http");
    let addr = "127.0.0.1:8080".parse().unwrap();
    let listener = ListenerTable::new(addr, vec![source], [VirtualHost::new("*".into(), rules)]);
    RouteTable {
        listeners: [(addr, Arc::new(listener))].into(),
        ..RouteTable::default()
    }
}

/// The rules of `table`'s one virtual host.
fn rules(table: &RouteTable) -> Vec<Arc<RouteRule>> {
    let listener = table.listeners.values().next().unwrap();
    listener.hosts.iter().next().unwrap().rules.to_vec()
}

/// The cell of the first backendRef of the rule of route `name`.
fn cell_of<'t>(table: &'t RouteTable, name: &str) -> &'t RequestCells {
    let index = SeriesIndex::of(table).unwrap();
    let listener = table.listeners.values().next().unwrap();
    let vhost = listener.hosts.iter().next().unwrap();
    let rule = vhost.rules.iter().find(|r| r.route.name() == name).unwrap();
    let series = index.rule(listener, vhost.listener, rule).unwrap();
    series.cell(Some(0)).unwrap()
}

/// Counts one GET 200 on the rule of route `name`.
fn hit(table: &RouteTable, metrics: &Metrics, name: &str) {
    let index = SeriesIndex::of(table).unwrap();
    let listener = table.listeners.values().next().unwrap();
    let vhost = listener.hosts.iter().next().unwrap();
    let rule = vhost.rules.iter().find(|r| r.route.name() == name).unwrap();
    let cell = index.rule(listener, vhost.listener, rule).unwrap();
    let ok = http::StatusCode::OK;
    cell.cell(Some(0))
        .unwrap()
        .record(&metrics.http, 0, ok, Duration::from_millis(1));
}

#[test]
fn a_rule_gets_its_cells_at_its_first_request_and_its_route_backends_before() {
    let metrics = Metrics::new();
    let first = table(&["a", "b"]);
    metrics.attach(&first);
    let index = SeriesIndex::of(&first).unwrap();
    assert_eq!((index.rule_entries(), index.rules_requested()), (2, 0));
    let text = metrics.encode();
    let b = "edgeplane_route_backends{gateway=\"default/gw\",listener=\"http\",\
                 route=\"HTTPRoute/default/b\",rule=\"0\",backend=\"default/b:80\"} 1";
    assert!(text.contains(b), "{text}");
    assert!(!text.contains("edgeplane_requests_total{"), "{text}");
    hit(&first, &metrics, "a");
    assert_eq!(index.rules_requested(), 1);
    // A request on a table already replaced makes cells the next table retires.
    let a = rules(&first).into_iter().filter(|r| r.route.name() == "a");
    let second = table_of(a.collect());
    metrics.attach(&second);
    assert_eq!(
        SeriesIndex::of(&second).map(SeriesIndex::rules_kept),
        Some(1)
    );
    hit(&first, &metrics, "b");
    assert!(metrics
        .encode()
        .contains("route=\"HTTPRoute/default/b\",rule=\"0\"} 1"));
    let third = table_of(rules(&second));
    metrics.attach(&third);
    let text = metrics.encode();
    assert!(!text.contains("HTTPRoute/default/b"), "{text}");
    assert!(
        text.contains("route=\"HTTPRoute/default/a\",rule=\"0\"} 1"),
        "{text}"
    );
}

#[test]
fn counts_go_on_across_tables_and_a_removed_route_leaves_the_exposition() {
    let metrics = Metrics::new();
    let first = table(&["a", "b"]);
    metrics.attach(&first);
    hit(&first, &metrics, "a");
    // A new table with new rule objects for the same routes: the same series.
    let second = table(&["a"]);
    metrics.attach(&second);
    hit(&second, &metrics, "a");
    let text = metrics.encode();
    let a = "edgeplane_requests_total{backend=\"default/a:80\",code=\"200\",\
                 gateway=\"default/gw\",listener=\"http\",method=\"GET\",\
                 route=\"HTTPRoute/default/a\",rule=\"0\"} 2";
    assert!(text.contains(a), "{text}");
    assert!(!text.contains("HTTPRoute/default/b"), "{text}");
    assert!(!text.contains("default/b:80"), "{text}");
    // A status without a slot of its own takes the slow path and is removed all the same.
    let index = SeriesIndex::of(&second).unwrap();
    let listener = second.listeners.values().next().unwrap();
    let vhost = listener.hosts.iter().next().unwrap();
    let cell = index.rule(listener, 0, &vhost.rules[0]).unwrap();
    let teapot = http::StatusCode::IM_A_TEAPOT;
    let cell = cell.cell(Some(0)).unwrap();
    cell.record(&metrics.http, 9, teapot, Duration::ZERO);
    assert!(metrics.encode().contains("code=\"418\""));
    metrics.attach(&RouteTable::default());
    let text = metrics.encode();
    assert!(!text.contains("HTTPRoute/default/a"), "{text}");
    assert!(!text.contains("route_backends{"), "{text}");
}

#[test]
fn a_rule_the_next_table_keeps_keeps_its_cells_until_a_table_drops_it() {
    let metrics = Metrics::new();
    let first = table(&["a", "b"]);
    metrics.attach(&first);
    hit(&first, &metrics, "a");
    // The translator hands an unchanged route's rules over as the same objects.
    let a = rules(&first).into_iter().find(|r| r.route.name() == "a");
    let c = rules(&table(&["c"]));
    let second = table_of(a.into_iter().chain(c).collect());
    metrics.attach(&second);
    let kept = SeriesIndex::of(&second).map(SeriesIndex::rules_kept);
    assert_eq!(kept, Some(1), "a's rule is kept, c's resolved");
    assert!(std::ptr::eq(cell_of(&first, "a"), cell_of(&second, "a")));
    hit(&second, &metrics, "a");
    hit(&second, &metrics, "c");
    let text = metrics.encode();
    assert!(
        text.contains("route=\"HTTPRoute/default/a\",rule=\"0\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("route=\"HTTPRoute/default/c\",rule=\"0\"} 1"),
        "{text}"
    );
    assert!(!text.contains("HTTPRoute/default/b"), "{text}");
    let announced = |text: &str, route: &str| {
        text.lines()
            .any(|l| l.starts_with("edgeplane_route_backends{") && l.contains(route))
    };
    assert!(announced(&text, "HTTPRoute/default/a"), "{text}");
    assert!(announced(&text, "HTTPRoute/default/c"), "{text}");
    // The next table keeps c's rule only: a's series leave.
    let c = rules(&second).into_iter().filter(|r| r.route.name() == "c");
    let third = table_of(c.collect());
    metrics.attach(&third);
    let text = metrics.encode();
    assert!(!text.contains("HTTPRoute/default/a"), "{text}");
    assert!(
        text.contains("route=\"HTTPRoute/default/c\",rule=\"0\"} 1"),
        "{text}"
    );
    assert!(announced(&text, "HTTPRoute/default/c"), "{text}");
}
