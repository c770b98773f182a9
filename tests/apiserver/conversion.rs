//! Custom resources at a version other than the storage one: the emulator calls the CRD's
//! conversion webhook over HTTPS (certificate checked against `caBundle`) for reads, lists,
//! watches and every kind of write, and answers a failed conversion with 500 as the API server
//! does. The webhook is the product's server and converter: v1alpha1 has one `targetRef` and
//! flat settings (`requestTimeout`), v1beta1 a `targetRefs` list and groups (`timeouts`).

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::watcher;
use serde_json::{json, Value};

use crate::support::apiserver::ApiServer;
use crate::support::net::bind_loopback;
use crate::support::tls::TestCa;

/// The product's webhook server with `cert`/`key` on a loopback port.
async fn start_webhook(cert_pem: &str, key_pem: &str) -> SocketAddr {
    let certs = Arc::new(edgeplane::webhook::WebhookCerts::from_pem(cert_pem, key_pem).unwrap());
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    tokio::spawn(edgeplane::webhook::serve(
        listener,
        certs,
        std::future::pending(),
    ));
    addr
}

fn crd(ca_pem: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "trafficpolicies.edgeplane.dev"},
        "spec": {"group": "edgeplane.dev", "scope": "Namespaced",
            "names": {"plural": "trafficpolicies", "kind": "TrafficPolicy"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false,
                    "subresources": {"status": {}}},
                {"name": "v1beta1", "served": true, "storage": true,
                    "subresources": {"status": {}}}],
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

fn policy(name: &str, timeout: &str) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": "edgeplane.dev/v1alpha1", "kind": "TrafficPolicy",
        "metadata": {"name": name, "namespace": "web"},
        "spec": {"targetRef": {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
            "name": "r"}, "requestTimeout": timeout}}),
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
        .create(&PostParams::default(), &policy("p", "1s"))
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["requestTimeout"], "1s");
    assert_eq!(
        created.types.as_ref().unwrap().api_version,
        "edgeplane.dev/v1alpha1"
    );
    let stored = api
        .object("trafficpolicies.edgeplane.dev", "web", "p")
        .unwrap();
    assert_eq!(stored["apiVersion"], "edgeplane.dev/v1beta1");
    assert_eq!(stored["spec"]["timeouts"]["request"], "1s");
    assert!(stored["spec"].get("requestTimeout").is_none(), "{stored}");
    assert!(api.conversions() >= 2, "create converts in and out");

    // Reads at either version.
    assert_eq!(
        alpha.get("p").await.unwrap().data["spec"]["requestTimeout"],
        "1s"
    );
    assert_eq!(
        beta.get("p").await.unwrap().data["spec"]["timeouts"]["request"],
        "1s"
    );
    let listed = alpha.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data["spec"]["requestTimeout"], "1s");

    // A watch at v1alpha1 sees converted objects, initial and later ones.
    let mut events = watcher(alpha.clone(), watcher::Config::default()).boxed();
    let mut seen = Vec::new();
    let patch = json!({"spec": {"requestTimeout": "2s"}});
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
                seen.push(o.data["spec"]["requestTimeout"].clone());
                if o.data["spec"]["requestTimeout"] == "2s" {
                    break;
                }
            }
            _ => {}
        }
    }
    assert_eq!(seen, [json!("1s"), json!("2s")]);
    let stored = api
        .object("trafficpolicies.edgeplane.dev", "web", "p")
        .unwrap();
    assert_eq!(stored["spec"]["timeouts"]["request"], "2s");
    assert_eq!(stored["metadata"]["generation"], 2);

    // Replace and status writes at v1alpha1.
    let mut obj = alpha.get("p").await.unwrap();
    obj.data["spec"]["requestTimeout"] = json!("3s");
    let replaced = alpha
        .replace("p", &PostParams::default(), &obj)
        .await
        .unwrap();
    assert_eq!(replaced.data["spec"]["requestTimeout"], "3s");
    let status = json!({"status": {"ancestors": [{"ancestorRef": {"name": "gw"},
        "controllerName": "x/y", "conditions": []}]}});
    alpha
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let stored = api
        .object("trafficpolicies.edgeplane.dev", "web", "p")
        .unwrap();
    assert_eq!(stored["spec"]["timeouts"]["request"], "3s");
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
    // Not a valid v1alpha1 TrafficPolicy (no targetRef): the product's converter refuses it.
    let mut bad = policy("bad", "1s");
    bad.data["spec"]
        .as_object_mut()
        .unwrap()
        .remove("targetRef");
    let err = alpha
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err:?}")
    };
    assert_eq!(status.code, 500);
    assert!(
        status
            .message
            .contains("conversion webhook for edgeplane.dev/v1alpha1, Kind=TrafficPolicy failed: ")
            && status.message.contains("targetRef"),
        "{}",
        status.message
    );
    assert!(api
        .object("trafficpolicies.edgeplane.dev", "web", "bad")
        .is_none());

    // A caBundle that does not match the webhook's certificate: reads at v1alpha1 fail, reads
    // at the storage version need no conversion.
    alpha
        .create(&PostParams::default(), &policy("p", "1s"))
        .await
        .unwrap();
    let other = TestCa::new("someone-else");
    api.insert(crd(&other.cert_pem));
    let err = alpha.get("p").await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 500 && s.message.contains("conversion webhook")),
        "{err:?}"
    );
    assert_eq!(
        beta.get("p").await.unwrap().data["spec"]["timeouts"]["request"],
        "1s"
    );
}
