//! Leader failover timing against the API emulator: a graceful stop releases the Lease so the
//! follower takes over at its next retry; a crash leaves it to expire after the lease
//! duration, and not earlier; a holder that cannot renew steps down at the renew deadline.

use std::time::{Duration, Instant};

use edgeplane::provider::kube::KubeOptions;

use crate::harness::{options, port_base, Replica, SYSTEM_NS};
use crate::support::apiserver::ApiServer;
use crate::support::net::loopback_ip;
use crate::T;

const LEASE: &str = "edgeplane-leader";

/// Harness options with the given election timing.
fn timed(name: &str, base: u16, lease: Duration, renew: Duration, retry: Duration) -> KubeOptions {
    let mut o = options(name, base);
    o.lease_duration = lease;
    o.lease_renew_deadline = renew;
    o.lease_retry_period = retry;
    o
}

/// Polls `done` every 10 ms for at most `limit`; the time it took, if it happened.
async fn time_until(limit: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done().then(|| start.elapsed())
}

/// The Lease's holder as the API server has it.
fn holder(api: &ApiServer) -> Option<String> {
    api.object("leases", SYSTEM_NS, LEASE)
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_owned))
        .filter(|h| !h.is_empty())
}

/// Starts replicas `a` and `b` with the same timing and waits for exactly one leader;
/// returns (leader, follower, follower's name).
async fn leader_and_follower(
    api: &ApiServer,
    lease: Duration,
    renew: Duration,
    retry: Duration,
) -> (Replica, Replica, &'static str) {
    let base = port_base();
    let a = Replica::start_with(api, timed("a", base, lease, renew, retry), loopback_ip()).await;
    let b = Replica::start_with(api, timed("b", base, lease, renew, retry), loopback_ip()).await;
    let one = time_until(T, || a.is_leader() ^ b.is_leader()).await;
    assert!(one.is_some(), "exactly one leader expected");
    let (leader, follower, name) = if a.is_leader() {
        (a, b, "b")
    } else {
        (b, a, "a")
    };
    assert_eq!(
        holder(api).as_deref(),
        Some(if name == "a" { "b" } else { "a" })
    );
    (leader, follower, name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_hands_the_lease_over_within_a_retry_period() {
    let api = ApiServer::start().await;
    let s = Duration::from_secs;
    // The defaults: without the release, takeover would take about 15 s.
    let (mut leader, follower, name) = leader_and_follower(&api, s(15), s(10), s(2)).await;
    let start = Instant::now();
    leader.stop_controller().await;
    let took = time_until(s(5), || follower.is_leader())
        .await
        .map(|_| start.elapsed());
    assert!(
        took.is_some_and(|t| t < s(3)),
        "follower took over after {took:?}"
    );
    eprintln!("takeover {took:?} after a graceful stop");
    assert_eq!(holder(&api).as_deref(), Some(name));
    let lease = api.object("leases", SYSTEM_NS, LEASE).expect("the Lease");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 15, "{lease}");
    assert_eq!(lease["spec"]["leaseTransitions"], 1, "{lease}");
    follower.stop().await;
    leader.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_clears_the_holder_and_shortens_the_lease() {
    let api = ApiServer::start().await;
    let s = Duration::from_secs;
    let mut one = Replica::start_with(
        &api,
        timed("one", port_base(), s(15), s(10), s(2)),
        loopback_ip(),
    )
    .await;
    assert!(
        time_until(T, || one.is_leader()).await.is_some(),
        "no leader"
    );
    one.stop_controller().await;
    let lease = api.object("leases", SYSTEM_NS, LEASE).expect("the Lease");
    let spec = &lease["spec"];
    assert!(
        spec["holderIdentity"].as_str().is_none_or(str::is_empty),
        "{lease}"
    );
    assert_eq!(spec["leaseDurationSeconds"], 1, "{lease}");
    let acquired: jiff::Timestamp = spec["acquireTime"].as_str().unwrap().parse().unwrap();
    let renewed: jiff::Timestamp = spec["renewTime"].as_str().unwrap().parse().unwrap();
    let age = jiff::Timestamp::now().duration_since(renewed);
    assert!(
        age < jiff::SignedDuration::from_secs(5) && acquired <= renewed,
        "{lease}"
    );
    one.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_is_taken_over_after_the_lease_duration_not_before() {
    let api = ApiServer::start().await;
    let (lease, renew, retry) = (
        Duration::from_secs(3),
        Duration::from_secs(2),
        Duration::from_millis(500),
    );
    let (mut leader, follower, name) = leader_and_follower(&api, lease, renew, retry).await;
    // Let the follower see a few renewals first.
    tokio::time::sleep(retry * 3).await;
    assert!(!follower.is_leader());
    leader.crash_controller();
    let took = time_until(lease * 3, || follower.is_leader()).await;
    let slack = Duration::from_millis(1500);
    assert!(
        took.is_some_and(|t| t <= lease + retry + slack),
        "follower took over after {took:?}"
    );
    // The last renewal happened at most a retry period before the crash, and the follower
    // waits a whole lease duration after seeing it.
    let earliest = lease - retry - Duration::from_millis(250);
    assert!(
        took.is_some_and(|t| t >= earliest),
        "premature takeover after {took:?}"
    );
    assert_eq!(holder(&api).as_deref(), Some(name));
    eprintln!("takeover {took:?} after a crash");
    follower.stop().await;
    leader.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_steps_down_when_it_cannot_renew_within_the_deadline() {
    let api = ApiServer::start().await;
    let (lease, renew, retry) = (
        Duration::from_secs(3),
        Duration::from_secs(2),
        Duration::from_millis(500),
    );
    let mut one = Replica::start_with(
        &api,
        timed("one", port_base(), lease, renew, retry),
        loopback_ip(),
    )
    .await;
    assert!(
        time_until(T, || one.is_leader()).await.is_some(),
        "no leader"
    );
    api.set_unavailable(true);
    let took = time_until(lease * 2, || !one.is_leader()).await;
    // The last renewal started at most a retry period before the outage.
    assert!(
        took.is_some_and(|t| t >= renew - retry - Duration::from_millis(250)),
        "stepped down after {took:?}"
    );
    assert!(
        took.is_some_and(|t| t <= renew + retry + Duration::from_secs(1)),
        "stepped down after {took:?}"
    );
    eprintln!("stepped down {took:?} after the outage began");
    api.set_unavailable(false);
    let back = time_until(T, || one.is_leader()).await;
    assert!(back.is_some(), "leadership not regained after the outage");
    one.stop_controller().await;
    one.stop().await;
}
