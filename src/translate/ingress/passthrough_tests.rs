//! `ssl-passthrough` through the pure translator: the implicit Gateway's port 443 is one
//! HTTPS socket whose SNI index passes the passthrough host to its Ingress's Service and
//! leaves the other TLS host to be terminated, the passthrough listener counts the Ingress,
//! and plain HTTP still follows the rules.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;

use crate::kinds::routes::RouteKindId;
use crate::snapshot::Snapshot;
use crate::status::ObjectKind;
use crate::table::BackendTarget;
use crate::translate::ingress::IMPLICIT_NAMESPACE;
use crate::translate::testing::{options, snapshot};
use crate::translate::{translate, PortMap};

fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    serde_yaml_ng::from_str(yaml).expect("fixture")
}

fn tls_secret(name: &str, host: &str) -> Secret {
    let c = rcgen::generate_simple_self_signed(vec![host.to_owned()]).expect("certificate");
    let mut secret = Secret::default();
    secret.metadata.name = Some(name.into());
    secret.metadata.namespace = Some("ns".into());
    secret.type_ = Some("kubernetes.io/tls".into());
    let mut data = BTreeMap::new();
    data.insert("tls.crt".to_owned(), ByteString(c.cert.pem().into_bytes()));
    data.insert(
        "tls.key".to_owned(),
        ByteString(c.signing_key.serialize_pem().into_bytes()),
    );
    secret.data = Some(data);
    secret
}

fn with_passthrough() -> Snapshot {
    let mut s = snapshot(&[]);
    s.ingress_classes = vec![Arc::new(parse(
        "metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}",
    ))];
    s.ingresses = vec![
        Arc::new(parse(
            "metadata: {name: pass, namespace: ns, generation: 1, annotations: {nginx.ingress.kubernetes.io/ssl-passthrough: 'true'}}\nspec:\n  ingressClassName: edge\n  tls: [{hosts: [pass.test], secretName: web-cert}]\n  rules: [{host: pass.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: vault, port: {number: 8443}}}}]}}]",
        )),
        Arc::new(parse(
            "metadata: {name: web, namespace: ns, generation: 1}\nspec:\n  ingressClassName: edge\n  tls: [{hosts: [web.test], secretName: web-cert}]\n  rules: [{host: web.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]",
        )),
    ];
    s.services = vec![
        Arc::new(parse(
            "metadata: {name: vault, namespace: ns}\nspec: {ports: [{port: 8443}]}",
        )),
        Arc::new(parse(
            "metadata: {name: web, namespace: ns}\nspec: {ports: [{port: 80}]}",
        )),
    ];
    s.secrets = vec![Arc::new(tls_secret("web-cert", "web.test"))];
    s
}

#[test]
fn the_https_socket_passes_the_passthrough_host_and_terminates_the_others() {
    let t = translate(&with_passthrough(), &options(PortMap::default()));
    let addr: SocketAddr = ([127, 0, 0, 9], 443).into();
    let socket = t.table.listeners.get(&addr).expect("the HTTPS socket");
    assert!(socket.tls.is_some() && socket.l4.is_none());
    assert!(socket.passes_through(Some("pass.test")));
    assert!(!socket.passes_through(Some("web.test")));
    assert!(!socket.passes_through(None));
    let routes = socket.passthrough.as_ref().expect("passthrough routes");
    let listener = routes.passes_through(Some("pass.test")).expect("listener");
    let route = listener.route(Some("pass.test")).expect("route");
    assert_eq!(route.route.kind(), "Ingress");
    assert_eq!(route.route.label(), "ns/pass");
    let backends: Vec<String> = route
        .backends
        .backends
        .iter()
        .map(|b| match &b.target {
            BackendTarget::Service(s) => s.service.to_string(),
            BackendTarget::Invalid { reason } => reason.clone(),
        })
        .collect();
    assert_eq!(backends, ["ns/vault:8443"]);

    // The implicit Gateway: a TLS Passthrough listener for the host instead of an HTTPS one,
    // programmed beside the other host's HTTPS listener and counting the Ingress.
    let gw = t
        .status
        .get(ObjectKind::Gateway, Some(IMPLICIT_NAMESPACE), "edge")
        .map(|e| e.status.to_json().into_owned())
        .expect("the implicit Gateway");
    let listeners = gw["listeners"].as_array().cloned().unwrap_or_default();
    let summary: Vec<(String, u64, bool)> = listeners
        .iter()
        .map(|l| {
            let programmed = l["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Programmed" && c["status"] == "True");
            let name = l["name"].as_str().unwrap_or("").to_owned();
            (name, l["attachedRoutes"].as_u64().unwrap_or(0), programmed)
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("http".to_owned(), 2, true),
            ("passthrough-0".to_owned(), 1, true),
            ("https-0".to_owned(), 1, true),
        ]
    );

    // Plain HTTP for the passthrough host still follows the Ingress's rules.
    let plain: SocketAddr = ([127, 0, 0, 9], 80).into();
    let http = t.table.listeners.get(&plain).expect("the HTTP socket");
    assert!(http.hosts.candidates("pass.test").next().is_some());
    let entry = t
        .status
        .get(ObjectKind::Route(RouteKindId::Ingress), Some("ns"), "pass")
        .expect("the Ingress's status");
    let text = entry.status.to_json().to_string();
    assert!(!text.contains("ssl-passthrough"), "{text}");
}

