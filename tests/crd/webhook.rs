//! The conversion webhook over real HTTPS on 127.0.0.1 with rcgen certificates: reviews
//! answered, certificates swapped under a running server, bad requests refused with a reason.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use edgeplane::webhook::{serve, WebhookCerts};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::support::client::REQUEST_TIMEOUT;
use crate::support::tls::{client_config, connect, peer_leaf, self_signed, TestCert};

/// A running webhook; dropping it shuts the server down.
struct Running {
    addr: SocketAddr,
    certs: Arc<WebhookCerts>,
    _stop: oneshot::Sender<()>,
}

async fn start(cert: &TestCert) -> Running {
    let certs = Arc::new(WebhookCerts::from_pem(&cert.cert_pem, &cert.key_pem).expect("cert"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(listener, certs.clone(), async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        certs,
        _stop: stop,
    }
}

/// Sends one request over a new TLS connection trusting `trust`; returns status and body.
async fn call(
    addr: SocketAddr,
    trust: &TestCert,
    method: Method,
    path: &str,
    body: Vec<u8>,
) -> (StatusCode, Bytes) {
    let stream = connect(
        addr,
        "edgeplane-webhook.edgeplane-system.svc",
        client_config(&[trust], &[b"http/1.1"]),
    )
    .await
    .expect("TLS handshake");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP handshake");
    tokio::spawn(conn);
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "edgeplane-webhook.edgeplane-system.svc")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("request");
    let fut = async {
        let resp = sender.send_request(req).await.expect("response");
        let status = resp.status();
        (
            status,
            resp.into_body().collect().await.expect("body").to_bytes(),
        )
    };
    tokio::time::timeout(REQUEST_TIMEOUT, fut)
        .await
        .expect("in time")
}

fn review(desired: &str, objects: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "desiredAPIVersion": desired, "objects": objects},
    }))
    .expect("json")
}

fn names() -> Vec<&'static str> {
    vec!["edgeplane-webhook.edgeplane-system.svc"]
}

#[tokio::test]
async fn answers_a_review_over_https() {
    let cert = self_signed(&names());
    let hook = start(&cert).await;
    let object = json!({
        "apiVersion": "edgeplane.dev/v1beta1", "kind": "ProxyConfig",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"drainDuration": "30s"},
    });
    let (status, body) = call(
        hook.addr,
        &cert,
        Method::POST,
        "/convert?timeout=30s",
        review("edgeplane.dev/v1beta1", vec![object.clone()]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body:?}");
    let answer: Value = serde_json::from_slice(&body).expect("json answer");
    assert_eq!(answer["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(answer["kind"], "ConversionReview");
    assert_eq!(
        answer["response"]["uid"],
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    );
    assert_eq!(answer["response"]["result"]["status"], "Success");
    assert_eq!(answer["response"]["convertedObjects"], json!([object]));

    // Both directions, several objects in one review, order kept.
    let alpha = json!({
        "apiVersion": "edgeplane.dev/v1alpha1", "kind": "TrafficPolicy",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"targetRef": {"group": "", "kind": "Service", "name": "svc"}, "maxConnections": 5},
    });
    let (status, body) = call(
        hook.addr,
        &cert,
        Method::POST,
        "/convert",
        review("edgeplane.dev/v1beta1", vec![alpha.clone(), object.clone()]),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let answer: Value = serde_json::from_slice(&body).expect("json answer");
    assert_eq!(answer["response"]["result"]["status"], "Success");
    let beta = answer["response"]["convertedObjects"][0].clone();
    assert_eq!(beta["apiVersion"], "edgeplane.dev/v1beta1");
    assert_eq!(
        beta["spec"],
        json!({"targetRefs": [{"group": "", "kind": "Service", "name": "svc"}], "circuitBreaker": {"maxConnections": 5}})
    );
    assert_eq!(answer["response"]["convertedObjects"][1], object);
    let (_, body) = call(
        hook.addr,
        &cert,
        Method::POST,
        "/convert",
        review("edgeplane.dev/v1alpha1", vec![beta]),
    )
    .await;
    let answer: Value = serde_json::from_slice(&body).expect("json answer");
    assert_eq!(answer["response"]["convertedObjects"], json!([alpha]));

    let (status, body) = call(
        hook.addr,
        &cert,
        Method::POST,
        "/convert",
        review("other.dev/v1", vec![object]),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let answer: Value = serde_json::from_slice(&body).expect("json answer");
    assert_eq!(answer["response"]["result"]["status"], "Failure");
    let message = answer["response"]["result"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("other.dev/v1"), "{message}");
}

#[tokio::test]
async fn a_new_certificate_is_seen_by_new_connections() {
    let first = self_signed(&names());
    let hook = start(&first).await;
    let sni = "edgeplane-webhook.edgeplane-system.svc";
    let old = connect(hook.addr, sni, client_config(&[&first], &[b"http/1.1"]))
        .await
        .expect("handshake with the first certificate");
    assert_eq!(peer_leaf(&old), Some(first.der.clone()));

    let second = self_signed(&names());
    hook.certs
        .set_pem(&second.cert_pem, &second.key_pem)
        .expect("second certificate");
    let new = connect(hook.addr, sni, client_config(&[&second], &[b"http/1.1"]))
        .await
        .expect("handshake with the second certificate");
    assert_eq!(peer_leaf(&new), Some(second.der.clone()));
    assert!(
        connect(hook.addr, sni, client_config(&[&first], &[b"http/1.1"]))
            .await
            .is_err(),
        "a client trusting only the replaced certificate must fail"
    );
    let (status, _) = call(
        hook.addr,
        &second,
        Method::POST,
        "/convert",
        review("edgeplane.dev/v1beta1", vec![]),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // Garbage leaves the current certificate in place.
    assert!(hook.certs.set_pem("not pem", "not pem").is_err());
    let again = connect(hook.addr, sni, client_config(&[&second], &[b"http/1.1"]))
        .await
        .expect("handshake after a refused swap");
    assert_eq!(peer_leaf(&again), Some(second.der.clone()));
}

#[tokio::test]
async fn bad_requests_are_refused_with_a_reason() {
    let cert = self_signed(&names());
    let hook = start(&cert).await;
    let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();

    let (status, body) = call(
        hook.addr,
        &cert,
        Method::POST,
        "/convert",
        b"{not json".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        text(&body).contains("not a ConversionReview"),
        "{}",
        text(&body)
    );

    let no_request = serde_json::to_vec(
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}),
    )
    .expect("json");
    let (status, body) = call(hook.addr, &cert, Method::POST, "/convert", no_request).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text(&body).contains("no request"), "{}", text(&body));

    let v1beta1 = serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview", "request": {"uid": "u", "desiredAPIVersion": "edgeplane.dev/v1beta1", "objects": []}})).expect("json");
    let (status, body) = call(hook.addr, &cert, Method::POST, "/convert", v1beta1).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text(&body).contains("v1beta1"), "{}", text(&body));

    let (status, body) = call(hook.addr, &cert, Method::GET, "/convert", vec![]).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(text(&body).contains("POST"), "{}", text(&body));

    let (status, body) = call(hook.addr, &cert, Method::POST, "/validate", vec![]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(text(&body).contains("/convert"), "{}", text(&body));

    let big = vec![b' '; edgeplane::webhook::MAX_BODY_BYTES + 1];
    let (status, _) = call(hook.addr, &cert, Method::POST, "/convert", big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}
