//! The converter through the pure translator: what is written for Ingresses sharing a host,
//! TLS hosts with `ssl-redirect`, a host without one, a class of ingress-nginx, a skipped
//! Ingress, more TLS hosts than a Gateway takes; and `verify` finding no difference for them
//! and the difference planted in a changed conversion.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};

use super::verify::{converted_snapshot, verify};
use super::*;
use crate::admission::Crds;
use crate::provider::admitted::{Admission, Reading, Taken};

fn admit(yaml: &str) -> Snapshot {
    let mut admission: Admission = Admission::new(Arc::new(Crds::default()));
    let applied = admission.apply(
        vec![(PathBuf::from("t.yaml"), Taken::Read(Ok(yaml.to_owned())))],
        Reading::Final,
    );
    assert!(applied.errors.is_empty(), "{:?}", applied.errors);
    admission.snapshot()
}

fn yaml(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| format!("---\n{}", crate::yaml_out::to_string(o).expect("yaml")))
        .collect()
}

const INPUT: &str = r#"
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: other}
spec: {controller: example.com/other}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec: {ports: [{name: http, port: 8080}]}
---
apiVersion: v1
kind: Secret
metadata: {name: shop-tls, namespace: shop}
type: kubernetes.io/tls
stringData: {tls.crt: x, tls.key: y}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/proxy-body-size: 2m
    nginx.ingress.kubernetes.io/whitelist-source-range: 10.0.0.0/8
    nginx.ingress.kubernetes.io/no-such-thing: "1"
