//! Conversion between v1alpha1 and v1beta1 of both kinds: round trips of random objects give
//! back the original in both directions, what has no place in the other version travels in
//! the conversion annotation, and an edit made through the other version is kept.

use edgeplane::kinds::crd::traffic_policy_auth::{
    AuthBackendRef, ErrorPagesPolicy, ExternalAuthHttp, ExternalAuthPolicy, ExternalAuthProtocol,
};
use std::collections::BTreeMap;

use edgeplane::kinds::crd::proxy_config as pb;
use edgeplane::kinds::crd::traffic_policy as tb;
use edgeplane::kinds::crd::v1alpha1::proxy_config as pa;
use edgeplane::kinds::crd::v1alpha1::traffic_policy as ta;
use edgeplane::kinds::crd::{convert, CONVERSION_ANNOTATION};
use proptest::collection::{btree_map, vec};
use proptest::option::of;
use proptest::prelude::*;
use serde_json::{json, Value};

const ALPHA: &str = "edgeplane.dev/v1alpha1";
const BETA: &str = "edgeplane.dev/v1beta1";

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,6}"
}

fn duration() -> impl Strategy<Value = String> {
    prop_oneof!["[1-9][0-9]{0,3}(ms|s|m|h)", "[1-9]s[1-9][0-9]{0,2}ms"]
}

fn cidr() -> impl Strategy<Value = String> {
    (0u8..=255, 8u8..=32).prop_map(|(a, p)| format!("10.{a}.0.0/{p}"))
}

fn target_ref() -> impl Strategy<Value = tb::PolicyTargetRef> {
    (
        prop_oneof![
            Just(("gateway.networking.k8s.io", "Gateway")),
            Just(("gateway.networking.k8s.io", "HTTPRoute")),
            Just(("", "Service")),
        ],
        name(),
        of(name()),
    )
        .prop_map(|((group, kind), name, section_name)| tb::PolicyTargetRef {
            group: group.to_owned(),
            kind: kind.to_owned(),
            name,
            section_name,
        })
}

fn algorithm() -> impl Strategy<Value = tb::LoadBalancerAlgorithm> {
    prop_oneof![
        Just(tb::LoadBalancerAlgorithm::LeastRequest),
        Just(tb::LoadBalancerAlgorithm::RoundRobin),
        Just(tb::LoadBalancerAlgorithm::ConsistentHash),
    ]
}

fn key_ref() -> impl Strategy<Value = tb::LocalObjectKeyRef> {
    (name(), of(name())).prop_map(|(name, key)| tb::LocalObjectKeyRef { name, key })
}

fn alpha_policy_spec() -> impl Strategy<Value = ta::TrafficPolicySpec> {
    (
        (
            target_ref(),
            of(duration()),
            of(duration()),
            of(0u32..10),
            vec(500u16..600, 0..3),
            of(duration()),
            of(0u32..100),
            of(algorithm()),
            of(name()),
            of(name()),
        ),
        (
            of(any::<bool>()),
            of(any::<u32>()),
            of(any::<u32>()),
            of(any::<u32>()),
            of(1u32..20),
            of(duration()),
            of(0u32..=100),
            of(any::<u32>()),
            of(any::<u32>()),
            of(name()),
        ),
        (
            of(name()),
            of("https://[a-z]{1,8}\\.example"),
            vec(name(), 0..3),
            of(name()),
            vec(cidr(), 0..3),
            vec(cidr(), 0..3),
            of(any::<u64>()),
            of(any::<u64>()),
        ),
    )
        .prop_map(|(a, b, c)| ta::TrafficPolicySpec {
            target_ref: a.0,
            request_timeout: a.1,
            backend_request_timeout: a.2,
            retries: a.3,
            retry_on: a.4,
            retry_backoff: a.5,
            retry_budget_percent: a.6,
            load_balancing: a.7,
            hash_header: a.8,
            hash_cookie: a.9,
            hash_source_ip: b.0,
            max_connections: b.1,
            max_pending_requests: b.2,
            max_requests: b.3,
            eject_after_errors: b.4,
            ejection_time: b.5,
            max_ejection_percent: b.6,
            requests_per_second: b.7,
            burst: b.8,
            basic_auth_secret: b.9,
            realm: c.0,
            jwt_issuer: c.1,
            jwt_audiences: c.2,
            jwks_secret: c.3,
            allow_cidrs: c.4,
            deny_cidrs: c.5,
            max_request_body_bytes: c.6,
            max_response_body_bytes: c.7,
        })
}

