//! Ingress translation, end to end through the pure translator: which Ingresses are ours
//! (class field, deprecated annotation, default class, `--watch-ingress-without-class`),
//! which rule a request reaches (hosts and wildcards, Exact and Prefix paths, default
//! backends), the implicit Gateway and `--ingress-gateway`, and what is reported.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{HeaderMap, Method};
use serde_json::Value;

use crate::kinds::routes::RouteKindId;
use crate::snapshot::Snapshot;
use crate::status::ObjectKind;
use crate::table::{BackendTarget, RequestView};
use crate::translate::ingress::{IngressOptions, IMPLICIT_NAMESPACE};
use crate::translate::testing::{options, snapshot};
use crate::translate::{translate, PortMap, TranslateOptions, Translation};

const OURS: &str = "metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}";
const DEFAULT: &str = "metadata: {name: edge, annotations: {ingressclass.kubernetes.io/is-default-class: 'true'}}\nspec: {controller: edgeplane.dev/ingress-controller}";
const OTHER: &str = "metadata: {name: nginx}\nspec: {controller: k8s.io/ingress-nginx}";

fn ingress(name: &str, spec: &str) -> String {
    format!("metadata: {{name: {name}, namespace: ns, generation: 1}}\nspec:\n{spec}")
}

fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    serde_yaml_ng::from_str(yaml).expect("fixture")
}

fn with(classes: &[&str], ingresses: &[String], extra: impl FnOnce(&mut Snapshot)) -> Snapshot {
    let mut s = snapshot(&[]);
    s.ingress_classes = classes.iter().map(|c| Arc::new(parse(c))).collect();
    s.ingresses = ingresses.iter().map(|i| Arc::new(parse(i))).collect();
    s.services = vec![Arc::new(parse(
        "metadata: {name: svc, namespace: ns}\nspec: {ports: [{name: web, port: 8080}, {port: 1}, {port: 2}, {port: 3}, {port: 7}, {port: 9000}]}",
    ))];
    extra(&mut s);
    s
}

fn run(s: &Snapshot, ingress: IngressOptions) -> Translation {
    let options = TranslateOptions {
        ingress,
        ..options(PortMap::default())
    };
    translate(s, &options)
}

/// `ingress#rule` serving `host` and `path` on port `port` of 127.0.0.9, with the backend's
/// Service port (`-` when it is not a resolved Service).
fn routed(t: &Translation, port: u16, host: &str, path: &str) -> Option<String> {
    let addr: SocketAddr = ([127, 0, 0, 9], port).into();
    let listener = t.table.listeners.get(&addr)?;
    let headers = HeaderMap::new();
    let view = RequestView {
        host,
        path,
        query: None,
        method: &Method::GET,
        headers: &headers,
    };
    let rule = listener.route(&view)?;
    let backend = match rule.backends.backends.first().map(|b| &b.target) {
        Some(BackendTarget::Service(s)) => s.service.to_string(),
        _ => "-".to_owned(),
    };
    assert_eq!(rule.route.kind(), "Ingress");
    Some(format!(
        "{}#{} {backend}",
        rule.route.name(),
        rule.rule_index
    ))
}

fn status(t: &Translation, name: &str) -> Value {
    t.status
        .get(ObjectKind::Route(RouteKindId::Ingress), Some("ns"), name)
        .map(|e| e.status.to_json().into_owned())
        .unwrap_or(Value::Null)
}

/// `(type, status, reason)` of the first parent's conditions.
fn conditions(v: &Value) -> Vec<(String, String, String)> {
    let list = v["parents"][0]["conditions"].as_array().cloned();
    list.into_iter()
        .flatten()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            (s("type"), s("status"), s("reason"))
        })
        .collect()
}

const SIMPLE: &str = "  rules: [{http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: svc, port: {number: 8080}}}}]}}]";

