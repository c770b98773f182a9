use super::*;
use crate::status::conditions::Reason;
use crate::status::{ObjectKind, StatusBody};
use crate::translate::testing::{options, snapshot};
use crate::translate::{translate, PortMap};
use k8s_openapi::api::core::v1::ConfigMap;

const GATEWAY: &str = r#"
metadata: {name: gw, namespace: infra, generation: 1}
spec:
  gatewayClassName: c
  listeners: [{name: http, port: 80, protocol: HTTP}]
"#;

fn object<T: serde::de::DeserializeOwned>(yaml: &str) -> Arc<T> {
    Arc::new(serde_yaml_ng::from_str(yaml).unwrap())
}

fn ca_config_map(name: &str) -> Arc<ConfigMap> {
    let pem = rcgen::generate_simple_self_signed(vec!["ca".to_owned()])
        .unwrap()
        .cert
        .pem();
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = Some("infra".into());
    cm.metadata.name = Some(name.into());
    cm.data = Some([("ca.crt".to_owned(), pem)].into());
    Arc::new(cm)
}

/// A Service `name` with ports `https` (443) and `other` (8443).
fn service(name: &str) -> Arc<Service> {
    object(&format!(
        "metadata: {{name: {name}, namespace: infra}}\n\
         spec: {{ports: [{{name: https, port: 443}}, {{name: other, port: 8443}}]}}"
    ))
}

fn policy(name: &str, created: &str, target: &str, extra: &str) -> Arc<BackendTlsPolicy> {
    object(&format!(
        "metadata: {{name: {name}, namespace: infra, generation: 2, creationTimestamp: \"{created}\"}}\n\
         spec:\n  targetRefs: [{{group: \"\", kind: Service, {target}}}]\n  \
         validation: {{hostname: abc.example.com, {extra}}}"
    ))
}

const CA: &str = "caCertificateRefs: [{group: \"\", kind: ConfigMap, name: ca}]";

/// Routes of `gw` to ports 443 and 8443 of Services `a` and `b`, and to `unused` from a route
/// of another controller's Gateway.
fn routes() -> Vec<Arc<crate::kinds::httproute::HttpRoute>> {
    vec![
        object(
            "metadata: {name: r, namespace: infra}\n\
             spec:\n  parentRefs: [{name: gw}]\n  rules:\n  \
             - backendRefs: [{name: a, port: 443}, {name: a, port: 8443}, {name: b, port: 443}]",
        ),
        object(
            "metadata: {name: other, namespace: infra}\n\
             spec:\n  parentRefs: [{name: not-ours}]\n  rules:\n  \
             - backendRefs: [{name: unused, port: 443}]",
        ),
    ]
}

/// `(type, status, reason)` of the conditions of policy `name`'s only ancestor.
fn policy_conditions(
    out: &crate::translate::Translation,
    name: &str,
) -> Vec<(String, String, String)> {
    let entry = out
        .status
        .entries
        .iter()
        .find(|e| e.kind == ObjectKind::BackendTlsPolicy && *e.name == *name)
        .unwrap_or_else(|| panic!("no status for policy {name}"));
    let StatusBody::BackendTlsPolicy(status) = &entry.status else {
        panic!("not a policy status")
    };
    assert_eq!(status.ancestors.len(), 1, "{name}");
    let a = &status.ancestors[0];
    assert_eq!(
        (a.ancestor_ref.name.as_str(), a.controller_name.as_str()),
        ("gw", "x/y")
    );
    a.conditions
        .iter()
        .map(|c| {
            assert_eq!(c.observed_generation, Some(2));
            (c.type_.clone(), c.status.clone(), c.reason.clone())
        })
        .collect()
}

fn t(a: &str, b: &str, c: &str) -> (String, String, String) {
    (a.into(), b.into(), c.into())
}