fn provider() -> impl Strategy<Value = tb::JwtProvider> {
    (
        name(),
        "https://[a-z]{1,8}\\.example",
        vec(name(), 0..3),
        prop_oneof![
            key_ref().prop_map(|r| tb::JwksSource {
                secret_ref: Some(r),
                config_map_ref: None
            }),
            key_ref().prop_map(|r| tb::JwksSource {
                secret_ref: None,
                config_map_ref: Some(r)
            }),
        ],
        vec(
            (name(), name()).prop_map(|(claim, header)| tb::ClaimToHeader { claim, header }),
            0..2,
        ),
    )
        .prop_map(
            |(name, issuer, audiences, jwks, claims_to_headers)| tb::JwtProvider {
                name,
                issuer,
                audiences,
                jwks,
                claims_to_headers,
            },
        )
}

fn beta_policy_spec() -> impl Strategy<Value = tb::TrafficPolicySpec> {
    let timeouts = (of(duration()), of(duration())).prop_map(|(request, backend_request)| {
        tb::PolicyTimeouts {
            request,
            backend_request,
        }
    });
    let retry = (
        of(0u32..10),
        vec(500u16..600, 0..3),
        of(duration()),
        of(
            (of(0u32..100), of(0u32..10)).prop_map(|(percent, min_retries)| tb::RetryBudget {
                percent,
                min_retries,
            }),
        ),
    )
        .prop_map(|(attempts, codes, backoff, budget)| tb::PolicyRetry {
            attempts,
            codes,
            backoff,
            budget,
        });
    let lb = (
        algorithm(),
        of((
            of(name()),
            of(name()),
            of(name()),
            of(any::<bool>()),
            of(any::<bool>()),
            of(any::<bool>()),
        )
            .prop_map(
                |(header, cookie, query_parameter, source_ip, path, path_and_query)| tb::HashKey {
                    header,
                    cookie,
                    query_parameter,
                    source_ip,
                    path,
                    path_and_query,
                },
            )),
    )
        .prop_map(|(algorithm, hash)| tb::LoadBalancerPolicy { algorithm, hash });
    let breaker = (of(any::<u32>()), of(any::<u32>()), of(any::<u32>())).prop_map(|(a, b, c)| {
        tb::CircuitBreakerPolicy {
            max_connections: a,
            max_pending_requests: b,
            max_requests: c,
        }
    });
    let outlier = (of(1u32..20), of(duration()), of(0u32..=100)).prop_map(|(a, b, c)| {
        tb::OutlierDetectionPolicy {
            consecutive_errors: a,
            base_ejection_time: b,
            max_ejection_percent: c,
        }
    });
    let rate = (
        0u32..100_000,
        prop_oneof![
            Just(tb::RateLimitUnit::Second),
            Just(tb::RateLimitUnit::Minute),
            Just(tb::RateLimitUnit::Hour)
        ],
        of(any::<u32>()),
        of(prop_oneof![
            Just(tb::RateLimitKeyType::ClientIP),
            Just(tb::RateLimitKeyType::Header),
            Just(tb::RateLimitKeyType::Route)
        ]
        .prop_flat_map(|type_| {
            of(name()).prop_map(move |header| tb::RateLimitKey { type_, header })
        })),
    )
        .prop_map(|(requests, unit, burst, key)| tb::RateLimitPolicy {
            requests,
            unit,
            burst,
            key,
        });
    let basic = (key_ref(), of(name()))
        .prop_map(|(secret_ref, realm)| tb::BasicAuthPolicy { secret_ref, realm });
    let jwt = (vec(provider(), 0..3), of(any::<bool>())).prop_map(|(providers, optional)| {
        tb::JwtPolicy {
            providers,
            optional,
        }
    });
    let ip = (vec(cidr(), 0..3), vec(cidr(), 0..3))
        .prop_map(|(allow, deny)| tb::IpAccessPolicy { allow, deny });
    let body = (of(any::<u64>()), of(any::<u64>())).prop_map(|(a, b)| tb::BodyLimitsPolicy {
        max_request_bytes: a,
        max_response_bytes: b,
    });
    let auth = (
        any::<bool>(),
        name(),
        of(1i32..65536),
        of(name()),
        of(duration()),
    )
        .prop_map(|(grpc, name, port, path, timeout)| ExternalAuthPolicy {
            protocol: if grpc {
                ExternalAuthProtocol::Grpc
            } else {
                ExternalAuthProtocol::Http
            },
            backend_ref: AuthBackendRef {
                name,
                port,
                ..Default::default()
            },
            http: path.map(|p| ExternalAuthHttp {
                path: Some(format!("/{p}")),
                ..Default::default()
            }),
            timeout,
            ..Default::default()
        });
    (
        vec(target_ref(), 0..4),
        of(timeouts),
        of(retry),
        of(lb),
        of(breaker),
        of(outlier),
        of(rate),
        of(basic),
        of(jwt),
        of(ip),
        of(body),
        (
            of(auth),
            of((1u32..1000).prop_map(|per_client| tb::ConcurrencyLimitPolicy { per_client })),
            of((vec(400u16..600, 1..4), name(), of(1i32..65536)).prop_map(
                |(status_codes, name, port)| ErrorPagesPolicy {
                    status_codes,
                    backend_ref: AuthBackendRef {
                        name,
                        port,
                        ..Default::default()
                    },
                },
            )),
        ),
    )
        .prop_map(|t| tb::TrafficPolicySpec {
            target_refs: t.0,
            timeouts: t.1,
            retry: t.2,
            load_balancer: t.3,
            circuit_breaker: t.4,
            outlier_detection: t.5,
            rate_limit: t.6,
            basic_auth: t.7,
            jwt: t.8,
            ip_access: t.9,
            body_limits: t.10,
            external_auth: t.11 .0,
            concurrency_limit: t.11 .1,
            error_pages: t.11 .2,
        })
}