spec:
  ingressClassName: nginx
  tls: [{hosts: [shop.example.com], secretName: shop-tls}]
  rules:
  - host: shop.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}]}
  - host: plain.example.com
    http: {paths: [{path: /exact, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: api
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/rewrite-target: /v2
    nginx.ingress.kubernetes.io/proxy-read-timeout: "10"
spec:
  ingressClassName: nginx
  rules:
  - host: shop.example.com
    http: {paths: [{path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 8080}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: theirs, namespace: shop}
spec:
  ingressClassName: other
  defaultBackend: {service: {name: web, port: {number: 80}}}
"#;

fn by_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

#[test]
fn ingresses_are_written_as_a_gateway_routes_per_host_and_a_policy() {
    let c = convert(&admit(INPUT), &ConvertOptions::default());
    let text = yaml(&c.objects);
    assert!(!text.contains("edgeplane:ingress"), "{text}");
    let gateways = by_kind(&c.objects, "Gateway");
    assert_eq!(gateways.len(), 1);
    let gw = gateways[0];
    assert_eq!(gw["metadata"]["name"], "nginx");
    assert_eq!(gw["metadata"]["namespace"], DEFAULT_GATEWAY_NAMESPACE);
    assert_eq!(gw["spec"]["gatewayClassName"], DEFAULT_GATEWAY_CLASS);
    let listeners = gw["spec"]["listeners"].as_array().expect("listeners");
    assert_eq!(listeners[1]["name"], "https-shop-example-com");
    assert_eq!(
        listeners[1]["tls"]["certificateRefs"][0]["namespace"],
        "shop"
    );
    let grants = by_kind(&c.objects, "ReferenceGrant");
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0]["spec"]["to"][0]["name"], "shop-tls");
    let routes: Vec<&str> = by_kind(&c.objects, "HTTPRoute")
        .iter()
        .map(|r| r["metadata"]["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        routes,
        [
            "api",
            "web-shop-example-com-https-redirect",
            "web-shop-example-com",
            "web-plain-example-com",
        ]
    );
    let policies = by_kind(&c.objects, "TrafficPolicy");
    assert_eq!(policies.len(), 1);
    assert_eq!(
        policies[0]["spec"]["targetRefs"].as_array().map(Vec::len),
        Some(3)
    );
    assert_eq!(
        policies[0]["spec"]["bodyLimits"]["maxRequestBytes"],
        2 << 20
    );
    // The report: the unknown annotation is not converted, the timeouts differ from nginx,
    // the Ingress of another controller is skipped.
    let report = c.report.text();
    assert!(report.contains("nginx.ingress.kubernetes.io/no-such-thing: not converted: annotation nginx.ingress.kubernetes.io/no-such-thing is not supported yet"), "{report}");
    assert!(
        report.contains("proxy-read-timeout: converted with a difference"),
        "{report}"
    );
    assert!(
        report.contains("Ingress shop/theirs: not converted: IngressClass \"other\""),
        "{report}"
    );
    assert_eq!(c.report.converted(), 2);
}

#[test]
fn verify_finds_no_difference_in_a_conversion_and_the_one_planted() {
    let c = convert(&admit(INPUT), &ConvertOptions::default());
    let written = admit(&yaml(&c.objects));
    let compared = converted_snapshot(&c.input, &written, DEFAULT_GATEWAY_CLASS);
    let v = verify(&c.input, &compared);
    assert!(v.requests > 20, "{}", v.requests);
    assert!(v.differences.is_empty(), "{:#?}", v.differences);
    // The api route sends to port 80 instead of 8080.
    let planted = yaml(&c.objects).replace("port: 8080", "port: 80");
    let compared = converted_snapshot(&c.input, &admit(&planted), DEFAULT_GATEWAY_CLASS);
    let v = verify(&c.input, &compared);
    assert!(!v.differences.is_empty());
    let d = &v.differences[0];
    assert!(
        d.request.path.starts_with("/api") || d.request.path.starts_with("/API"),
        "{d:?}"
    );
    assert!(d.ingress.backends[0].starts_with("shop/api:8080"), "{d:?}");
    assert!(
        d.converted.backends[0].contains("shop/api has no port 80"),
        "{d:?}"
    );
}

#[test]
fn past_64_tls_hosts_listeners_go_into_listener_sets() {
    let mut input = String::from(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: edge, annotations: {ingressclass.kubernetes.io/is-default-class: 'true'}}\nspec: {controller: edgeplane.dev/ingress-controller}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: edgeplane-system}\nspec: {ports: [{port: 80}]}\n",
    );
    for i in 0..70 {
        input.push_str(&format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: t{i}, namespace: edgeplane-system}}\ntype: kubernetes.io/tls\nstringData: {{tls.crt: x, tls.key: y}}\n\
             ---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i{i}, namespace: edgeplane-system}}\n\
             spec:\n  tls: [{{hosts: [h{i}.example.com], secretName: t{i}}}]\n  rules: [{{host: h{i}.example.com, http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}}}]\n"
        ));
    }
    let c = convert(&admit(&input), &ConvertOptions::default());
    let gw = by_kind(&c.objects, "Gateway")[0];
    assert_eq!(gw["spec"]["listeners"].as_array().map(Vec::len), Some(64));
    assert_eq!(gw["spec"]["allowedListeners"]["namespaces"]["from"], "Same");
    let sets = by_kind(&c.objects, "ListenerSet");
    assert_eq!(sets.len(), 1);
    assert_eq!(
        sets[0]["spec"]["listeners"].as_array().map(Vec::len),
        Some(7)
    );
    // Same namespace as the Secrets: no grant, no namespace on the references.
    assert!(by_kind(&c.objects, "ReferenceGrant").is_empty());
    let last = by_kind(&c.objects, "HTTPRoute")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "i69")
        .expect("route of the last host");
    assert_eq!(last["spec"]["parentRefs"][0]["kind"], "ListenerSet");
    let written = admit(&yaml(&c.objects));
    let compared = converted_snapshot(&c.input, &written, DEFAULT_GATEWAY_CLASS);
    let v = verify(&c.input, &compared);
    assert!(v.differences.is_empty(), "{:#?}", &v.differences[..1]);
}

