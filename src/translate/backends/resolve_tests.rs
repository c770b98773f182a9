//! Resolving backendRefs: Services, ports, ReferenceGrants and what is recorded for incremental translation.

use super::*;
use crate::table::{Balance, HashOn};

#[test]
fn a_resolved_service_carries_its_balancer_and_draining_endpoints() {
    let service: Service = serde_yaml_ng::from_str(
        "metadata: {name: app, namespace: default, annotations: \
             {edgeplane.io/load-balancer: consistent-hash, edgeplane.io/hash-on: source-ip}}\n\
             spec: {ports: [{port: 80}]}",
    )
    .unwrap();
    let slice: EndpointSlice = serde_yaml_ng::from_str(
            "metadata: {name: app-1, namespace: default, \
             labels: {kubernetes.io/service-name: app}}\n\
             addressType: IPv4\n\
             ports: [{port: 8080}]\n\
             endpoints:\n\
             - {addresses: [10.0.0.1], conditions: {ready: true}}\n\
             - {addresses: [10.0.0.2], conditions: {ready: false, serving: true, terminating: true}}",
        )
        .unwrap();
    let snapshot = Snapshot {
        services: vec![Arc::new(service)],
        endpoint_slices: vec![Arc::new(slice)],
        ..Snapshot::default()
    };
    let mut backends = Backends::with_cache(&snapshot, BackendCache::default(), false);
    let r = BackendRef {
        from_kind: "HTTPRoute",
        group: None,
        kind: None,
        name: "app",
        namespace: None,
        port: Some(80),
    };
    let got = backends.resolve("default", &r).unwrap();
    assert_eq!(
        got.balance,
        Balance::ConsistentHash {
            on: HashOn::SourceIp
        }
    );
    assert_eq!(got.endpoints, vec!["10.0.0.1:8080".parse().unwrap()]);
    assert_eq!(got.terminating, vec!["10.0.0.2:8080".parse().unwrap()]);
}

#[test]
fn only_an_ingress_reaches_another_namespace_without_a_grant() {
    let service: Service = serde_yaml_ng::from_str(
        "metadata: {name: app, namespace: canaries}
spec: {ports: [{port: 80}]}",
    )
    .unwrap();
    let snapshot = Snapshot {
        services: vec![Arc::new(service)],
        ..Snapshot::default()
    };
    let mut backends = Backends::with_cache(&snapshot, BackendCache::default(), false);
    let from = |from_kind| BackendRef {
        from_kind,
        group: None,
        kind: None,
        name: "app",
        namespace: Some("canaries"),
        port: Some(80),
    };
    // A canary folded into an Ingress of `shop` from `canaries`.
    assert!(backends.resolve("shop", &from("Ingress")).is_ok());
    for kind in ["HTTPRoute", "GRPCRoute", "TrafficPolicy"] {
        let refused = backends.resolve("shop", &from(kind));
        assert!(
            matches!(
                refused.as_ref().map_err(|e| &**e),
                Err(BackendError::NotPermitted { .. })
            ),
            "{kind}: {refused:?}"
        );
    }
}

#[test]
fn a_recorded_reference_reads_back_as_it_was_resolved() {
    let snapshot = Snapshot::default();
    let mut backends = Backends::with_cache(&snapshot, BackendCache::default(), false);
    let r = BackendRef {
        from_kind: "GRPCRoute",
        group: Some(""),
        kind: Some("Service"),
        name: "app",
        namespace: Some("shop"),
        port: Some(8080),
    };
    let bare = BackendRef {
        group: None,
        kind: None,
        namespace: None,
        port: None,
        ..r
    };
    backends.record();
    let outcomes = [
        backends.resolve("shop", &r),
        backends.resolve("shop", &bare),
    ];
    let recorded = backends.recorded();
    assert_eq!(recorded.len(), 2);
    for ((owned, outcome), (r, resolved)) in recorded.iter().zip([r, bare].iter().zip(&outcomes)) {
        let back = owned.as_ref();
        assert_eq!(
            (
                back.from_kind,
                back.group,
                back.kind,
                back.name,
                back.namespace,
                back.port
            ),
            (r.from_kind, r.group, r.kind, r.name, r.namespace, r.port)
        );
        assert!(same_outcome(outcome, resolved));
    }
    // Interned: the two references share one copy of the Service name.
    assert!(std::ptr::eq(
        recorded[0].0.as_ref().name,
        recorded[1].0.as_ref().name
    ));
}

#[test]
fn a_recorded_reference_is_one_pointer_shared_by_equal_references() {
    let r = BackendRef {
        from_kind: "HTTPRoute",
        group: Some(""),
        kind: Some("Service"),
        name: "app",
        namespace: None,
        port: Some(80),
    };
    assert_eq!(
        std::mem::size_of::<OwnedRef>(),
        std::mem::size_of::<usize>()
    );
    let (a, b) = (OwnedRef::new(&r), OwnedRef::new(&r));
    assert_eq!(a, b);
    assert!(std::ptr::eq(
        a.as_ref().kind.unwrap(),
        b.as_ref().kind.unwrap()
    ));
    let other = OwnedRef::new(&BackendRef {
        port: Some(81),
        ..r
    });
    assert_ne!(a, other);
    assert_eq!(other.as_ref().port, Some(81));
}
