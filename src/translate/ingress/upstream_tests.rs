//! `backend-protocol` and `proxy-ssl-*` through the pure translator: the protocol and TLS the
//! table keeps for the Ingress's Service port, what is reported, and that the made
//! BackendTLSPolicy gets no status of its own.

use std::net::SocketAddr;

use http::{HeaderMap, Method};

use super::*;
use crate::status::ObjectKind;
use crate::table::{BackendTarget, BackendTlsEntry, RequestView, ServiceBackend, UpstreamProtocol};
use crate::translate::ingress::policy_tests::{status_text, with};
use crate::translate::testing::options;
use crate::translate::{translate, PortMap, Translation};

/// Ingress `a` of class `edge` in `ns`, `/` to `svc:8080`, with these annotations.
fn ingress(annotations: &[(&str, &str)]) -> String {
    let notes: Vec<String> = annotations
        .iter()
        .map(|(k, v)| format!("nginx.ingress.kubernetes.io/{k}: {v:?}"))
        .collect();
    format!(
        "metadata: {{name: a, namespace: ns, generation: 1, annotations: {{{}}}}}\nspec:\n  \
         ingressClassName: edge\n  rules: [{{http: {{paths: [{{path: /, pathType: Prefix, \
         backend: {{service: {{name: svc, port: {{number: 8080}}}}}}}}]}}}}]",
        notes.join(", ")
    )
}

fn run(annotations: &[(&str, &str)], secrets: &[String]) -> Translation {
    translate(
        &with(&ingress(annotations), secrets),
        &options(PortMap::default()),
    )
}

/// The Service backend the rule serving `/` reaches, and how.
fn backend(t: &Translation) -> (Arc<ServiceBackend>, UpstreamProtocol) {
    let addr: SocketAddr = ([127, 0, 0, 9], 80).into();
    let headers = HeaderMap::new();
    let view = RequestView {
        host: "a.test",
        path: "/",
        query: None,
        method: &Method::GET,
        headers: &headers,
    };
    let listener = t.table.listeners.get(&addr).expect("listener");
    let rule = listener.route(&view).expect("rule");
    let BackendTarget::Service(s) = &rule.backends.backends[0].target else {
        panic!("not a Service backend");
    };
    (s.clone(), rule.upstream_protocol(s))
}

fn tls_of(t: &Translation) -> Option<&BackendTlsEntry> {
    let (svc, _) = backend(t);
    t.table.backend_tls(&svc.service).map(|e| &**e)
}

fn ca_secret(with_client_cert: bool) -> String {
    secret(with_client_cert, with_client_cert)
}

/// Secret `ns/ca` holding `ca.crt`, and a client certificate's `tls.crt` and `tls.key` as asked.
fn secret(crt: bool, key: bool) -> String {
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::ByteString;
    let pair = rcgen::generate_simple_self_signed(vec!["client".to_owned()]).expect("cert");
    let pem = pair.cert.pem();
    let mut secret = Secret::default();
    secret.metadata.name = Some("ca".into());
    secret.metadata.namespace = Some("ns".into());
    let mut data = std::collections::BTreeMap::new();
    data.insert("ca.crt".to_owned(), ByteString(pem.clone().into_bytes()));
    if crt {
        data.insert("tls.crt".to_owned(), ByteString(pem.into_bytes()));
    }
    if key {
        let key = pair.signing_key.serialize_pem();
        data.insert("tls.key".to_owned(), ByteString(key.into_bytes()));
    }
    secret.data = Some(data);
    serde_yaml_ng::to_string(&secret).expect("YAML")
}

#[test]
fn grpc_and_h2c_backends_are_spoken_to_over_http2_without_tls() {
    for p in ["GRPC", "h2c"] {
        let t = run(&[("backend-protocol", p)], &[]);
        assert_eq!(backend(&t).1, UpstreamProtocol::H2c, "{p}");
        assert!(tls_of(&t).is_none(), "{p}");
        assert!(!status_text(&t).contains("Unsupported"), "{p}");
    }
    let t = run(&[("backend-protocol", "HTTP")], &[]);
    assert_eq!(backend(&t).1, UpstreamProtocol::Http1);
}

#[test]
fn https_without_verify_accepts_any_certificate_and_makes_no_status() {
    let t = run(&[("backend-protocol", "HTTPS")], &[]);
    assert_eq!(backend(&t).1, UpstreamProtocol::Http1);
    match tls_of(&t) {
        Some(BackendTlsEntry::Ready(tls)) => {
            assert!(!tls.verifies());
            assert_eq!(tls.hostname, "svc.ns.svc");
        }
        other => panic!("no TLS: {other:?}"),
    }
    assert!(t
        .status
        .entries
        .iter()
        .all(|e| e.kind != ObjectKind::BackendTlsPolicy));
    assert!(
        !status_text(&t).contains("Unsupported"),
        "{}",
        status_text(&t)
    );
}

