//! ingress-nginx canaries through `serve --config-dir`: a canary Ingress folded into the main
//! Ingress of its host and path, by weight (0 and 100 exactly, 50 over 400 requests within a
//! bound that cannot flake), by header (`always`/`never`, an exact value that otherwise falls
//! through) and by cookie, the header deciding before the cookie; a canary of another
//! namespace than its main Ingress's, reaching the Service of its own namespace.

use std::time::{Duration, Instant};

use http::Method;

use crate::standalone::{serve, service, Server};
use crate::support::client::{full, h1_client, request, send, TestClient};
use crate::support::echo::start_fleet;

const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
    metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}\n";

/// An Ingress of class `edge`: `host` `/` to Service `svc`.
fn ingress(name: &str, host: &str, svc: &str, notes: &[(&str, &str)]) -> String {
    let notes: String = notes
        .iter()
        .map(|(k, v)| format!("    nginx.ingress.kubernetes.io/{k}: {v:?}\n"))
        .collect();
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  annotations:\n{notes}    x: y\n\
         spec:\n  ingressClassName: edge\n  rules:\n  - host: {host}\n    http:\n      paths:\n\
         \x20     - {{path: /, pathType: Prefix, backend: {{service: {{name: {svc}, port: {{number: 80}}}}}}}}\n"
    )
}

/// A main Ingress for `host` and its canary with `notes`.
fn pair(host: &str, notes: &[(&str, &str)]) -> String {
    let mut all = vec![("canary", "true")];
    all.extend_from_slice(notes);
    format!(
        "{}{}",
        ingress(&format!("{host}-main"), host, "stable", &[]),
        ingress(&format!("{host}-canary"), host, "canary", &all)
    )
}

/// The pod answering `host` with the request `headers`.
async fn pod(client: &TestClient, server: &Server, host: &str, headers: &[(&str, &str)]) -> String {
    let mut req = request(Method::GET, server.http(), host, "/");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = send(client, req.body(full(&b""[..])).expect("request"))
        .await
        .expect("request through edgeplane");
    r.pod().unwrap_or_else(|| r.status.as_u16().to_string())
}