fn service_type() -> impl Strategy<Value = pb::ServiceType> {
    prop_oneof![
        Just(pb::ServiceType::LoadBalancer),
        Just(pb::ServiceType::NodePort),
        Just(pb::ServiceType::ClusterIp),
    ]
}

fn log_format() -> impl Strategy<Value = pb::AccessLogFormat> {
    prop_oneof![
        Just(pb::AccessLogFormat::Json),
        Just(pb::AccessLogFormat::Text),
        Just(pb::AccessLogFormat::Off),
    ]
}

fn log_field() -> impl Strategy<Value = pb::AccessLogField> {
    prop_oneof![
        Just(pb::AccessLogField::Time),
        Just(pb::AccessLogField::Method),
        Just(pb::AccessLogField::Path),
        Just(pb::AccessLogField::Status),
        Just(pb::AccessLogField::RequestId),
    ]
}

fn annotations() -> impl Strategy<Value = BTreeMap<String, String>> {
    btree_map("[a-z]{1,5}\\.io/[a-z]{1,5}", "[a-z0-9]{0,5}", 0..3)
}

fn alpha_proxy_spec() -> impl Strategy<Value = pa::ProxyConfigSpec> {
    (
        (
            of(service_type()),
            annotations(),
            of(log_format()),
            vec(log_field(), 0..3),
            of(any::<u32>()),
            of(any::<u64>()),
            of(duration()),
            of(duration()),
        ),
        (
            of(duration()),
            of(duration()),
            of(any::<u32>()),
            of(duration()),
            of(duration()),
            vec(cidr(), 0..3),
            of(0u32..100_000),
            of(duration()),
        ),
    )
        .prop_map(|(a, b)| pa::ProxyConfigSpec {
            service_type: a.0,
            service_annotations: a.1,
            access_log_format: a.2,
            access_log_fields: a.3,
            max_request_header_bytes: a.4,
            max_request_body_bytes: a.5,
            handshake_timeout: a.6,
            request_header_timeout: a.7,
            body_idle_timeout: b.0,
            idle_timeout: b.1,
            tcp_idle_timeout: b.7,
            http2_max_concurrent_streams: b.2,
            http2_keepalive_interval: b.3,
            http2_keepalive_timeout: b.4,
            trusted_proxy_cidrs: b.5,
            drain_seconds: b.6,
        })
}

