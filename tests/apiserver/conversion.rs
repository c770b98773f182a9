//! Custom resources at a version other than the storage one: the emulator calls the CRD's
//! conversion webhook over HTTPS (certificate checked against `caBundle`) for reads, lists,
//! watches and every kind of write, and answers a failed conversion with 500 as the API server
//! does. The webhook here is a small one of the test's own: `spec.legacy` (v1alpha1) is
//! `spec.current` (v1beta1), and objects labelled `fail` cannot be converted.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::watcher;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};

use crate::support::apiserver::ApiServer;
use crate::support::net::bind_loopback;
use crate::support::tls::TestCa;

/// Converts `spec.legacy` <-> `spec.current`; fails for objects labelled `fail`.
fn convert_object(mut obj: Value, desired: &str) -> Result<Value, String> {
    if obj["metadata"]["labels"]["fail"].is_string() {
        return Err(format!("cannot convert {}", obj["metadata"]["name"]));
    }
    let spec = obj["spec"].as_object_mut().ok_or("no spec")?;
    let (from, to) = if desired.ends_with("v1beta1") {
        ("legacy", "current")
    } else {
        ("current", "legacy")
    };
    if let Some(v) = spec.remove(from) {
        spec.insert(to.to_string(), v);
    }
    obj["apiVersion"] = json!(desired);
    Ok(obj)
}

fn review_answer(review: &Value) -> Value {
    let req = &review["request"];
    let desired = req["desiredAPIVersion"].as_str().unwrap_or("");
    let converted: Result<Vec<Value>, String> = req["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| convert_object(o.clone(), desired))
        .collect();
    let response = match converted {
        Ok(objects) => json!({"uid": req["uid"], "convertedObjects": objects,
            "result": {"status": "Success"}}),
        Err(message) => json!({"uid": req["uid"], "convertedObjects": [],
            "result": {"status": "Failure", "message": message}}),
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": response})
}

/// Serves the converter over TLS with `cert`/`key` on a loopback port.
async fn start_webhook(cert_pem: &str, key_pem: &str) -> SocketAddr {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(|req: hyper::Request<_>| async move {
                    let body: Bytes = BodyExt::collect(req.into_body()).await?.to_bytes();
                    let review: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let answer = review_answer(&review).to_string();
                    Ok::<_, hyper::Error>(hyper::Response::new(Full::new(Bytes::from(answer))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

fn crd(ca_pem: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "trafficpolicies.edgeplane.dev"},
        "spec": {"group": "edgeplane.dev", "scope": "Namespaced",
            "names": {"plural": "trafficpolicies", "kind": "TrafficPolicy"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false},
                {"name": "v1beta1", "served": true, "storage": true}],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": {"namespace": "sys", "name": "hook", "path": "/convert", "port": 443},
                    "caBundle": k8s_openapi::ByteString(ca_pem.as_bytes().to_vec())}}}}})
}

fn api_at(api: &ApiServer, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("edgeplane.dev", version, "TrafficPolicy");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "trafficpolicies");
    Api::namespaced_with(api.client(), "web", &ar)
}

fn policy(name: &str, legacy: &str) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": "edgeplane.dev/v1alpha1", "kind": "TrafficPolicy",
        "metadata": {"name": name, "namespace": "web"},
        "spec": {"targetRefs": [], "legacy": legacy}}),
    )
    .unwrap()
}

async fn with_webhook() -> (ApiServer, TestCa) {
    let api = ApiServer::start().await;
    let ca = TestCa::new("webhook-ca");
    let (cert, key) = ca.issue_pem(&["hook.sys.svc"], &[]);
    let addr = start_webhook(&cert, &key).await;
    api.set_service_address("sys", "hook", addr);
    api.insert(crd(&ca.cert_pem));
    (api, ca)
}