#[test]
fn ours_by_class_annotation_default_class_or_flag() {
    let named = ingress("named", &format!("  ingressClassName: edge\n{SIMPLE}"));
    let annotated = format!(
        "metadata: {{name: annotated, namespace: ns, annotations: {{kubernetes.io/ingress.class: edge}}}}\nspec:\n{SIMPLE}"
    );
    let other = ingress("other", &format!("  ingressClassName: nginx\n{SIMPLE}"));
    let classless = ingress("classless", SIMPLE);
    let all = [named, annotated, other, classless];
    let served = |t: &Translation| -> Vec<String> {
        let mut names: Vec<String> = t
            .status
            .entries
            .iter()
            .filter(|e| e.kind == ObjectKind::Route(RouteKindId::Ingress))
            .map(|e| e.name.to_string())
            .collect();
        names.sort();
        names
    };
    let plain = run(
        &with(&[OURS, OTHER], &all, |_| {}),
        IngressOptions::default(),
    );
    assert_eq!(served(&plain), ["annotated", "named"]);
    let default = run(
        &with(&[DEFAULT, OTHER], &all, |_| {}),
        IngressOptions::default(),
    );
    assert_eq!(served(&default), ["annotated", "classless", "named"]);
    let flag = IngressOptions {
        without_class: true,
        ..Default::default()
    };
    let flagged = run(&with(&[OURS, OTHER], &all, |_| {}), flag.clone());
    assert_eq!(served(&flagged), ["annotated", "classless", "named"]);
    // Without any class of ours, the flag still serves Ingresses naming none.
    let alone = run(&with(&[], &all, |_| {}), flag);
    assert_eq!(served(&alone), ["classless"]);
    // A class of another controller is not ours, even as the default.
    let theirs = "metadata: {name: nginx, annotations: {ingressclass.kubernetes.io/is-default-class: 'true'}}\nspec: {controller: k8s.io/ingress-nginx}";
    let other_default = run(&with(&[theirs], &all, |_| {}), IngressOptions::default());
    assert!(served(&other_default).is_empty());
}

#[test]
fn hosts_paths_and_default_backends_route_as_ingress_nginx() {
    let shop = ingress(
        "shop",
        "  ingressClassName: edge
  defaultBackend: {service: {name: svc, port: {number: 9000}}}
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /cart, pathType: Exact, backend: {service: {name: svc, port: {number: 1}}}}
      - {path: /api, pathType: Prefix, backend: {service: {name: svc, port: {number: 2}}}}
      - {path: /static, pathType: ImplementationSpecific, backend: {service: {name: svc, port: {name: web}}}}
  - host: '*.example.com'
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: svc, port: {number: 3}}}}",
    );
    let any = ingress(
        "any",
        "  ingressClassName: edge
  rules:
  - http:
      paths:
      - {path: /health, pathType: Exact, backend: {service: {name: svc, port: {number: 4}}}}",
    );
    let t = run(
        &with(&[OURS], &[shop, any], |_| {}),
        IngressOptions::default(),
    );
    let r = |host: &str, path: &str| routed(&t, 80, host, path);
    // Exact matches only its path; the host's default backend takes the rest.
    assert_eq!(
        r("shop.example.com", "/cart").as_deref(),
        Some("shop#0 ns/svc:1")
    );
    assert_eq!(
        r("shop.example.com", "/cart/x").as_deref(),
        Some("shop#4 ns/svc:9000")
    );
    // Prefix matches by path segment.
    assert_eq!(
        r("shop.example.com", "/api/v1").as_deref(),
        Some("shop#1 ns/svc:2")
    );
    assert_eq!(
        r("shop.example.com", "/apiv1").as_deref(),
        Some("shop#4 ns/svc:9000")
    );
    // ImplementationSpecific is a prefix; a port name is resolved through the Service.
    assert_eq!(
        r("shop.example.com", "/static/a.css").as_deref(),
        Some("shop#2 ns/svc:8080")
    );
    // A wildcard host serves the names it covers, not the bare domain.
    assert_eq!(
        r("www.example.com", "/x").as_deref(),
        Some("shop#3 ns/svc:3")
    );
    // The default backend is served on the wildcard host too.
    assert_eq!(
        r("a.b.example.com", "/x").as_deref(),
        Some("shop#3 ns/svc:3")
    );
    // Rules without a host serve the hosts no rule names, not shop.example.com.
    assert_eq!(r("other.test", "/health").as_deref(), Some("any#0 -"));
    assert_eq!(
        r("shop.example.com", "/health").as_deref(),
        Some("shop#4 ns/svc:9000")
    );
    assert_eq!(r("other.test", "/cart"), None);
    // Every condition is fine: the Ingress attached to its implicit Gateway.
    let s = status(&t, "shop");
    assert_eq!(
        s["parents"][0]["parentRef"]["namespace"],
        IMPLICIT_NAMESPACE
    );
    assert_eq!(s["parents"][0]["parentRef"]["name"], "edge");
    assert!(conditions(&s)
        .iter()
        .all(|(ty, st, _)| st == "True" || ty == "Unsupported"));
    assert!(!conditions(&s).iter().any(|(ty, _, _)| ty == "Unsupported"));
}