/// The `Unsupported` text of Ingress `ns/name`.
fn problems_of(t: &crate::translate::Translation, name: &str) -> String {
    t.status
        .get(ObjectKind::Route(RouteKindId::Ingress), Some("ns"), name)
        .map(|e| e.status.to_json().to_string())
        .expect("the Ingress's status")
}

#[test]
fn a_missing_secret_is_reported_for_terminated_hosts_only() {
    let mut s = with_passthrough();
    s.secrets.clear();
    let t = translate(&s, &options(PortMap::default()));
    // `pass.test` is passed through: its Secret would never be used.
    let pass = problems_of(&t, "pass");
    assert!(!pass.contains("not found"), "{pass}");
    // `web.test` is terminated with it.
    let web = problems_of(&t, "web");
    assert!(web.contains("TLS Secret ns/web-cert not found"), "{web}");
}

#[test]
fn a_passthrough_host_the_ingress_gateway_does_not_pass_through_is_reported() {
    use crate::translate::ingress::IngressOptions;
    let listeners = [
        "{name: web, port: 443, protocol: HTTPS, hostname: web.test, tls: {certificateRefs: [{name: web-cert, namespace: ns}]}, allowedRoutes: {namespaces: {from: All}}}",
        "{name: pass, port: 443, protocol: TLS, hostname: pass.test, tls: {mode: Passthrough}, allowedRoutes: {namespaces: {from: All}}}",
    ];
    let gateway = |listeners: &[&str]| -> String {
        format!(
            "metadata: {{name: shared, namespace: ns}}\nspec:\n  gatewayClassName: c\n  listeners: [{}]",
            listeners.join(", ")
        )
    };
    let mut opts = options(PortMap::default());
    opts.ingress = IngressOptions {
        gateway: Some(("ns".into(), "shared".into())),
        ..Default::default()
    };
    let mut s = with_passthrough();
    s.gateway_classes = snapshot(&[]).gateway_classes;
    // Only an HTTPS listener: nothing passes pass.test through.
    s.gateways = vec![Arc::new(parse(&gateway(&listeners[..1])))];
    let t = translate(&s, &opts);
    let pass = problems_of(&t, "pass");
    assert!(
        pass.contains("host pass.test is not passed through: Gateway ns/shared has no TLS listener in Passthrough mode"),
        "{pass}"
    );
    assert!(!problems_of(&t, "web").contains("passed through"));
    assert!(t
        .status
        .problems()
        .iter()
        .any(|p| p.object.starts_with("Ingress ns/pass")));

    // With a TLS Passthrough listener for the host: passed through, nothing reported.
    s.gateways = vec![Arc::new(parse(&gateway(&listeners)))];
    let t = translate(&s, &opts);
    let pass = problems_of(&t, "pass");
    assert!(!pass.contains("is not passed through"), "{pass}");
    let addr: SocketAddr = ([127, 0, 0, 9], 443).into();
    let socket = t.table.listeners.get(&addr).expect("the HTTPS socket");
    assert!(socket.passes_through(Some("pass.test")));
}