#[test]
fn the_corpus_has_the_edge_cases_and_the_canary_header_and_cookie() {
    let input = admit(&format!(
        "{}\n---\n{}",
        INPUT.split("---\napiVersion: networking.k8s.io/v1\nkind: Ingress").next().expect("classes"),
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: c\n  namespace: shop\n  annotations:\n    nginx.ingress.kubernetes.io/canary-by-header: X-Canary\n    nginx.ingress.kubernetes.io/canary-by-header-value: yes-please\n    nginx.ingress.kubernetes.io/canary-by-cookie: beta\nspec:\n  ingressClassName: nginx\n  rules:\n  - host: c.test\n    http: {paths: [{path: '/api/(v[0-9]+)', pathType: ImplementationSpecific, backend: {service: {name: api, port: {number: 8080}}}}]}\n"
    ));
    let c = convert(&input, &ConvertOptions::default());
    let ingresses = crate::translate::ingress::prepare(&c.input, &translate_options())
        .expect("prepared")
        .snapshot
        .ingresses;
    let corpus = verify::corpus(&ingresses);
    let seen: Vec<String> = corpus.iter().map(ToString::to_string).collect();
    for want in [
        "GET http://c.test/",
        "POST http://c.test/",
        "GET http://c.test/api/(v[0-9]+)",
        "GET http://c.test/api/v0-9",
        "GET http://c.test/api/v0-9/",
        "GET http://c.test/API/V0-9",
        "GET http://c.test/api/v0-9/deeper",
        "GET http://c.test/api/v0-9x",
        "GET http://c.test/api/(v[0-9]+) [x-canary: yes-please]",
        "GET http://c.test/api/(v[0-9]+) [cookie: beta=always]",
    ] {
        assert!(seen.iter().any(|s| s == want), "{want} not in {seen:#?}");
    }
}

#[test]
fn affinity_cookie_attributes_are_reported_and_verify_shows_the_path() {
    let input = INPUT.replace(
        "    nginx.ingress.kubernetes.io/proxy-body-size: 2m\n",
        "    nginx.ingress.kubernetes.io/proxy-body-size: 2m\n    \
         nginx.ingress.kubernetes.io/affinity: cookie\n",
    );
    let c = convert(&admit(&input), &ConvertOptions::default());
    let report = c.report.text();
    assert!(
        report.contains("affinity: converted with a difference"),
        "{report}"
    );
    let written = admit(&yaml(&c.objects));
    let compared = converted_snapshot(&c.input, &written, DEFAULT_GATEWAY_CLASS);
    let v = verify(&c.input, &compared);
    // Only the Exact /exact rule's cookie has a path of its own (the / prefix's is /).
    assert!(!v.differences.is_empty());
    for d in &v.differences {
        assert_eq!(d.request.host, "plain.example.com", "{d:?}");
        let served = d.ingress.filters.as_ref().map(ToString::to_string);
        let converted = d.converted.filters.as_ref().map(ToString::to_string);
        assert!(
            served.is_some_and(|f| f.contains("\"path\":\"/exact\"")),
            "{d:?}"
        );
        assert!(converted.is_some_and(|f| !f.contains("/exact")), "{d:?}");
    }
}

#[test]
fn send_timeout_and_retry_budget_are_reported_not_converted_and_verify_lists_them() {
    let input = INPUT.replace(
        "    nginx.ingress.kubernetes.io/proxy-read-timeout: \"10\"\n",
        "    nginx.ingress.kubernetes.io/proxy-read-timeout: \"10\"\n    \
         nginx.ingress.kubernetes.io/proxy-send-timeout: \"5\"\n    \
         nginx.ingress.kubernetes.io/proxy-next-upstream-tries: \"2\"\n    \
         nginx.ingress.kubernetes.io/proxy-next-upstream-timeout: \"3\"\n",
    );
    let c = convert(&admit(&input), &ConvertOptions::default());
    let report = c.report.text();
    assert!(
        report.contains("proxy-send-timeout: not converted: not written"),
        "{report}"
    );
    assert!(
        report.contains("proxy-next-upstream-timeout: not converted: not written"),
        "{report}"
    );
    let written = admit(&yaml(&c.objects));
    let compared = converted_snapshot(&c.input, &written, DEFAULT_GATEWAY_CLASS);
    let v = verify(&c.input, &compared);
    assert!(!v.differences.is_empty());
    for d in &v.differences {
        let served = d.ingress.filters.as_ref().map(ToString::to_string);
        assert!(
            served.is_some_and(
                |f| f.contains("\"backendSendIdle\":\"5000ms\"") && f.contains("\"within\"")
            ),
            "{d:?}"
        );
    }
}