#[tokio::test]
async fn canaries_split_by_weight_header_and_cookie() {
    let fleet = start_fleet(&["stable", "canary"]).await;
    let mut text = format!(
        "{CLASS}{}{}",
        service("stable", &fleet[0]),
        service("canary", &fleet[1])
    );
    text.push_str(&pair("w0.test", &[("canary-weight", "0")]));
    text.push_str(&pair("w100.test", &[("canary-weight", "100")]));
    text.push_str(&pair("half.test", &[("canary-weight", "50")]));
    text.push_str(&pair(
        "hdr.test",
        &[
            ("canary-by-header", "x-canary"),
            ("canary-by-cookie", "beta"),
        ],
    ));
    text.push_str(&pair(
        "val.test",
        &[
            ("canary-by-header", "x-env"),
            ("canary-by-header-value", "blue"),
            ("canary-by-cookie", "beta"),
        ],
    ));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while pod(&client, &server, "val.test", &[]).await != "stable" {
        assert!(Instant::now() < deadline, "the Ingresses were never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let at = |host: &'static str, headers: &'static [(&'static str, &'static str)]| {
        pod(&client, &server, host, headers)
    };

    for _ in 0..20 {
        assert_eq!(at("w0.test", &[]).await, "stable");
        assert_eq!(at("w100.test", &[]).await, "canary");
    }
    let mut to_canary = 0;
    for _ in 0..400 {
        match at("half.test", &[]).await.as_str() {
            "canary" => to_canary += 1,
            "stable" => {}
            other => panic!("answered by {other}"),
        }
    }
    // 50%: 200 expected, standard deviation 10; 100..=300 is ten of them either side.
    assert!((100..=300).contains(&to_canary), "{to_canary} of 400");

    // Header always / never, then the cookie; the header decides first.
    assert_eq!(at("hdr.test", &[]).await, "stable");
    assert_eq!(at("hdr.test", &[("x-canary", "always")]).await, "canary");
    assert_eq!(at("hdr.test", &[("x-canary", "never")]).await, "stable");
    assert_eq!(
        at("hdr.test", &[("cookie", "a=1; beta=always")]).await,
        "canary"
    );
    assert_eq!(at("hdr.test", &[("cookie", "beta=never")]).await, "stable");
    assert_eq!(
        at(
            "hdr.test",
            &[("x-canary", "never"), ("cookie", "beta=always")]
        )
        .await,
        "stable"
    );
    assert_eq!(
        at(
            "hdr.test",
            &[("x-canary", "always"), ("cookie", "beta=never")]
        )
        .await,
        "canary"
    );
    // An unknown header value falls through to the cookie.
    assert_eq!(
        at(
            "hdr.test",
            &[("x-canary", "maybe"), ("cookie", "beta=always")]
        )
        .await,
        "canary"
    );
    // With a header value: that value, else the cookie; `always` is just another value.
    assert_eq!(at("val.test", &[("x-env", "blue")]).await, "canary");
    assert_eq!(at("val.test", &[("x-env", "always")]).await, "stable");
    assert_eq!(
        at("val.test", &[("x-env", "green"), ("cookie", "beta=always")]).await,
        "canary"
    );
}

/// `text` with every object of its `metadata: {name: ...}` / `metadata:\n  name:` forms put
/// in namespace `ns`.
fn in_namespace(ns: &str, text: &str) -> String {
    text.replace(
        "metadata: {name: ",
        &format!("metadata: {{namespace: {ns}, name: "),
    )
    .replace(
        "metadata:\n  name: ",
        &format!("metadata:\n  namespace: {ns}\n  name: "),
    )
}

#[tokio::test]
async fn a_canary_of_another_namespace_reaches_its_own_service() {
    // `decoy` answers for a Service `canary` of the main Ingress's namespace: a canary
    // resolved in the wrong namespace would reach it.
    let fleet = start_fleet(&["stable", "canary", "decoy"]).await;
    let mut text = CLASS.to_owned();
    text.push_str(&in_namespace("shop", &service("stable", &fleet[0])));
    text.push_str(&in_namespace("canaries", &service("canary", &fleet[1])));
    text.push_str(&in_namespace("shop", &service("canary", &fleet[2])));
    for (host, notes) in [
        ("x0.test", &[("canary-weight", "0")][..]),
        ("x100.test", &[("canary-weight", "100")][..]),
        ("xh.test", &[("canary-by-header", "x-canary")][..]),
    ] {
        let mut all = vec![("canary", "true")];
        all.extend_from_slice(notes);
        let main = ingress(&format!("{host}-main"), host, "stable", &[]);
        let canary = ingress(&format!("{host}-canary"), host, "canary", &all);
        text.push_str(&in_namespace("shop", &main));
        text.push_str(&in_namespace("canaries", &canary));
    }
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("all.yaml"), text).expect("write manifests");
    let client = h1_client();
    let server = serve(dir.path(), &client).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while pod(&client, &server, "x0.test", &[]).await != "stable" {
        assert!(Instant::now() < deadline, "the Ingresses were never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for _ in 0..20 {
        assert_eq!(pod(&client, &server, "x0.test", &[]).await, "stable");
        assert_eq!(pod(&client, &server, "x100.test", &[]).await, "canary");
    }
    let header = |v: &'static str| [("x-canary", v)];
    assert_eq!(pod(&client, &server, "xh.test", &[]).await, "stable");
    assert_eq!(
        pod(&client, &server, "xh.test", &header("always")).await,
        "canary"
    );
    assert_eq!(
        pod(&client, &server, "xh.test", &header("never")).await,
        "stable"
    );
}