#[test]
fn grpcs_with_verify_trusts_the_secret_ca_for_the_name_given() {
    let notes = [
        ("backend-protocol", "GRPCS"),
        ("proxy-ssl-secret", "ns/ca"),
        ("proxy-ssl-verify", "on"),
        ("proxy-ssl-name", "abc.example.com"),
        ("proxy-ssl-server-name", "on"),
    ];
    let t = run(&notes, &[ca_secret(false)]);
    assert_eq!(backend(&t).1, UpstreamProtocol::H2c);
    match tls_of(&t) {
        Some(BackendTlsEntry::Ready(tls)) => {
            assert!(tls.verifies());
            assert_eq!(tls.hostname, "abc.example.com");
            assert_eq!(tls.ca_certificates, ["Secret ns/ca"]);
        }
        other => panic!("no TLS: {other:?}"),
    }
    assert!(
        !status_text(&t).contains("Unsupported"),
        "{}",
        status_text(&t)
    );
}

#[test]
fn verify_without_a_usable_secret_is_reported_and_fails_closed() {
    let notes = [("backend-protocol", "HTTPS"), ("proxy-ssl-verify", "on")];
    let t = run(&notes, &[]);
    assert!(matches!(tls_of(&t), Some(BackendTlsEntry::Unusable { .. })));
    assert!(status_text(&t).contains("needs a usable proxy-ssl-secret"));
    let notes = [
        ("backend-protocol", "HTTPS"),
        ("proxy-ssl-verify", "on"),
        ("proxy-ssl-secret", "other/ca"),
    ];
    let t = run(&notes, &[ca_secret(false)]);
    assert!(matches!(tls_of(&t), Some(BackendTlsEntry::Unusable { .. })));
    assert!(status_text(&t).contains("not a Secret of the Ingress's namespace"));
}

#[test]
fn what_is_not_applied_is_reported() {
    let t = run(
        &[("backend-protocol", "FCGI"), ("proxy-ssl-name", "x.test")],
        &[],
    );
    let status = status_text(&t);
    assert!(
        status.contains("not one of HTTP, HTTPS, GRPC, GRPCS, H2C"),
        "{status}"
    );
    assert!(
        status.contains("ignored without backend-protocol HTTPS"),
        "{status}"
    );
    let notes = [
        ("backend-protocol", "HTTPS"),
        ("proxy-ssl-secret", "ca"),
        ("proxy-ssl-server-name", "off"),
    ];
    let t = run(&notes, &[ca_secret(true)]);
    let status = status_text(&t);
    assert!(status.contains("always sent as SNI"), "{status}");
}

#[test]
fn the_secret_client_certificate_is_presented_verified_or_not() {
    for verify in ["on", "off"] {
        let notes = [
            ("backend-protocol", "HTTPS"),
            ("proxy-ssl-secret", "ca"),
            ("proxy-ssl-verify", verify),
        ];
        let t = run(&notes, &[secret(true, true)]);
        match tls_of(&t) {
            Some(BackendTlsEntry::Ready(tls)) => {
                assert_eq!(tls.verifies(), verify == "on");
                assert_eq!(tls.client_certificate.as_deref(), Some("ns/ca"));
                assert!(tls.identity(None).is_some());
            }
            other => panic!("no TLS: {other:?}"),
        }
        let status = status_text(&t);
        assert!(!status.contains("Unsupported"), "{status}");
    }
    // A Secret with only ca.crt presents nothing: the Gateway's certificate, if any, is.
    let notes = [("backend-protocol", "HTTPS"), ("proxy-ssl-secret", "ca")];
    let t = run(&notes, &[secret(false, false)]);
    match tls_of(&t) {
        Some(BackendTlsEntry::Ready(tls)) => {
            assert_eq!(tls.client_certificate, None);
            assert!(tls.identity(None).is_none());
        }
        other => panic!("no TLS: {other:?}"),
    }
}

#[test]
fn a_client_certificate_that_cannot_be_used_fails_closed_and_is_reported() {
    for (crt, key, why) in [
        (true, false, "it has tls.crt but no tls.key"),
        (false, true, "it has tls.key but no tls.crt"),
    ] {
        let notes = [("backend-protocol", "HTTPS"), ("proxy-ssl-secret", "ns/ca")];
        let t = run(&notes, &[secret(crt, key)]);
        match tls_of(&t) {
            Some(BackendTlsEntry::Unusable { reason, .. }) => {
                assert!(reason.contains("no client certificate"), "{reason}");
            }
            other => panic!("usable: {other:?}"),
        }
        let status = status_text(&t);
        assert!(
            status.contains("has no usable client certificate") && status.contains(why),
            "{status}"
        );
        assert!(status.contains("answered 502"), "{status}");
    }
}

