//! Balancing, outlier ejection, circuit breaking and endpoint draining through the proxy:
//! echo backends that say which endpoint answered, a backend that answers 502, slow requests
//! (`?delay=`) that hold circuit-breaker slots, and a rolling restart under continuous
//! traffic. Every wait is bounded; assertions are on counts and bounds, not speeds.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgeplane::proxy::{BreakerLimits, OutlierOptions, ProxyOptions, OVERLOADED};
use edgeplane::table::{Balance, HashOn, RouteTable, ServiceBackend, ServiceKey, UpstreamProtocol};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::client::{get, h1_client, send, TestClient};
use crate::support::echo::{start_echo, start_fleet, Echo};
use crate::support::net::{bind_loopback, free_addr};
use crate::support::proxy::{start, start_with, test_options};
use crate::support::tables::*;

/// Service `default/app:80` with ready and terminating endpoints and a balancer.
fn app(ready: &[SocketAddr], terminating: &[SocketAddr], balance: Balance) -> Arc<ServiceBackend> {
    Arc::new(ServiceBackend {
        service: ServiceKey {
            namespace: "default".into(),
            name: "app".into(),
            port: 80,
        },
        endpoints: ready.to_vec(),
        terminating: terminating.to_vec(),
        protocol: UpstreamProtocol::Http1,
        balance,
        limits: None,
    })
}

fn table_to(addr: SocketAddr, svc: &Arc<ServiceBackend>) -> RouteTable {
    single(addr, vec![rule("r").backend(to(svc)).build()])
}

fn addrs(fleet: &[Echo]) -> Vec<SocketAddr> {
    fleet.iter().map(|e| e.addr).collect()
}

/// A keep-alive backend answering every request with 502, counting requests.
async fn start_failing() -> (SocketAddr, Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = s.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        seen.fetch_add(1, Ordering::SeqCst);
                        let resp = b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n";
                        if s.write_all(resp).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, count, task)
}

#[tokio::test]
async fn consistent_hashing_on_a_header_keeps_each_key_on_one_endpoint() {
    let fleet = start_fleet(&["a", "b", "c"]).await;
    let on = HashOn::Header("x-user".into());
    let svc = app(&addrs(&fleet), &[], Balance::ConsistentHash { on });
    let addr = free_addr();
    let _proxy = start(table_to(addr, &svc)).await;
    let c = h1_client();
    let mut owners = HashSet::new();
    for user in 0..12 {
        let mut pods = HashSet::new();
        for _ in 0..5 {
            let mut req = get(addr, "h", "/");
            req.headers_mut()
                .insert("x-user", format!("user-{user}").parse().unwrap());
            let r = send(&c, req).await.unwrap();
            assert_eq!(r.status, 200);
            pods.insert(r.pod().unwrap());
        }
        assert_eq!(pods.len(), 1, "user-{user} went to {pods:?}");
        owners.extend(pods);
    }
    assert!(owners.len() > 1, "12 keys all on {owners:?}");
    // Without the header: least request over every endpoint.
    let mut pods = HashSet::new();
    for _ in 0..60 {
        pods.insert(send(&c, get(addr, "h", "/")).await.unwrap().pod().unwrap());
    }
    assert_eq!(pods.len(), 3, "{pods:?}");
}