fn beta_proxy_spec() -> impl Strategy<Value = pb::ProxyConfigSpec> {
    (
        of((
            of(service_type()),
            annotations(),
            of(prop_oneof![
                Just(pb::ExternalTrafficPolicy::Cluster),
                Just(pb::ExternalTrafficPolicy::Local)
            ]),
            of("[a-z]{1,5}\\.io/[a-z]{1,5}"),
            vec(cidr(), 0..3),
        )
            .prop_map(|(type_, annotations, policy, class, ranges)| {
                pb::GatewayServiceConfig {
                    type_,
                    annotations,
                    external_traffic_policy: policy,
                    load_balancer_class: class,
                    load_balancer_source_ranges: ranges,
                }
            })),
        of((of(log_format()), vec(log_field(), 0..3))
            .prop_map(|(format, fields)| pb::AccessLogConfig { format, fields })),
        of(
            (of(any::<u32>()), of(any::<u64>())).prop_map(|(h, b)| pb::RequestLimits {
                max_request_header_bytes: h,
                max_request_body_bytes: b,
            }),
        ),
        of((
            of(duration()),
            of(duration()),
            of(duration()),
            of(duration()),
            of(duration()),
        )
            .prop_map(|(handshake, request_header, body_idle, idle, tcp_idle)| {
                pb::ClientTimeouts {
                    handshake,
                    request_header,
                    body_idle,
                    idle,
                    tcp_idle,
                }
            })),
        of(
            (of(any::<u32>()), of(duration()), of(duration())).prop_map(|(m, i, t)| {
                pb::Http2Config {
                    max_concurrent_streams: m,
                    keepalive_interval: i,
                    keepalive_timeout: t,
                }
            }),
        ),
        vec(cidr(), 0..3),
        of(prop_oneof![
            duration(),
            Just("1500ms".to_owned()),
            Just("bogus".to_owned())
        ]),
    )
        .prop_map(|t| pb::ProxyConfigSpec {
            service: t.0,
            access_log: t.1,
            limits: t.2,
            client_timeouts: t.3,
            http2: t.4,
            trusted_proxies: t.5,
            drain_duration: t.6,
        })
}

/// A whole object around `spec`, with metadata (maybe other annotations) and maybe a status.
fn object(
    api_version: &'static str,
    kind: &'static str,
    spec: Value,
) -> impl Strategy<Value = Value> {
    (annotations(), any::<bool>(), name()).prop_map(move |(annotations, status, name)| {
        let mut o = json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "default", "generation": 3},
            "spec": spec.clone(),
        });
        if !annotations.is_empty() {
            o["metadata"]["annotations"] = json!(annotations);
        }
        if status && kind == "TrafficPolicy" {
            o["status"] = json!({"ancestors": [{
                "ancestorRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"},
                "controllerName": "edgeplane.dev/gateway-controller",
                "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 3}],
            }]});
        }
        o
    })
}

fn round_trip(o: &Value, via: &str, back: &str) -> Result<(), TestCaseError> {
    let there = convert(o.clone(), via).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&there["apiVersion"], via);
    prop_assert_eq!(&there["status"], &o["status"]);
    let again = convert(there, back).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&again, o);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn alpha_policies_survive_a_trip_through_beta(
        o in alpha_policy_spec().prop_flat_map(|s| object(ALPHA, "TrafficPolicy", serde_json::to_value(s).unwrap_or_default()))
    ) {
        round_trip(&o, BETA, ALPHA)?;
    }

    #[test]
    fn beta_policies_survive_a_trip_through_alpha(
        o in beta_policy_spec().prop_flat_map(|s| object(BETA, "TrafficPolicy", serde_json::to_value(s).unwrap_or_default()))
    ) {
        round_trip(&o, ALPHA, BETA)?;
    }

    #[test]
    fn alpha_proxy_configs_survive_a_trip_through_beta(
        o in alpha_proxy_spec().prop_flat_map(|s| object(ALPHA, "ProxyConfig", serde_json::to_value(s).unwrap_or_default()))
    ) {
        round_trip(&o, BETA, ALPHA)?;
    }

    #[test]
    fn beta_proxy_configs_survive_a_trip_through_alpha(
        o in beta_proxy_spec().prop_flat_map(|s| object(BETA, "ProxyConfig", serde_json::to_value(s).unwrap_or_default()))
    ) {
        round_trip(&o, ALPHA, BETA)?;
    }
}

