//! `/metrics` of the real binary: the build info, requests labelled by Gateway listener, route,
//! rule and backend, the propagation lag of a file change, the series of a removed route gone,
//! and the number of series 1,000 routes add (docs/metrics.md states it: 31 per route with a
//! backend of its own), and remove when they leave.

use std::time::{Duration, Instant};

use super::{admin_get, echo_fleet, get, route, serve, service, test_net, write, BASE};

/// Bound on every wait for the configuration to go live.
const WAIT: Duration = Duration::from_secs(60);

/// The value of the one series `line_prefix` starts (a family name, or a name with labels).
fn value(metrics: &str, line_prefix: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(line_prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Number of `edgeplane_` series in a metrics text.
fn series(metrics: &str) -> usize {
    metrics
        .lines()
        .filter(|l| l.starts_with("edgeplane_"))
        .count()
}

/// Scrapes until `done` holds, within [`WAIT`].
async fn scrape_until(
    admin: std::net::SocketAddr,
    what: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok((200, m)) = admin_get(admin, "/metrics").await {
            if done(&m) {
                return m;
            }
            assert!(Instant::now() < deadline, "{what} within {WAIT:?}:\n{m}");
        }
        assert!(Instant::now() < deadline, "{what}: /metrics did not answer");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_binary_labels_requests_and_measures_the_propagation_of_a_file_change() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "base.yaml",
        &format!("{BASE}{}", service("v1", &v1)),
    );
    write(dir.path(), "routes.yaml", &route("old", "/old", "v1"));
    let server = serve(dir.path(), net).await;

    let (_, m) = admin_get(server.admin, "/metrics").await.expect("metrics");
    let info = format!(
        "edgeplane_build_info{{commit=\"{}\",version=\"{}\"}} 1",
        env!("EDGEPLANE_COMMIT"),
        env!("CARGO_PKG_VERSION")
    );
    assert!(m.contains(&info), "{info} in:\n{m}");
    assert!(m.contains("process_resident_memory_bytes "), "{m}");
    assert_eq!(
        value(&m, "edgeplane_objects{kind=\"HTTPRoute\"}"),
        Some(1.0),
        "{m}"
    );
    let before = value(&m, "edgeplane_propagation_seconds_count").expect("propagation");

    let (status, _) = get(server.proxy, "/old/x").await.expect("request");
    assert_eq!(status, 200);
    let (_, m) = admin_get(server.admin, "/metrics").await.expect("metrics");
    let labels = "edgeplane_requests_total{backend=\"default/v1:80\",code=\"200\",\
                  gateway=\"default/gw\",listener=\"http\",method=\"GET\",\
                  route=\"HTTPRoute/default/old\",rule=\"0\"}";
    assert_eq!(value(&m, labels), Some(1.0), "{m}");

    // A file change: the new route goes live, and the lag from the change being seen to the
    // table serving it is observed.
    let both = format!(
        "{}{}",
        route("old", "/old", "v1"),
        route("new", "/new", "v1")
    );
    write(dir.path(), "routes.yaml", &both);
    let deadline = Instant::now() + WAIT;
    while get(server.proxy, "/new/y").await.map(|r| r.0).ok() != Some(200) {
        assert!(Instant::now() < deadline, "the new route did not go live");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, m) = admin_get(server.admin, "/metrics").await.expect("metrics");
    let after = value(&m, "edgeplane_propagation_seconds_count").expect("propagation");
    assert!(after > before, "{before} -> {after}:\n{m}");
    assert!(m.contains("route=\"HTTPRoute/default/new\""), "{m}");

    // The old route leaves the directory: its series leave /metrics.
    write(dir.path(), "routes.yaml", &route("new", "/new", "v1"));
    let m = scrape_until(server.admin, "the old route's series gone", |m| {
        !m.contains("HTTPRoute/default/old")
    })
    .await;
    assert!(m.contains("route=\"HTTPRoute/default/new\""), "{m}");
    assert_eq!(
        value(&m, "edgeplane_objects{kind=\"HTTPRoute\"}"),
        Some(1.0),
        "{m}"
    );
}

/// `count` HTTPRoutes `r<i>`, each with a Service `s<i>` of its own.
fn routes_and_services(count: usize) -> String {
    let mut out = String::new();
    for i in 0..count {
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: s{i}}}\n\
             spec: {{ports: [{{name: http, port: 80, targetPort: 3000}}]}}\n\
             ---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
             metadata: {{name: r{i}}}\nspec:\n  parentRefs: [{{name: gw}}]\n\
             \x20 hostnames: [r{i}.example]\n\
             \x20 rules: [{{backendRefs: [{{name: s{i}, port: 80}}]}}]\n"
        ));
    }
    out
}

/// Series per HTTPRoute with one rule and one backendRef to a Service of its own, as
/// docs/metrics.md states.
const SERIES_PER_ROUTE: usize = 31;

#[tokio::test]
async fn metrics_scale_a_thousand_routes_add_and_remove_the_documented_series() {
    let net = test_net();
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "base.yaml", BASE);
    let server = serve(dir.path(), net).await;
    let (_, m) = admin_get(server.admin, "/metrics").await.expect("metrics");
    let empty = series(&m);

    write(dir.path(), "routes.yaml", &routes_and_services(1000));
    let m = scrape_until(server.admin, "1,000 routes published", |m| {
        value(m, "edgeplane_table_rules ") == Some(1000.0)
    })
    .await;
    assert_eq!(series(&m) - empty, 1000 * SERIES_PER_ROUTE, "{m}");
    let live = m
        .lines()
        .filter(|l| l.starts_with("edgeplane_route_backends{"))
        .count();
    assert_eq!(live, 1000);

    write(dir.path(), "routes.yaml", &routes_and_services(500));
    let m = scrape_until(server.admin, "500 routes published", |m| {
        value(m, "edgeplane_table_rules ") == Some(500.0)
    })
    .await;
    assert_eq!(series(&m) - empty, 500 * SERIES_PER_ROUTE, "{m}");
    assert!(!m.contains("HTTPRoute/default/r500\""), "{m}");
    assert!(!m.contains("backend=\"default/s999:80\""), "{m}");
    assert!(m.contains("route=\"HTTPRoute/default/r499\""), "{m}");
}