#[test]
fn a_default_backend_alone_serves_every_host() {
    let all = ingress(
        "all",
        "  ingressClassName: edge\n  defaultBackend: {service: {name: svc, port: {number: 7}}}",
    );
    let t = run(&with(&[OURS], &[all], |_| {}), IngressOptions::default());
    assert_eq!(
        routed(&t, 80, "x.test", "/a/b").as_deref(),
        Some("all#0 ns/svc:7")
    );
    assert_eq!(
        routed(&t, 80, "y.test", "/").as_deref(),
        Some("all#0 ns/svc:7")
    );
}

#[test]
fn tls_hosts_get_https_listeners_with_their_secrets() {
    let tls = ingress(
        "tls",
        &format!(
            "  ingressClassName: edge\n  tls: [{{hosts: [shop.example.com], secretName: shop-cert}}, {{hosts: [missing.example.com], secretName: nope}}]\n{}",
            "  rules: [{host: shop.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: svc, port: {number: 1}}}}]}}]"
        ),
    );
    let t = run(&with(&[OURS], &[tls], |_| {}), IngressOptions::default());
    let gw = t
        .status
        .get(ObjectKind::Gateway, Some(IMPLICIT_NAMESPACE), "edge")
        .map(|e| e.status.to_json().into_owned())
        .expect("the implicit Gateway is in the report");
    let listeners: Vec<&str> = gw["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["name"].as_str())
        .collect();
    assert_eq!(listeners, ["http", "https-0", "https-1"]);
    // The missing Secret is a problem of the Ingress, named there.
    let s = status(&t, "tls");
    let unsupported = &s["parents"][0]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Unsupported").cloned())
        .expect("an Unsupported condition");
    assert_eq!(unsupported["status"], "True");
    let message = unsupported["message"].as_str().unwrap_or("");
    assert!(
        message.contains("TLS Secret ns/nope not found"),
        "{message}"
    );
    assert!(
        message.contains("TLS Secret ns/shop-cert not found"),
        "{message}"
    );
}

#[test]
fn annotations_and_resource_backends_are_reported_not_ignored() {
    let annotated = format!(
        "metadata: {{name: a, namespace: ns, generation: 1, annotations: {{nginx.ingress.kubernetes.io/mirror-target: \"true\"}}}}\nspec:\n  ingressClassName: edge\n{SIMPLE}"
    );
    let resource = ingress(
        "r",
        "  ingressClassName: edge\n  rules: [{host: r.test, http: {paths: [{path: /, pathType: Prefix, backend: {resource: {apiGroup: k8s.example.com, kind: StorageBucket, name: b}}}]}}]",
    );
    let t = run(
        &with(&[OURS], &[annotated, resource], |_| {}),
        IngressOptions::default(),
    );
    let a = status(&t, "a");
    assert!(conditions(&a).contains(&(
        "Unsupported".into(),
        "True".into(),
        "UnsupportedValue".into()
    )));
    let text = a.to_string();
    assert!(text.contains("nginx.ingress.kubernetes.io/mirror-target is not supported yet"));
    // The request is still served by the rule (the annotation changes nothing).
    assert_eq!(
        routed(&t, 80, "a.test", "/").as_deref(),
        Some("a#0 ns/svc:8080")
    );
    let r = status(&t, "r");
    assert!(r
        .to_string()
        .contains("resource backend StorageBucket b is refused"));
    assert!(conditions(&r)
        .iter()
        .any(|(ty, st, _)| ty == "ResolvedRefs" && st == "False"));
    let problems = t.status.problems();
    assert!(problems
        .iter()
        .any(|p| p.object.starts_with("Ingress ns/a")));
}

#[test]
fn an_ingress_gateway_serves_them_instead_of_an_implicit_one() {
    let gateway = "metadata: {name: shared, namespace: infra}
spec:
  gatewayClassName: c
  listeners: [{name: web, port: 8000, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]";
    let shop = ingress("shop", &format!("  ingressClassName: edge\n{SIMPLE}"));
    let s = with(&[OURS], &[shop], |s| {
        s.gateways = vec![Arc::new(serde_yaml_ng::from_str(gateway).expect("gateway"))];
    });
    let options = IngressOptions {
        gateway: Some(("infra".into(), "shared".into())),
        ..Default::default()
    };
    let t = run(&s, options);
    assert_eq!(
        routed(&t, 8000, "x.test", "/").as_deref(),
        Some("shop#0 ns/svc:8080")
    );
    assert!(
        routed(&t, 80, "x.test", "/").is_none(),
        "no implicit Gateway"
    );
    assert!(t
        .status
        .get(ObjectKind::Gateway, Some(IMPLICIT_NAMESPACE), "edge")
        .is_none());
    // The Gateway's status lists only Gateway API kinds; the Ingress counts as attached.
    let gw = t
        .status
        .get(ObjectKind::Gateway, Some("infra"), "shared")
        .map(|e| e.status.to_json().into_owned())
        .expect("gateway status");
    let kinds = gw["listeners"][0]["supportedKinds"].to_string();
    assert!(!kinds.contains("Ingress"), "{kinds}");
    assert_eq!(gw["listeners"][0]["attachedRoutes"], 1);
}

#[test]
fn an_ingress_gateway_that_is_missing_or_not_ours_is_reported_on_each_ingress() {
    let shop = ingress("shop", &format!("  ingressClassName: edge\n{SIMPLE}"));
    let options = IngressOptions {
        gateway: Some(("infra".into(), "shared".into())),
        ..Default::default()
    };
    let missing = run(
        &with(&[OURS], std::slice::from_ref(&shop), |_| {}),
        options.clone(),
    );
    let entry = status(&missing, "shop");
    assert_eq!(
        conditions(&entry),
        [
            ("Accepted".into(), "False".into(), "NoMatchingParent".into()),
            (
                "Unsupported".into(),
                "True".into(),
                "UnsupportedValue".into()
            )
        ]
    );
    assert_eq!(entry["parents"][0]["parentRef"]["name"], "shared");
    assert!(
        entry
            .to_string()
            .contains("--ingress-gateway infra/shared: no such Gateway"),
        "{entry}"
    );
    assert!(missing
        .status
        .problems()
        .iter()
        .any(|p| p.object.starts_with("Ingress ns/shop")));
    // A Gateway of another controller's class.
    let theirs = "metadata: {name: shared, namespace: infra}
spec:
  gatewayClassName: other
  listeners: [{name: web, port: 8000, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]";
    let s = with(&[OURS], std::slice::from_ref(&shop), |s| {
        s.gateways = vec![Arc::new(parse(theirs))];
    });
    let entry = status(&run(&s, options.clone()), "shop");
    assert!(
        entry
            .to_string()
            .contains("its GatewayClass \\\"other\\\" is not one of ours"),
        "{entry}"
    );
    // Ours: served, nothing reported.
    let s = with(&[OURS], &[shop], |s| {
        s.gateways = vec![Arc::new(parse(&theirs.replace("other", "c")))];
    });
    let t = run(&s, options);
    let entry = status(&t, "shop");
    assert!(!entry.to_string().contains("ingress-gateway"), "{entry}");
    assert_eq!(
        routed(&t, 8000, "x.test", "/").as_deref(),
        Some("shop#0 ns/svc:8080")
    );
}

#[test]
fn no_ingress_no_copy() {
    let s = with(&[OURS], &[], |_| {});
    assert!(super::prepare(&s, &options(PortMap::default())).is_none());
}

#[test]
fn incremental_translations_equal_fresh_ones() {
    let shop = |path: &str, port: u16| {
        ingress(
            "shop",
            &format!(
                "  ingressClassName: edge\n  defaultBackend: {{service: {{name: svc, port: {{number: 7}}}}}}\n  rules: [{{host: a.test, http: {{paths: [{{path: {path}, pathType: Exact, backend: {{service: {{name: svc, port: {{number: {port}}}}}}}}}]}}}}, {{host: '*.b.test', http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: svc, port: {{name: web}}}}}}}}]}}}}]"
            ),
        )
    };
    let other = ingress("other", &format!("  ingressClassName: edge\n{SIMPLE}"));
    let steps = [
        vec![shop("/x", 1)],
        vec![shop("/x", 1), other.clone()],
        vec![shop("/y", 2), other.clone()],
        vec![other],
        vec![shop("/x", 3)],
    ];
    let opts = options(PortMap::default());
    let mut memory = crate::translate::Incremental::default();
    for (i, ingresses) in steps.iter().enumerate() {
        let s = with(&[OURS], ingresses, |_| {});
        let cached = memory.translate(&s, &opts, &Default::default());
        let fresh = translate(&s, &opts);
        assert_eq!(
            serde_json::to_value(&cached.table).expect("table"),
            serde_json::to_value(&fresh.table).expect("table"),
            "step {i}"
        );
        assert_eq!(
            serde_json::to_value(&cached.status).expect("status"),
            serde_json::to_value(&fresh.status).expect("status"),
            "step {i}"
        );
    }
}

/// The rule serving `host` and `path` on port 80 of 127.0.0.9.
fn rule_of(t: &Translation, host: &str, path: &str) -> Arc<crate::table::RouteRule> {
    let addr: SocketAddr = ([127, 0, 0, 9], 80).into();
    let headers = HeaderMap::new();
    let view = RequestView {
        host,
        path,
        query: None,
        method: &Method::GET,
        headers: &headers,
    };
    let listener = t.table.listeners.get(&addr).expect("listener");
    listener.route(&view).expect("rule").clone()
}

#[test]
fn annotations_reach_the_compiled_rules() {
    let annotated = format!(
        "metadata: {{name: a, namespace: ns, generation: 1, annotations: {{\
         nginx.ingress.kubernetes.io/force-ssl-redirect: 'true', \
         nginx.ingress.kubernetes.io/proxy-body-size: 1k, \
         nginx.ingress.kubernetes.io/denylist-source-range: 10.0.0.0/8, \
         nginx.ingress.kubernetes.io/rewrite-target: /v2, \
         nginx.ingress.kubernetes.io/proxy-read-timeout: '7'}}}}\nspec:\n  ingressClassName: edge\n{SIMPLE}"
    );
    let t = run(
        &with(&[OURS], &[annotated], |_| {}),
        IngressOptions::default(),
    );
    let rule = rule_of(&t, "a.test", "/");
    let f = &rule.filters;
    assert!(f.https_redirect);
    let policy = f.policy.as_ref().expect("policy");
    assert_eq!(policy.max_request_body, Some(1024));
    let access = policy.ip_access.as_ref().expect("ip access");
    assert_eq!(access.deny.len(), 1);
    assert_eq!(
        f.timeouts.backend_request,
        Some(std::time::Duration::from_secs(12))
    );
    assert!(f.rewrite.is_some(), "{f:?}");
    // Nothing applied is reported.
    assert!(!status(&t, "a").to_string().contains("Unsupported"));
}

#[path = "quirk_tests.rs"]
mod quirks;