#[test]
fn a_route_on_more_than_32_listeners_is_written_as_several() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/convert/many-listeners.yaml"
    ))
    .expect("fixture");
    let c = convert(&admit(&text), &ConvertOptions::default());
    let routes = by_kind(&c.objects, "HTTPRoute");
    let names: Vec<&str> = routes
        .iter()
        .map(|r| r["metadata"]["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["wildcard", "wildcard-2"]);
    let mut sections = Vec::new();
    for r in &routes {
        let parents = r["spec"]["parentRefs"].as_array().expect("parentRefs");
        assert!(parents.len() <= 32, "{}", parents.len());
        sections.extend(parents.iter().map(|p| p["sectionName"].clone()));
        assert_eq!(r["spec"]["rules"], routes[0]["spec"]["rules"]);
        assert_eq!(r["spec"]["hostnames"], json!(["*.many.example.com"]));
    }
    // Listener http and the 40 HTTPS listeners, each once.
    assert_eq!(sections.len(), 41);
    sections.sort_by_key(ToString::to_string);
    sections.dedup();
    assert_eq!(sections.len(), 41);
    let policy = by_kind(&c.objects, "TrafficPolicy")[0];
    assert_eq!(policy["spec"]["targetRefs"][1]["name"], json!("wildcard-2"));
    // The corpus reaches the TLS hosts the wildcard covers, over https too.
    let written = admit(&yaml(&c.objects));
    let compared = converted_snapshot(&c.input, &written, DEFAULT_GATEWAY_CLASS);
    let v = verify(&c.input, &compared);
    assert!(v.differences.is_empty(), "{:#?}", &v.differences[..1]);
    assert!(v.problems.is_empty(), "{:#?}", v.problems);
    let ingresses = crate::translate::ingress::prepare(&c.input, &translate_options())
        .expect("prepared")
        .snapshot
        .ingresses;
    let corpus: Vec<String> = verify::corpus(&ingresses)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        corpus
            .iter()
            .any(|r| r == "GET https://t40.many.example.com/api"),
        "{corpus:#?}"
    );
}

fn grpc_fixture() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/convert/grpc.yaml"
    ))
    .expect("fixture")
}

