//! The registry end to end without sockets: balancing through `pick`, ejection and return by
//! the clock, circuit-breaker slots held by `Picked`, sweeping of unused state.

use std::time::Duration;

use super::*;
use crate::proxy::error::Overload;
use crate::table::HashOn;

fn key(name: &str) -> ServiceKey {
    ServiceKey {
        namespace: "default".into(),
        name: name.into(),
        port: 80,
    }
}

fn addrs(n: u8) -> Vec<SocketAddr> {
    (1..=n)
        .map(|i| SocketAddr::from(([10, 0, 0, i], 80)))
        .collect()
}

fn service(endpoints: Vec<SocketAddr>, balance: Balance) -> ServiceBackend {
    ServiceBackend {
        service: key("svc"),
        endpoints,
        terminating: Vec::new(),
        protocol: UpstreamProtocol::Http1,
        balance,
        limits: None,
    }
}

fn registry(outlier: OutlierOptions, limits: BreakerLimits) -> Backends {
    Backends::new(outlier, limits, Metrics::new(), Arc::default())
}

fn pick(b: &Backends, s: &ServiceBackend) -> SocketAddr {
    b.pick(s, &PickRequest::default()).map(|p| p.addr).unwrap()
}

#[test]
fn least_request_avoids_the_endpoint_with_requests_in_flight() {
    let b = registry(OutlierOptions::default(), BreakerLimits::default());
    let s = service(addrs(2), Balance::LeastRequest);
    let held: Vec<Picked> = (0..3)
        .map(|_| b.pick(&s, &PickRequest::default()).unwrap())
        .filter(|p| p.addr == s.endpoints[0])
        .collect();
    if !held.is_empty() {
        for _ in 0..50 {
            assert_eq!(pick(&b, &s), s.endpoints[1]);
        }
    }
}

#[test]
fn round_robin_cycles_across_tables() {
    let b = registry(OutlierOptions::default(), BreakerLimits::default());
    let s = service(addrs(3), Balance::RoundRobin);
    let first: Vec<_> = (0..3).map(|_| pick(&b, &s)).collect();
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(sorted, s.endpoints, "each endpoint once per cycle");
    // A new table with an equal Service continues the same counter.
    let again = service(addrs(3), Balance::RoundRobin);
    let next: Vec<_> = (0..3).map(|_| pick(&b, &again)).collect();
    assert_eq!(first, next);
}

#[test]
fn consistent_hash_keeps_a_key_and_falls_back_without_one() {
    let b = registry(OutlierOptions::default(), BreakerLimits::default());
    let on = HashOn::Header("x-user".into());
    let s = service(addrs(4), Balance::ConsistentHash { on });
    let req = PickRequest {
        hash: Some(12345),
        ..Default::default()
    };
    let first = b.pick(&s, &req).unwrap().addr;
    for _ in 0..20 {
        assert_eq!(b.pick(&s, &req).unwrap().addr, first);
    }
    // Tried already: another endpoint.
    let exclude = [first];
    let retry = PickRequest {
        exclude: &exclude,
        ..req
    };
    assert_ne!(b.pick(&s, &retry).unwrap().addr, first);
    assert!(s.endpoints.contains(&pick(&b, &s)));
}

#[test]
fn failures_eject_until_the_interval_passes_and_the_last_endpoint_stays() {
    let outlier = OutlierOptions {
        consecutive_failures: 3,
        base_ejection: Duration::from_millis(200),
        ..OutlierOptions::default()
    };
    let b = registry(outlier, BreakerLimits::default());
    let s = service(addrs(2), Balance::RoundRobin);
    let bad = s.endpoints[0];
    let mut failures = 0;
    while failures < 3 {
        let p = b.pick(&s, &PickRequest::default()).unwrap();
        if p.addr == bad {
            p.report(Outcome::Failure);
            failures += 1;
        } else {
            p.report(Outcome::Success);
        }
    }
    for _ in 0..20 {
        assert_ne!(pick(&b, &s), bad, "ejected");
    }
    assert_eq!(b.ejected(), [bad], "what the dashboard marks as ejected");
    // The good one fails too: the cap (50% of 2) keeps it.
    for _ in 0..5 {
        let p = b.pick(&s, &PickRequest::default()).unwrap();
        p.report(Outcome::Failure);
    }
    assert_ne!(pick(&b, &s), bad);
    std::thread::sleep(Duration::from_millis(250));
    let back = (0..20).any(|_| pick(&b, &s) == bad);
    assert!(back, "the ejected endpoint returns after its interval");
    assert_eq!(b.settings.endpoints.ejected.load(Ordering::Relaxed), 0);
    assert!(b.ejected().is_empty());
}