#[test]
fn a_service_port_of_another_protocol_keeps_it() {
    let mut s = with(&ingress(&[("backend-protocol", "GRPC")]), &[]);
    s.services[0] = Arc::new(
        serde_yaml_ng::from_str(
            "metadata: {name: svc, namespace: ns}\n\
             spec: {ports: [{port: 8080, appProtocol: kubernetes.io/ws}]}",
        )
        .expect("Service"),
    );
    let t = translate(&s, &options(PortMap::default()));
    assert_eq!(backend(&t).1, UpstreamProtocol::Http1);
    assert!(status_text(&t).contains("which is kept"));
}

#[test]
fn the_ca_secret_is_wanted_from_the_cluster() {
    use crate::snapshot::TranslatorRules;
    let notes = [("backend-protocol", "HTTPS"), ("proxy-ssl-secret", "ns/ca")];
    let s = with(&ingress(&notes), &[]);
    assert!(s
        .referenced_secrets()
        .contains(&("ns".to_owned(), "ca".to_owned())));
}

#[test]
fn upstream_hash_by_balances_the_service_by_the_variable() {
    use crate::table::{Balance, HashOn};
    for (variable, on) in [
        ("$remote_addr", HashOn::SourceIp),
        ("$http_x_user_id", HashOn::Header("x-user-id".into())),
        ("$cookie_cart", HashOn::Cookie("cart".into())),
        ("$arg_user", HashOn::Query("user".into())),
        ("$request_uri", HashOn::PathAndQuery),
        ("$uri", HashOn::Path),
    ] {
        let t = run(&[("upstream-hash-by", variable)], &[]);
        let (svc, _) = backend(&t);
        assert_eq!(svc.balance, Balance::ConsistentHash { on }, "{variable}");
        assert!(!status_text(&t).contains("Unsupported"), "{variable}");
    }
    for variable in ["$host$request_uri", "$http_"] {
        let t = run(&[("upstream-hash-by", variable)], &[]);
        assert_eq!(backend(&t).0.balance, Balance::LeastRequest, "{variable}");
        assert!(status_text(&t).contains("upstream-hash-by"), "{variable}");
    }
}

#[test]
fn a_service_balancing_by_its_own_annotation_keeps_it() {
    use crate::table::Balance;
    let mut s = with(&ingress(&[("upstream-hash-by", "$remote_addr")]), &[]);
    s.services[0] = Arc::new(
        serde_yaml_ng::from_str(
            "metadata: {name: svc, namespace: ns, \
             annotations: {edgeplane.io/load-balancer: round-robin}}\n\
             spec: {ports: [{port: 8080}]}",
        )
        .expect("Service"),
    );
    let t = translate(&s, &options(PortMap::default()));
    assert_eq!(backend(&t).0.balance, Balance::RoundRobin);
    assert!(status_text(&t).contains("which is kept"));
}

#[test]
fn incremental_translations_keep_and_drop_what_the_annotations_apply() {
    use crate::table::Balance;
    let opts = options(PortMap::default());
    let mut memory = crate::translate::Incremental::default();
    let notes = [
        ("backend-protocol", "GRPC"),
        ("upstream-hash-by", "$remote_addr"),
    ];
    let steps: [&[(&str, &str)]; 4] = [&notes, &notes, &[], &notes];
    for (i, step) in steps.iter().enumerate() {
        let t = memory.translate(&with(&ingress(step), &[]), &opts, &Default::default());
        let (svc, protocol) = backend(&t);
        let on = !step.is_empty();
        let want = if on {
            UpstreamProtocol::H2c
        } else {
            UpstreamProtocol::Http1
        };
        assert_eq!(protocol, want, "step {i}");
        assert_eq!(svc.balance != Balance::LeastRequest, on, "step {i}");
    }
}

#[test]
fn each_hash_on_value_converts_to_its_traffic_policy_key() {
    use super::load_balancer;
    for (hash, key) in [
        ("source-ip", serde_json::json!({"sourceIp": true})),
        ("header:x-user", serde_json::json!({"header": "x-user"})),
        ("cookie:cart", serde_json::json!({"cookie": "cart"})),
        ("query:user", serde_json::json!({"queryParameter": "user"})),
        ("path", serde_json::json!({"path": true})),
        ("path-and-query", serde_json::json!({"pathAndQuery": true})),
    ] {
        let lb = load_balancer(hash);
        assert_eq!(lb["algorithm"], "ConsistentHash", "{hash}");
        assert_eq!(lb["hash"], key, "{hash}");
    }
}
