use super::*;
use crate::status::conditions::{ConditionType, Reason};
use crate::status::StatusBody;
use crate::translate::testing::{options, snapshot};
use crate::translate::{translate, PortMap};
use k8s_openapi::ByteString;

fn ca_pem() -> String {
    rcgen::generate_simple_self_signed(vec!["client-ca".to_owned()])
        .unwrap()
        .cert
        .pem()
}

fn config_map(ns: &str, name: &str, data: &[(&str, &str)]) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = Some(ns.into());
    cm.metadata.name = Some(name.into());
    cm.data = Some(
        data.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    Arc::new(cm)
}

fn tls_secret(ns: &str, name: &str) -> Arc<Secret> {
    let pair = rcgen::generate_simple_self_signed(vec!["example.org".to_owned()]).unwrap();
    let mut s = Secret::default();
    s.metadata.namespace = Some(ns.into());
    s.metadata.name = Some(name.into());
    s.data = Some(
        [
            ("tls.crt", pair.cert.pem()),
            ("tls.key", pair.signing_key.serialize_pem()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.into_bytes())))
        .collect(),
    );
    Arc::new(s)
}

/// A Gateway in `infra` with a default validation and three per-port ones (missing ConfigMap,
/// a Service, a ConfigMap in another namespace without a grant), an HTTP listener and one
/// HTTPS listener per case.
const GATEWAY: &str = r#"
metadata: {name: gw, namespace: infra, generation: 1}
spec:
  gatewayClassName: c
  tls:
    frontend:
      default:
        validation:
          caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]
      perPort:
      - port: 7443
        tls: {validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: missing}]}}
      - port: 8443
        tls: {validation: {caCertificateRefs: [{group: "", kind: Service, name: svc}]}}
      - port: 6443
        tls: {validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca, namespace: web}]}}
      - port: 5443
        tls:
          validation:
            mode: AllowInsecureFallback
            caCertificateRefs:
            - {group: "", kind: ConfigMap, name: missing}
            - {group: "", kind: Secret, name: ca-secret}
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: cert}]}}
  - {name: unresolved, port: 7443, protocol: HTTPS, tls: {certificateRefs: [{name: cert}]}}
  - {name: kind, port: 8443, protocol: HTTPS, tls: {certificateRefs: [{name: cert}]}}
  - {name: grant, port: 6443, protocol: HTTPS, tls: {certificateRefs: [{name: cert}]}}
  - {name: partial, port: 5443, protocol: HTTPS, tls: {certificateRefs: [{name: cert}]}}
"#;

/// `(type, status, reason)` of every condition of listener `name` and of the Gateway.
fn conditions(body: &StatusBody, listener: Option<&str>) -> Vec<(String, String, String)> {
    let StatusBody::Gateway(status) = body else {
        panic!("not a Gateway status")
    };
    let conditions = match listener {
        Some(name) => {
            let listeners = status.listeners.as_ref().unwrap();
            &listeners
                .iter()
                .find(|l| l.name == name)
                .unwrap()
                .conditions
        }
        None => status.conditions.as_ref().unwrap(),
    };
    conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect()
}

fn triple(t: &str, s: &str, r: &str) -> (String, String, String) {
    (t.into(), s.into(), r.into())
}