#[test]
fn grpc_ingresses_are_written_as_grpcroutes_that_verify() {
    let c = convert(&admit(&grpc_fixture()), &ConvertOptions::default());
    assert!(by_kind(&c.objects, "HTTPRoute").is_empty());
    let routes = by_kind(&c.objects, "GRPCRoute");
    assert_eq!(routes.len(), 2);
    assert_eq!(
        routes[0]["spec"]["rules"][0]["matches"][0]["method"],
        json!({"type": "Exact", "service": "helloworld.Greeter", "method": "SayHello"})
    );
    assert_eq!(routes[0]["spec"]["rules"][2].get("matches"), None);
    let report = c.report.text();
    assert!(
        report.contains("backend-protocol: converted with a difference: GRPCRoute (HTTP/2"),
        "{report}"
    );
    assert!(
        report.contains("x-forwarded-prefix: converted: GRPCRoute RequestHeaderModifier"),
        "{report}"
    );
    let text = yaml(&c.objects);
    let compared = converted_snapshot(&c.input, &admit(&text), DEFAULT_GATEWAY_CLASS);
    let v = verify(&c.input, &compared);
    assert!(v.differences.is_empty(), "{:#?}", v.differences);
    assert!(v.problems.is_empty(), "{:#?}", v.problems);
    let corpus = verify::corpus(
        &crate::translate::ingress::prepare(&c.input, &translate_options())
            .expect("prepared")
            .snapshot
            .ingresses,
    );
    let call = corpus
        .iter()
        .find(|r| r.to_string() == "POST http://grpc.example.com/helloworld.Greeter/SayHello [content-type: application/grpc]")
        .expect("the call in the corpus");
    // The Ingress and the GRPCRoute both speak HTTP/2 to the backend of that call.
    let table = crate::translate::translate(&compared, &translate_options()).table;
    let d = verify::decide(&table, translate_options().bind_address, call);
    assert_eq!(d.backends, ["rpc/greeter-v2:50051 weight 1 h2c"]);
    // A method changed in the conversion is a difference.
    let planted = text.replace("method: SayHello", "method: SayGoodbye");
    let compared = converted_snapshot(&c.input, &admit(&planted), DEFAULT_GATEWAY_CLASS);
    let v = verify(&c.input, &compared);
    assert_eq!(v.differences.len(), 1, "{:#?}", v.differences);
    assert_eq!(v.differences[0].request, *call);
}

#[test]
fn grpc_ingresses_without_a_grpcroute_form_keep_their_httproutes_and_say_why() {
    let classes = grpc_fixture()
        .split("---\napiVersion: networking.k8s.io/v1\nkind: Ingress")
        .next()
        .expect("classes and services")
        .to_owned();
    let ingress = |name: &str, host: &str, notes: &str, path: &str| {
        format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: rpc\n  annotations:\n{notes}\
             spec:\n  ingressClassName: nginx\n  rules:\n  - host: {host}\n    http: {{paths: [{{path: '{path}', pathType: ImplementationSpecific, backend: {{service: {{name: greeter, port: {{number: 50051}}}}}}}}]}}\n"
        )
    };
    let grpc = "    nginx.ingress.kubernetes.io/backend-protocol: GRPC\n";
    let input = [
        classes,
        ingress(
            "regex",
            "a.test",
            &format!("{grpc}    nginx.ingress.kubernetes.io/use-regex: 'true'\n"),
            "/helloworld.Greeter/.*",
        ),
        ingress(
            "limited",
            "b.test",
            &format!("{grpc}    nginx.ingress.kubernetes.io/whitelist-source-range: 10.0.0.0/8\n"),
            "/",
        ),
        ingress("shared", "c.test", grpc, "/helloworld.Greeter"),
        ingress("web", "c.test", "    x: y\n", "/web"),
        ingress("alone", "d.test", grpc, "/helloworld.Greeter"),
    ]
    .concat();
    let c = convert(&admit(&input), &ConvertOptions::default());
    let kinds: Vec<(String, String)> = c
        .objects
        .iter()
        .filter(|o| o["kind"] == "HTTPRoute" || o["kind"] == "GRPCRoute")
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                o["kind"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    for (name, kind) in [
        ("regex", "HTTPRoute"),
        ("limited", "HTTPRoute"),
        ("shared", "HTTPRoute"),
        ("web", "HTTPRoute"),
        ("alone", "GRPCRoute"),
    ] {
        assert!(
            kinds.contains(&(name.to_owned(), kind.to_owned())),
            "{name}: {kinds:?}"
        );
    }
    let report = c.report.text();
    for why in [
        "(RegularExpression) is not a gRPC service or method): set appProtocol",
        "kept as HTTPRoutes (its TrafficPolicy",
        "kept as HTTPRoutes (host c.test is also served by Ingress rpc/web, written as HTTPRoutes",
    ] {
        assert!(report.contains(why), "{why}\n{report}");
    }
}

