//! The control-plane metrics of `serve --kubernetes` against the API emulator: leadership,
//! status writes and conflicts, watch events and restarts per kind, objects by kind, and the
//! propagation lag of a watch event (from the event received to the table serving the route
//! it brought).

use std::time::{Duration, Instant};

use super::harness::*;
use super::support::apiserver::ApiServer;
use super::support::echo::start_fleet;
use super::support::proxy::metric_sum;
use super::T;

/// Reads the replica's metrics until `done` holds, within [`T`].
async fn until(replica: &Replica, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + T;
    loop {
        let m = replica.published.metrics().encode();
        if done(&m) {
            return m;
        }
        assert!(Instant::now() < deadline, "{what} within {T:?}:\n{m}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_status_writes_watch_events_and_propagation_are_measured() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &["gw"], &[("svc-a", echoes[0].addr)]);
    api.insert(route("web", "r", "gw", "example.com", "/", "svc-a"));
    let replica = Replica::start(&api, "one", port_base()).await;
    let port = wait_gateway_port(&api, "web", "gw", 80).await;
    replica
        .wait_for(port, "example.com", "/x", 200, Some("pod-a"), T)
        .await
        .unwrap();

    let m = until(&replica, "leading and a status written", |m| {
        m.contains("edgeplane_leader 1")
            && metric_sum(m, "edgeplane_status_writes_total", &[r#"result="ok""#]) >= 1.0
    })
    .await;
    let kind = |k: &str| format!(r#"kind="{k}""#);
    assert!(metric_sum(&m, "edgeplane_watch_events_total", &[&kind("HTTPRoute")]) >= 1.0);
    assert!(
        m.contains(r#"edgeplane_watch_restarts_total{kind="Gateway"} 0"#),
        "every watched kind at 0 from the start: {m}"
    );
    assert_eq!(
        metric_sum(&m, "edgeplane_objects", &[&kind("HTTPRoute")]),
        1.0,
        "{m}"
    );
    assert!(m.contains(r#"route="HTTPRoute/web/r""#), "{m}");
    let before = metric_sum(&m, "edgeplane_propagation_seconds_count", &[]);

    // A new route arrives as a watch event: once it serves, its propagation was measured.
    // On a host of its own: `r` answers every path of `example.com`.
    api.insert(route("web", "s", "gw", "s.example.com", "/", "svc-a"));
    replica
        .wait_for(port, "s.example.com", "/x", 200, Some("pod-a"), T)
        .await
        .unwrap();
    let m = replica.published.metrics().encode();
    let after = metric_sum(&m, "edgeplane_propagation_seconds_count", &[]);
    assert!(after > before, "{before} -> {after}: {m}");
    assert_eq!(
        metric_sum(&m, "edgeplane_objects", &[&kind("HTTPRoute")]),
        2.0,
        "{m}"
    );

    // A watch that fails is restarted and counted; a status write refused with a conflict is
    // counted as one (and written again).
    api.fail_requests(Some("GET"), "/httproutes", 2, 500);
    api.close_watches();
    until(&replica, "a restarted HTTPRoute watch", |m| {
        metric_sum(m, "edgeplane_watch_restarts_total", &[&kind("HTTPRoute")]) >= 1.0
    })
    .await;
    api.fail_requests(Some("PATCH"), "/httproutes/t", 1, 409);
    api.insert(route("web", "t", "gw", "example.com", "/t", "svc-a"));
    until(&replica, "a status write conflict", |m| {
        metric_sum(
            m,
            "edgeplane_status_writes_total",
            &[r#"result="conflict""#],
        ) >= 1.0
    })
    .await;
    replica.stop().await;
}