/// `spec` with the fields chosen by `pick` (one flag per field name of either spec, in name
/// order) replaced by their value in `other`, or removed where `other` has none: a random
/// edit of an object written in the other version.
fn edited(spec: &Value, other: &Value, pick: &[bool]) -> Value {
    let mut out = spec.clone();
    let keys: std::collections::BTreeSet<String> = spec
        .as_object()
        .into_iter()
        .chain(other.as_object())
        .flat_map(|m| m.keys().cloned())
        .collect();
    for (key, chosen) in keys.into_iter().zip(pick.iter().cycle()) {
        if !chosen {
            continue;
        }
        match other.get(&key) {
            Some(v) => out[&key] = v.clone(),
            None => {
                if let Some(m) = out.as_object_mut() {
                    m.remove(&key);
                }
            }
        }
    }
    out
}

/// An object stored at `BETA` is read at `ALPHA`, edited there (`pick` of `other`'s fields)
/// and written back. What is stored must mean what was written: without the help of the
/// conversion annotation, the stored spec reads at `ALPHA` as the plain conversion of the
/// written spec does (both taken through `BETA` and back, so that settings `BETA` cannot
/// hold on their own, such as a realm without a Secret, compare as equal); and reading it at
/// `ALPHA` again, with the annotation, gives the written spec back as it was.
fn edit_through_alpha(stored: &Value, other: Value, pick: &[bool]) -> Result<(), TestCaseError> {
    let fail = |e: edgeplane::kinds::crd::convert::ConvertError| TestCaseError::fail(e.to_string());
    let mut read = convert(stored.clone(), ALPHA).map_err(fail)?;
    let written = edited(&read["spec"], &other, pick);
    read["spec"] = written.clone();
    let kind = stored["kind"].as_str().unwrap_or_default();
    let back = convert(read.clone(), BETA).map_err(fail)?;
    // The stored spec alone, as the proxy sees it: its plain mapping down (an object without
    // the annotation) must be what was written.
    let plain = |api_version: &str, spec: &Value, to: &str| {
        let o = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "p"}, "spec": spec});
        convert(o, to).map(|o| o["spec"].clone()).map_err(fail)
    };
    let stored_means = plain(BETA, &back["spec"], ALPHA)?;
    let written_means = plain(BETA, &plain(ALPHA, &written, BETA)?, ALPHA)?;
    prop_assert_eq!(&stored_means, &written_means, "stored: {}", back["spec"]);
    let again = convert(back, ALPHA).map_err(fail)?;
    prop_assert_eq!(&again["spec"], &written);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_policy_edited_through_alpha_means_the_edit(
        stored in beta_policy_spec().prop_flat_map(|s| object(BETA, "TrafficPolicy", serde_json::to_value(s).unwrap_or_default())),
        other in alpha_policy_spec(),
        pick in vec(any::<bool>(), 1..40),
    ) {
        let other = serde_json::to_value(other).unwrap_or_default();
        edit_through_alpha(&stored, other, &pick)?;
    }

    #[test]
    fn a_proxy_config_edited_through_alpha_means_the_edit(
        stored in beta_proxy_spec().prop_flat_map(|s| object(BETA, "ProxyConfig", serde_json::to_value(s).unwrap_or_default())),
        other in alpha_proxy_spec(),
        pick in vec(any::<bool>(), 1..20),
    ) {
        let other = serde_json::to_value(other).unwrap_or_default();
        edit_through_alpha(&stored, other, &pick)?;
    }
}

#[test]
fn a_rate_edited_through_alpha_is_not_mixed_with_the_kept_unit() {
    let beta = json!({
        "apiVersion": BETA, "kind": "TrafficPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "a"}],
            "rateLimit": {"requests": 120, "unit": "Minute", "burst": 10},
        },
    });
    let mut alpha = convert(beta.clone(), ALPHA).expect("converts");
    assert_eq!(alpha["spec"]["requestsPerSecond"], 2);
    // Unedited, the kept unit comes back with the rate it belongs with.
    assert_eq!(convert(alpha.clone(), BETA).expect("back"), beta);
    alpha["spec"]["requestsPerSecond"] = json!(5);
    let back = convert(alpha, BETA).expect("back");
    assert_eq!(
        back["spec"]["rateLimit"],
        json!({"requests": 5, "unit": "Second", "burst": 10}),
        "5 a second as written, not 5 a minute"
    );
}