#[tokio::test]
async fn non_storage_versions_go_through_the_webhook_for_every_verb() {
    let (api, _ca) = with_webhook().await;
    let alpha = api_at(&api, "v1alpha1");
    let beta = api_at(&api, "v1beta1");
    let created = alpha
        .create(&PostParams::default(), &policy("p", "one"))
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["legacy"], "one");
    assert_eq!(
        created.types.as_ref().unwrap().api_version,
        "edgeplane.dev/v1alpha1"
    );
    let stored = api
        .object("trafficpolicies.edgeplane.dev", "web", "p")
        .unwrap();
    assert_eq!(stored["apiVersion"], "edgeplane.dev/v1beta1");
    assert_eq!(stored["spec"]["current"], "one");
    assert!(stored["spec"].get("legacy").is_none(), "{stored}");
    assert!(api.conversions() >= 2, "create converts in and out");

    // Reads at either version.
    assert_eq!(alpha.get("p").await.unwrap().data["spec"]["legacy"], "one");
    assert_eq!(beta.get("p").await.unwrap().data["spec"]["current"], "one");
    let listed = alpha.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data["spec"]["legacy"], "one");

    // A watch at v1alpha1 sees converted objects, initial and later ones.
    let mut events = watcher(alpha.clone(), watcher::Config::default()).boxed();
    let mut seen = Vec::new();
    let patch = json!({"spec": {"legacy": "two"}});
    for _ in 0..20 {
        let Ok(Some(Ok(event))) =
            tokio::time::timeout(std::time::Duration::from_secs(5), events.next()).await
        else {
            break;
        };
        match event {
            watcher::Event::InitDone => {
                alpha
                    .patch("p", &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .unwrap();
            }
            watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                seen.push(o.data["spec"]["legacy"].clone());
                if o.data["spec"]["legacy"] == "two" {
                    break;
                }
            }
            _ => {}
        }
    }
    assert_eq!(seen, [json!("one"), json!("two")]);
    let stored = api
        .object("trafficpolicies.edgeplane.dev", "web", "p")
        .unwrap();
    assert_eq!(stored["spec"]["current"], "two");
    assert_eq!(stored["metadata"]["generation"], 2);

    // Replace and status writes at v1alpha1.
    let mut obj = alpha.get("p").await.unwrap();
    obj.data["spec"]["legacy"] = json!("three");
    let replaced = alpha
        .replace("p", &PostParams::default(), &obj)
        .await
        .unwrap();
    assert_eq!(replaced.data["spec"]["legacy"], "three");
    let status = json!({"status": {"ancestors": [{"controllerName": "x/y"}]}});
    alpha
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let stored = api
        .object("trafficpolicies.edgeplane.dev", "web", "p")
        .unwrap();
    assert_eq!(stored["spec"]["current"], "three");
    assert_eq!(stored["status"]["ancestors"][0]["controllerName"], "x/y");
    alpha.delete("p", &Default::default()).await.unwrap();
    assert!(api
        .object("trafficpolicies.edgeplane.dev", "web", "p")
        .is_none());
}

#[tokio::test]
async fn failed_conversions_answer_500_with_the_webhook_message() {
    let (api, _ca) = with_webhook().await;
    let alpha = api_at(&api, "v1alpha1");
    let beta = api_at(&api, "v1beta1");
    let mut bad = policy("bad", "x");
    bad.metadata.labels = Some([("fail".to_string(), "yes".to_string())].into());
    let err = alpha
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err:?}")
    };
    assert_eq!(status.code, 500);
    assert!(
        status.message.contains("conversion webhook for edgeplane.dev/v1alpha1, Kind=TrafficPolicy failed: cannot convert \"bad\""),
        "{}",
        status.message
    );
    assert!(api
        .object("trafficpolicies.edgeplane.dev", "web", "bad")
        .is_none());

    // A caBundle that does not match the webhook's certificate: reads at v1alpha1 fail, reads
    // at the storage version need no conversion.
    alpha
        .create(&PostParams::default(), &policy("p", "one"))
        .await
        .unwrap();
    let other = TestCa::new("someone-else");
    api.insert(crd(&other.cert_pem));
    let err = alpha.get("p").await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 500 && s.message.contains("conversion webhook")),
        "{err:?}"
    );
    assert_eq!(beta.get("p").await.unwrap().data["spec"]["current"], "one");
}