#[tokio::test]
async fn an_endpoint_answering_502_is_ejected_then_returns() {
    let good = start_echo("good").await;
    let (bad, bad_count, _task) = start_failing().await;
    let svc = app(&[good.addr, bad], &[], Balance::RoundRobin);
    let addr = free_addr();
    let options = ProxyOptions {
        outlier: OutlierOptions {
            consecutive_failures: 3,
            base_ejection: Duration::from_secs(3),
            ..OutlierOptions::default()
        },
        ..test_options()
    };
    let proxy = start_with(table_to(addr, &svc), options).await;
    let c = h1_client();
    // Round robin alternates: the third failure comes within a few requests.
    let mut third_sent = None;
    for _ in 0..40 {
        let sent = Instant::now();
        let r = send(&c, get(addr, "h", "/")).await.unwrap();
        if r.status != 200 {
            assert_eq!(r.status, 502);
            if bad_count.load(Ordering::SeqCst) == 3 {
                third_sent = Some(sent);
                break;
            }
        }
    }
    // The ejection started after this and lasts 3 s.
    let ejected_at = third_sent.expect("three failures within 40 requests");
    assert_eq!(bad_count.load(Ordering::SeqCst), 3);
    let metrics = proxy.metrics.encode();
    assert!(
        metrics.contains("edgeplane_outlier_ejections_total{backend=\"default/app:80\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("edgeplane_outlier_ejected_endpoints 1"));
    // Within the interval nothing reaches it.
    let mut checked = 0;
    while checked < 20 && ejected_at.elapsed() < Duration::from_secs(2) {
        let r = send(&c, get(addr, "h", "/")).await.unwrap();
        assert_eq!(r.status, 200, "no request reaches the ejected endpoint");
        checked += 1;
    }
    assert!(checked > 0);
    assert_eq!(bad_count.load(Ordering::SeqCst), 3);
    // After it, the endpoint gets requests again (bounded wait).
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(ejected_at.elapsed())).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while bad_count.load(Ordering::SeqCst) == 3 {
        assert!(
            Instant::now() < deadline,
            "the ejected endpoint never returned"
        );
        let _ = send(&c, get(addr, "h", "/")).await.unwrap();
    }
    assert!(bad_count.load(Ordering::SeqCst) > 3);
}

#[tokio::test]
async fn an_endpoint_refusing_connections_is_ejected() {
    let good = start_echo("good").await;
    let dead = free_addr();
    let svc = app(&[good.addr, dead], &[], Balance::RoundRobin);
    let addr = free_addr();
    let options = ProxyOptions {
        outlier: OutlierOptions {
            consecutive_failures: 2,
            ..OutlierOptions::default()
        },
        ..test_options()
    };
    let proxy = start_with(table_to(addr, &svc), options).await;
    let c = h1_client();
    // A refused connection is tried again on the other endpoint: every client gets 200.
    for _ in 0..30 {
        let r = send(&c, get(addr, "h", "/")).await.unwrap();
        assert_eq!(r.status, 200);
    }
    let metrics = proxy.metrics.encode();
    assert!(metrics.contains("edgeplane_outlier_ejections_total{backend=\"default/app:80\"} 1"));
    // Ejected after two refusals: no further attempt goes to it, so nothing is retried.
    let unsent = || unsent_retries(&proxy.metrics.encode());
    assert_eq!(unsent(), 2, "{metrics}");
    for _ in 0..20 {
        let r = send(&c, get(addr, "h", "/")).await.unwrap();
        assert_eq!(r.status, 200);
    }
    assert_eq!(unsent(), 2);
}

/// Every `edgeplane_upstream_retries_total` series of a metrics text, summed.
fn retries_total(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("edgeplane_upstream_retries_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// `edgeplane_upstream_retries_total{reason="unsent"}` in a metrics text.
fn unsent_retries(metrics: &str) -> u64 {
    metrics
        .lines()
        .find(|l| l.starts_with("edgeplane_upstream_retries_total") && l.contains("\"unsent\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Sends `path` until a response is 503 or `within` passes; returns that response's
/// overload header and how long the 503 itself took.
async fn first_shed(c: &TestClient, addr: SocketAddr, within: Duration) -> (String, Duration) {
    let deadline = Instant::now() + within;
    loop {
        assert!(Instant::now() < deadline, "nothing was shed");
        let sent = Instant::now();
        let r = send(c, get(addr, "h", "/")).await.unwrap();
        if r.status == 503 {
            return (r.header(OVERLOADED).unwrap_or_default(), sent.elapsed());
        }
        assert_eq!(r.status, 200);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn shed_while_slow_requests_hold(limits: BreakerLimits, slow: usize) -> (String, Duration) {
    let echo = start_echo("slow").await;
    let svc = app(&[echo.addr], &[], Balance::LeastRequest);
    let addr = free_addr();
    let options = ProxyOptions {
        breaker: limits,
        // No idle upstream connections: the open ones are exactly the busy ones.
        upstream_max_idle_per_endpoint: 0,
        ..test_options()
    };
    let _proxy = start_with(table_to(addr, &svc), options).await;
    let held: Vec<_> = (0..slow)
        .map(|_| {
            tokio::spawn(async move {
                let c = h1_client();
                send(&c, get(addr, "h", "/?delay=5s")).await.unwrap().status
            })
        })
        .collect();
    // The held requests last 5 s: the limit is reached well within 4 s.
    let shed = first_shed(&h1_client(), addr, Duration::from_secs(4)).await;
    for h in held {
        assert_eq!(h.await.unwrap(), 200, "held requests finish normally");
    }
    shed
}

#[tokio::test]
async fn requests_over_the_concurrency_limit_get_503_at_once() {
    let limits = BreakerLimits {
        max_requests: 2,
        ..BreakerLimits::default()
    };
    let (why, took) = shed_while_slow_requests_hold(limits, 2).await;
    assert_eq!(why, "max-requests");
    assert!(took < Duration::from_secs(1), "shed after {took:?}");
}

#[tokio::test]
async fn requests_over_the_pending_limit_get_503_at_once() {
    let limits = BreakerLimits {
        max_pending: 1,
        ..BreakerLimits::default()
    };
    let (why, took) = shed_while_slow_requests_hold(limits, 1).await;
    assert_eq!(why, "max-pending");
    assert!(took < Duration::from_secs(1), "shed after {took:?}");
}

#[tokio::test]
async fn busy_connections_over_the_limit_get_503() {
    let limits = BreakerLimits {
        max_connections: 1,
        ..BreakerLimits::default()
    };
    let (why, took) = shed_while_slow_requests_hold(limits, 1).await;
    assert_eq!(why, "max-connections");
    assert!(took < Duration::from_secs(1), "shed after {took:?}");
}

#[tokio::test]
async fn terminating_endpoints_take_traffic_only_when_none_is_ready() {
    let fleet = start_fleet(&["new", "old"]).await;
    let (new, old) = (fleet[0].addr, fleet[1].addr);
    let addr = free_addr();
    let both = app(&[new], &[old], Balance::LeastRequest);
    let proxy = start(table_to(addr, &both)).await;
    let c = h1_client();
    for _ in 0..20 {
        let r = send(&c, get(addr, "h", "/")).await.unwrap();
        assert_eq!(r.pod().as_deref(), Some("new"));
    }
    let only_old = app(&[], &[old], Balance::LeastRequest);
    proxy.publish(table_to(addr, &only_old)).await;
    for _ in 0..10 {
        let r = send(&c, get(addr, "h", "/")).await.unwrap();
        assert_eq!(r.pod().as_deref(), Some("old"));
    }
    // A request in flight on an endpoint that leaves the table finishes there.
    let slow = tokio::spawn(async move {
        send(&h1_client(), get(addr, "h", "/?delay=1s"))
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy
        .publish(table_to(addr, &app(&[new], &[], Balance::LeastRequest)))
        .await;
    let r = slow.await.unwrap();
    assert_eq!((r.status.as_u16(), r.pod().as_deref()), (200, Some("old")));
    let r = send(&c, get(addr, "h", "/")).await.unwrap();
    assert_eq!(r.pod().as_deref(), Some("new"));
}

/// Replaces each of three backends in turn (new one ready; old one terminating; old one gone
/// from the table; old server closed) while two clients send requests without pause. Prints
/// the totals (`benches/rolling-restart.sh` runs this test for them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_traffic_fails_no_request() {
    let mut old = start_fleet(&["v1-0", "v1-1", "v1-2"]).await;
    let addr = free_addr();
    let mut ready: Vec<SocketAddr> = addrs(&old);
    let proxy = start(table_to(addr, &app(&ready, &[], Balance::LeastRequest))).await;
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            tokio::spawn(async move {
                let c = h1_client();
                let (mut sent, mut failed) = (0usize, Vec::new());
                let mut pods: HashMap<String, usize> = HashMap::new();
                // Bounded: the script ends the loop, and no client sends more than this.
                while !stop.load(Ordering::SeqCst) && sent < 200_000 {
                    sent += 1;
                    match send(&c, get(addr, "h", "/")).await {
                        Ok(r) if r.status == 200 => {
                            *pods.entry(r.pod().unwrap_or_default()).or_default() += 1;
                        }
                        Ok(r) => failed.push(r.status.to_string()),
                        Err(e) => failed.push(e.to_string()),
                    }
                }
                (sent, failed, pods)
            })
        })
        .collect();
    let mut new = Vec::new();
    let step = Duration::from_millis(150);
    for i in 0..3 {
        tokio::time::sleep(step).await;
        let fresh = start_echo(&format!("v2-{i}")).await;
        ready.push(fresh.addr);
        new.push(fresh);
        proxy
            .publish(table_to(addr, &app(&ready, &[], Balance::LeastRequest)))
            .await;
        tokio::time::sleep(step).await;
        let leaving = ready.remove(0);
        proxy
            .publish(table_to(
                addr,
                &app(&ready, &[leaving], Balance::LeastRequest),
            ))
            .await;
        tokio::time::sleep(step).await;
        proxy
            .publish(table_to(addr, &app(&ready, &[], Balance::LeastRequest)))
            .await;
        tokio::time::sleep(step).await;
        drop(old.remove(0));
    }
    tokio::time::sleep(step).await;
    stop.store(true, Ordering::SeqCst);
    let (mut sent, mut failed, mut pods) = (0, Vec::new(), HashMap::new());
    for c in clients {
        let (s, f, p) = tokio::time::timeout(Duration::from_secs(30), c)
            .await
            .expect("clients stop")
            .unwrap();
        sent += s;
        failed.extend(f);
        for (k, v) in p {
            *pods.entry(k).or_insert(0) += v;
        }
    }
    let retried = retries_total(&proxy.metrics.encode());
    println!(
        "rolling restart: requests={sent} failures={} retried={retried}",
        failed.len()
    );
    // Draining alone kept every request whole: none needed a retry either.
    assert_eq!(retried, 0);
    assert!(failed.is_empty(), "failed: {failed:?}");
    assert!(sent > 0);
    // Traffic moved to the new backends.
    assert!(pods.keys().any(|p| p.starts_with("v2-")), "{pods:?}");
}