#[test]
fn section_names_beat_whole_services_and_older_policies_win_conflicts() {
    let mut snap = snapshot(&[GATEWAY.to_owned()]);
    snap.services = vec![service("a"), service("b"), service("unused")];
    snap.config_maps = vec![ca_config_map("ca")];
    snap.http_routes = routes();
    snap.backend_tls_policies = vec![
        policy("whole", "2026-01-01T00:00:00Z", "name: a", CA),
        policy(
            "port",
            "2026-01-02T00:00:00Z",
            "name: a, sectionName: https",
            CA,
        ),
        policy(
            "newer",
            "2026-01-03T00:00:00Z",
            "name: a, sectionName: https",
            CA,
        ),
        policy(
            "no-ca",
            "2026-01-01T00:00:00Z",
            "name: b",
            "caCertificateRefs: [{group: \"\", kind: ConfigMap, name: missing}]",
        ),
        policy("unused", "2026-01-01T00:00:00Z", "name: unused", CA),
    ];
    let out = translate(&snap, &options(PortMap::default()));
    let ready = |c: &[(String, String, String)]| {
        c == [
            t("Accepted", "True", "Accepted"),
            t("ResolvedRefs", "True", "ResolvedRefs"),
        ]
    };
    assert!(ready(&policy_conditions(&out, "whole")));
    assert!(ready(&policy_conditions(&out, "port")));
    assert_eq!(
        policy_conditions(&out, "newer"),
        [
            t("Accepted", "False", Reason::Conflicted.as_str()),
            t("ResolvedRefs", "True", "ResolvedRefs"),
        ]
    );
    assert_eq!(
        policy_conditions(&out, "no-ca"),
        [
            t("Accepted", "False", Reason::NoValidCACertificate.as_str()),
            t(
                "ResolvedRefs",
                "False",
                Reason::InvalidCACertificateRef.as_str()
            ),
        ]
    );
    // A policy no route of ours reaches gets no status.
    assert!(!out.status.entries.iter().any(|e| &*e.name == "unused"));
    let by_port: Vec<(String, u16, String)> = out
        .table
        .backend_tls
        .iter()
        .map(|(k, e)| {
            let what = match &**e {
                BackendTlsEntry::Ready(p) => p.policy.clone(),
                BackendTlsEntry::Unusable { policy, .. } => format!("unusable {policy}"),
            };
            (k.name.clone(), k.port, what)
        })
        .collect();
    assert_eq!(
        by_port,
        [
            ("a".to_owned(), 443, "infra/port".to_owned()),
            ("a".to_owned(), 8443, "infra/whole".to_owned()),
            ("b".to_owned(), 443, "unusable infra/no-ca".to_owned()),
            ("b".to_owned(), 8443, "unusable infra/no-ca".to_owned()),
            ("unused".to_owned(), 443, "infra/unused".to_owned()),
            ("unused".to_owned(), 8443, "infra/unused".to_owned()),
        ]
    );
}

#[test]
fn unsupported_kinds_and_well_known_cas_are_refused() {
    let mut snap = snapshot(&[GATEWAY.to_owned()]);
    snap.services = vec![service("a"), service("b")];
    snap.http_routes = routes();
    snap.backend_tls_policies = vec![
        policy(
            "kind",
            "2026-01-01T00:00:00Z",
            "name: a",
            "caCertificateRefs: [{group: invalid.io, kind: InvalidKind, name: x}]",
        ),
        policy(
            "system",
            "2026-01-01T00:00:00Z",
            "name: b",
            "wellKnownCACertificates: System",
        ),
    ];
    let out = translate(&snap, &options(PortMap::default()));
    assert_eq!(
        policy_conditions(&out, "kind"),
        [
            t("Accepted", "False", Reason::NoValidCACertificate.as_str()),
            t("ResolvedRefs", "False", Reason::InvalidKind.as_str()),
        ]
    );
    assert_eq!(
        policy_conditions(&out, "system")[0],
        t("Accepted", "False", Reason::Invalid.as_str())
    );
}

#[test]
fn the_table_shows_backend_tls_per_service_port() {
    let mut snap = snapshot(&[GATEWAY.to_owned()]);
    snap.services = vec![service("a")];
    snap.config_maps = vec![ca_config_map("ca")];
    snap.http_routes = routes();
    snap.backend_tls_policies = vec![policy(
        "p",
        "2026-01-01T00:00:00Z",
        "name: a, sectionName: https",
        CA,
    )];
    let out = translate(&snap, &options(PortMap::default()));
    let json = serde_json::to_value(&out.table).unwrap();
    assert_eq!(
        json["backendTls"],
        serde_json::json!([{
            "service": {"namespace": "infra", "name": "a", "port": 443},
            "state": "ready",
            "policy": "infra/p",
            "hostname": "abc.example.com",
            "caCertificates": ["ConfigMap infra/ca"],
        }])
    );
}