#[test]
fn limit_connections_is_written_into_the_traffic_policy_and_reported_converted() {
    let input = INPUT.replace(
        "    nginx.ingress.kubernetes.io/proxy-body-size: 2m\n",
        "    nginx.ingress.kubernetes.io/proxy-body-size: 2m\n    \
         nginx.ingress.kubernetes.io/limit-connections: \"4\"\n",
    );
    let c = convert(&admit(&input), &ConvertOptions::default());
    let policies = by_kind(&c.objects, "TrafficPolicy");
    assert_eq!(policies.len(), 1);
    assert_eq!(policies[0]["spec"]["concurrencyLimit"]["perClient"], 4);
    assert_eq!(
        policies[0]["spec"]["bodyLimits"]["maxRequestBytes"],
        2 << 20
    );
    let report = c.report.text();
    assert!(
        report.contains("limit-connections: converted: TrafficPolicy concurrencyLimit.perClient"),
        "{report}"
    );
}

#[test]
fn a_canary_of_another_namespace_gets_one_grant_per_route_namespace() {
    let classes = INPUT
        .split("---\napiVersion: networking.k8s.io/v1\nkind: Ingress")
        .next()
        .expect("classes");
    let ingress = |ns: &str, name: &str, host: &str, svc: &str, canary: bool| {
        let notes = if canary {
            "  annotations: {nginx.ingress.kubernetes.io/canary: 'true', nginx.ingress.kubernetes.io/canary-weight: '100'}\n"
        } else {
            ""
        };
        format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: {ns}\n{notes}\
             spec:\n  ingressClassName: nginx\n  rules:\n  - host: {host}\n    http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: {svc}, port: {{number: 80}}}}}}}}]}}\n"
        )
    };
    let mut text = format!(
        "{classes}---\napiVersion: v1\nkind: Service\nmetadata: {{name: next, namespace: canaries}}\nspec: {{ports: [{{port: 80}}]}}\n"
    );
    // One canary Ingress with two hosts whose main Ingresses are both in `shop`.
    text.push_str(&ingress("shop", "a", "a.test", "web", false));
    text.push_str(&ingress("shop", "b", "b.test", "web", false));
    text.push_str(
        &ingress("canaries", "next", "a.test", "next", true)
            .replace("  rules:\n", "  rules:\n  - host: b.test\n    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: next, port: {number: 80}}}}]}\n"),
    );
    let c = convert(&admit(&text), &ConvertOptions::default());
    let grants: Vec<&Value> = c
        .objects
        .iter()
        .filter(|o| o["kind"] == "ReferenceGrant")
        .collect();
    assert_eq!(grants.len(), 1, "{grants:#?}");
    assert_eq!(grants[0]["metadata"]["name"], "next-canary-from-shop");
    assert_eq!(grants[0]["metadata"]["namespace"], "canaries");
    assert_eq!(
        grants[0]["spec"],
        json!({"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "shop"}],
               "to": [{"group": "", "kind": "Service", "name": "next"}]})
    );
    let report = c.report.text();
    assert!(
        report.contains(
            "Ingress canaries/next: written as ReferenceGrant canaries/next-canary-from-shop\n"
        ),
        "{report}"
    );
    // Served the same: every request reaches `next` in both translations.
    let written = admit(&yaml(&c.objects));
    let compared = converted_snapshot(&c.input, &written, DEFAULT_GATEWAY_CLASS);
    let v = verify(&c.input, &compared);
    assert!(v.differences.is_empty(), "{:#?}", &v.differences[..1]);
    // Without the grant, the conversion's routes could not reach the canary's Service.
    let without: Vec<Value> = c
        .objects
        .iter()
        .filter(|o| o["kind"] != "ReferenceGrant")
        .cloned()
        .collect();
    let compared = converted_snapshot(&c.input, &admit(&yaml(&without)), DEFAULT_GATEWAY_CLASS);
    assert!(!verify(&c.input, &compared).differences.is_empty());
}