fn conversion_data(o: &Value) -> Option<Value> {
    o["metadata"]["annotations"][CONVERSION_ANNOTATION]
        .as_str()
        .map(|s| serde_json::from_str(s).expect("annotation is JSON"))
}

#[test]
fn what_alpha_cannot_hold_travels_in_the_annotation() {
    let beta = json!({
        "apiVersion": BETA, "kind": "TrafficPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "targetRefs": [
                {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "a"},
                {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "b"},
            ],
            "rateLimit": {"requests": 90, "unit": "Minute", "key": {"type": "Header", "header": "x-user"}},
        },
    });
    let alpha = convert(beta.clone(), ALPHA).expect("converts");
    assert_eq!(alpha["apiVersion"], ALPHA);
    assert_eq!(alpha["spec"]["targetRef"]["name"], "a");
    assert_eq!(
        alpha["spec"]["requestsPerSecond"], 2,
        "90/minute is at most 2 per second"
    );
    let data = conversion_data(&alpha).expect("annotation set");
    assert_eq!(data["apiVersion"], BETA);
    assert!(data["spec"].to_string().contains("x-user"), "{data}");
    let back = convert(alpha, BETA).expect("converts back");
    assert_eq!(back, beta, "annotation consumed, object restored");
}

#[test]
fn a_drain_of_1500ms_is_two_seconds_in_alpha_and_1500ms_again_in_beta() {
    let beta = json!({
        "apiVersion": BETA, "kind": "ProxyConfig",
        "metadata": {"name": "p"},
        "spec": {"drainDuration": "1500ms"},
    });
    let alpha = convert(beta.clone(), ALPHA).expect("converts");
    assert_eq!(alpha["spec"], json!({"drainSeconds": 2}));
    assert!(conversion_data(&alpha).is_some());
    assert_eq!(convert(alpha, BETA).expect("back"), beta);

    let whole = json!({"apiVersion": BETA, "kind": "ProxyConfig", "metadata": {"name": "p"}, "spec": {"drainDuration": "30s"}});
    let alpha = convert(whole, ALPHA).expect("converts");
    assert_eq!(alpha["spec"], json!({"drainSeconds": 30}));
    assert!(alpha["metadata"].get("annotations").is_none(), "{alpha}");
}

#[test]
fn an_edit_made_through_alpha_wins_over_the_annotation() {
    let beta = json!({
        "apiVersion": BETA, "kind": "ProxyConfig",
        "metadata": {"name": "p"},
        "spec": {"drainDuration": "1m", "http2": {"maxConcurrentStreams": 10}},
    });
    let mut alpha = convert(beta, ALPHA).expect("converts");
    assert_eq!(alpha["spec"]["drainSeconds"], 60);
    alpha["spec"]["drainSeconds"] = json!(90);
    let back = convert(alpha, BETA).expect("back");
    assert_eq!(back["spec"]["drainDuration"], "1m30s");
    assert_eq!(back["spec"]["http2"]["maxConcurrentStreams"], 10);
    assert!(back["metadata"].get("annotations").is_none(), "{back}");
}

#[test]
fn objects_that_are_not_edgeplane_kinds_or_versions_are_refused() {
    let o = json!({"apiVersion": BETA, "kind": "Widget", "metadata": {"name": "w"}, "spec": {}});
    assert!(convert(o, ALPHA)
        .unwrap_err()
        .to_string()
        .contains("Widget"));
    let o =
        json!({"apiVersion": "edgeplane.dev/v2", "kind": "ProxyConfig", "metadata": {"name": "w"}});
    assert!(convert(o, ALPHA).unwrap_err().to_string().contains("v2"));
    let o = json!({"apiVersion": ALPHA, "kind": "TrafficPolicy", "metadata": {"name": "w"}, "spec": {"targetRef": 3}});
    let e = convert(o, BETA).unwrap_err().to_string();
    assert!(e.contains("v1alpha1 TrafficPolicy"), "{e}");
}