#[test]
fn breaker_slots_are_held_until_the_picked_endpoint_drops() {
    let limits = BreakerLimits {
        max_requests: 2,
        ..BreakerLimits::default()
    };
    let b = registry(OutlierOptions::default(), limits);
    let s = service(addrs(2), Balance::LeastRequest);
    let one = b.pick(&s, &PickRequest::default()).unwrap();
    let two = b.pick(&s, &PickRequest::default()).unwrap();
    let over = b.pick(&s, &PickRequest::default());
    assert!(matches!(
        over,
        Err(ProxyError::Overloaded {
            limit: Overload::MaxRequests,
            ..
        })
    ));
    drop(one);
    two.report(Outcome::Success);
    assert!(b.pick(&s, &PickRequest::default()).is_ok());
}

#[test]
fn terminating_endpoints_serve_only_when_none_is_ready() {
    let b = registry(OutlierOptions::default(), BreakerLimits::default());
    let mut s = service(addrs(1), Balance::LeastRequest);
    s.terminating = vec![SocketAddr::from(([10, 0, 1, 1], 80))];
    for _ in 0..20 {
        assert_eq!(pick(&b, &s), s.endpoints[0]);
    }
    s.endpoints.clear();
    assert_eq!(pick(&b, &s), s.terminating[0]);
    s.terminating.clear();
    assert!(matches!(
        b.pick(&s, &PickRequest::default()),
        Err(ProxyError::NoEndpoints { .. })
    ));
}

#[test]
fn state_of_endpoints_and_services_nobody_uses_is_swept() {
    let b = registry(OutlierOptions::default(), BreakerLimits::default());
    for round in 0..40u16 {
        let eps: Vec<SocketAddr> = (0..10)
            .map(|i| SocketAddr::from(([10, 1, (round % 200) as u8, i], 80)))
            .collect();
        let mut s = service(eps, Balance::RoundRobin);
        s.service = key(&format!("svc-{round}"));
        for _ in 0..10 {
            pick(&b, &s);
        }
    }
    let (endpoints, services) = b.sizes();
    assert!(endpoints <= 140, "{endpoints} endpoint entries");
    assert!(services <= 140, "{services} service entries");
}

#[test]
fn mirrors_skip_ejected_endpoints() {
    let outlier = OutlierOptions {
        consecutive_failures: 1,
        ..OutlierOptions::default()
    };
    let b = registry(outlier, BreakerLimits::default());
    let s = service(addrs(2), Balance::RoundRobin);
    let bad = s.endpoints[0];
    loop {
        let p = b.pick(&s, &PickRequest::default()).unwrap();
        if p.addr == bad {
            p.report(Outcome::Failure);
            break;
        }
    }
    for _ in 0..20 {
        assert_eq!(b.spare_endpoint(&s, &[]).unwrap(), s.endpoints[1]);
    }
    let none = service(Vec::new(), Balance::RoundRobin);
    assert!(b.spare_endpoint(&none, &[]).is_err());
}

#[test]
fn the_retry_budget_allows_its_floor_then_a_share_of_requests_in_flight() {
    let b = registry(OutlierOptions::default(), BreakerLimits::default()).with_retry_budget(
        BudgetLimits {
            percent: 20,
            min_concurrent: 2,
        },
    );
    let s = service(addrs(3), Balance::RoundRobin);
    let first = b.retry_permit(&s.service, None).expect("within the floor");
    let second = b.retry_permit(&s.service, None).expect("within the floor");
    assert!(
        b.retry_permit(&s.service, None).is_none(),
        "floor of 2 reached"
    );
    drop(first);
    let _third = b
        .retry_permit(&s.service, None)
        .expect("a retry ended, one more fits");
    drop(second);
    // 20 requests in flight: 20% is 4 retries in flight, 1 of them taken.
    let held: Vec<Picked> = (0..20)
        .map(|_| b.pick(&s, &PickRequest::default()).unwrap())
        .collect();
    let permits: Vec<RetryPermit> = (0..5)
        .filter_map(|_| b.retry_permit(&s.service, None))
        .collect();
    assert_eq!(permits.len(), 3);
    drop(held);
    drop(permits);
}