#[test]
fn invalid_references_fail_only_their_listeners_with_the_spec_reasons() {
    let pem = ca_pem();
    let mut snap = snapshot(&[GATEWAY.to_owned()]);
    snap.config_maps = vec![
        config_map("infra", "ca", &[(CA_KEY, &pem)]),
        config_map("web", "ca", &[(CA_KEY, &pem)]),
    ];
    let mut ca_secret = (*tls_secret("infra", "ca-secret")).clone();
    ca_secret
        .data
        .get_or_insert_default()
        .insert(CA_KEY.into(), ByteString(pem.clone().into_bytes()));
    snap.secrets = vec![tls_secret("infra", "cert"), Arc::new(ca_secret)];
    let out = translate(&snap, &options(PortMap::default()));
    let gw = &out
        .status
        .entries
        .iter()
        .find(|e| &*e.name == "gw")
        .unwrap()
        .status;
    let ok = |name| {
        assert_eq!(
            conditions(gw, Some(name)),
            [
                triple("Accepted", "True", "Accepted"),
                triple("Programmed", "True", "Programmed"),
                triple("ResolvedRefs", "True", "ResolvedRefs"),
                triple("Conflicted", "False", "NoConflicts"),
            ],
            "{name}"
        )
    };
    ok("http");
    ok("https");
    let refused = |name, reason| {
        assert_eq!(
            conditions(gw, Some(name)),
            [
                triple("Accepted", "False", Reason::NoValidCACertificate.as_str()),
                triple("Programmed", "False", "Invalid"),
                triple("ResolvedRefs", "False", reason),
                triple("Conflicted", "False", "NoConflicts"),
            ],
            "{name}"
        )
    };
    refused("unresolved", Reason::InvalidCACertificateRef.as_str());
    refused("kind", Reason::InvalidCACertificateKind.as_str());
    refused("grant", "RefNotPermitted");
    // One of two references usable: served, ResolvedRefs False.
    assert_eq!(
        conditions(gw, Some("partial")),
        [
            triple("Accepted", "True", "Accepted"),
            triple("Programmed", "True", "Programmed"),
            triple(
                "ResolvedRefs",
                "False",
                Reason::InvalidCACertificateRef.as_str()
            ),
            triple("Conflicted", "False", "NoConflicts"),
        ]
    );
    assert_eq!(
        conditions(gw, None),
        [
            triple("Accepted", "True", "ListenersNotValid"),
            triple("Programmed", "True", "Programmed"),
            triple(
                ConditionType::InsecureFrontendValidationMode.as_str(),
                "True",
                Reason::ConfigurationChanged.as_str()
            ),
        ]
    );
    // The table serves the valid HTTPS listeners with their validation, and nothing else.
    let served: Vec<(u16, Option<ValidationMode>, Vec<String>)> = out
        .table
        .listeners
        .values()
        .filter_map(|l| {
            let tls = l.tls.as_ref()?;
            let t = tls.iter().next()?;
            let v = t.client_validation.as_ref();
            Some((
                l.bind.port(),
                v.map(|v| v.mode),
                v.map(|v| v.ca_certificates.clone()).unwrap_or_default(),
            ))
        })
        .collect();
    assert_eq!(
        served,
        [
            (
                443,
                Some(ValidationMode::AllowValidOnly),
                vec!["ConfigMap infra/ca".to_owned()]
            ),
            (
                5443,
                Some(ValidationMode::AllowInsecureFallback),
                vec!["Secret infra/ca-secret".to_owned()]
            ),
        ]
    );
}

#[test]
fn bundles_without_a_ca_are_invalid_references() {
    let mut snap = snapshot(&[GATEWAY.to_owned()]);
    snap.config_maps = vec![config_map("infra", "ca", &[("other", "x")])];
    snap.secrets = vec![tls_secret("infra", "cert")];
    let mut frontends = Frontends::new(&snap);
    let auth = frontends.listener(&snap.gateways[0], 443);
    assert!(matches!(
        auth,
        ClientAuth::Invalid(CaRefError::MissingKey { .. })
    ));
    snap.config_maps = vec![config_map("infra", "ca", &[(CA_KEY, "not pem")])];
    let mut frontends = Frontends::new(&snap);
    let auth = frontends.listener(&snap.gateways[0], 443);
    assert!(matches!(
        auth,
        ClientAuth::Invalid(CaRefError::Invalid { .. })
    ));
}

#[test]
fn referenced_objects_are_the_permitted_ones_of_every_port() {
    let snap = snapshot(&[GATEWAY.to_owned()]);
    let got = referenced_ca_objects(&snap.gateways, &[]);
    let want: BTreeSet<(&'static str, String, String)> = [
        ("ConfigMap", "infra", "ca"),
        ("ConfigMap", "infra", "missing"),
        ("Secret", "infra", "ca-secret"),
    ]
    .into_iter()
    .map(|(k, ns, n)| (k, ns.to_owned(), n.to_owned()))
    .collect();
    assert_eq!(got, want);
}
