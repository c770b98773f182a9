//! edgeplane's own kinds in Kubernetes mode through the API emulator: the conversion webhook
//! (the product's server, its certificate issued and rotated by the leader in a Secret and
//! published in the CRDs' `caBundle`), ProxyConfig settings of the Gateway Service, and a
//! cluster without the CRDs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgeplane::provider::kube::webhook_cert::Rotation;
use edgeplane::provider::kube::{KubeOptions, WebhookCertOptions};
use edgeplane::webhook::WebhookCerts;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};

use crate::harness::*;
use crate::support::apiserver::ApiServer;
use crate::support::echo::start_fleet;
use crate::support::net::{bind_loopback, loopback_ip};
use crate::T;

const WEBHOOK_SERVICE: &str = "edgeplane-webhook";
const SECRET: &str = "edgeplane-webhook-cert";
const HOST: &str = "edgeplane-webhook.edgeplane-system.svc";

/// The CRDs `edgeplane crds` generates (conversion through the webhook Service, `caBundle`
/// empty), as `kubectl apply` would leave them.
fn install_crds(api: &ApiServer) {
    for crd in edgeplane::kinds::crd::generate::crd_values().expect("CRDs generate") {
        api.insert(crd);
    }
}

/// The product's webhook server on a loopback port, reachable as the webhook Service.
async fn start_webhook(api: &ApiServer) -> (Arc<WebhookCerts>, SocketAddr) {
    let certs = Arc::new(WebhookCerts::new());
    let listener = bind_loopback().await;
    let addr = listener.local_addr().unwrap();
    let served = certs.clone();
    tokio::spawn(edgeplane::webhook::serve(
        listener,
        served,
        std::future::pending(),
    ));
    api.set_service_address(SYSTEM_NS, WEBHOOK_SERVICE, addr);
    (certs, addr)
}

/// Replica options with the webhook's certificate kept in [`SECRET`].
fn with_webhook(name: &str, certs: &Arc<WebhookCerts>, rotation: Option<Rotation>) -> KubeOptions {
    let mut o = options(name, port_base());
    let mut w = WebhookCertOptions::new(SYSTEM_NS, (SYSTEM_NS, WEBHOOK_SERVICE));
    if let Some(r) = rotation {
        w.rotation = r;
    }
    w.retry = Duration::from_millis(200);
    o.webhook = Some((w, certs.clone()));
    o
}

/// The `caBundle` of a CRD, decoded.
fn ca_bundle(api: &ApiServer, crd: &str) -> Option<String> {
    let b = api.object("customresourcedefinitions", "", crd)?["spec"]["conversion"]["webhook"]
        ["clientConfig"]["caBundle"]
        .clone();
    let bytes: k8s_openapi::ByteString = serde_json::from_value(b).ok()?;
    String::from_utf8(bytes.0).ok()
}

/// A data field of the webhook Secret, decoded.
fn secret_field(api: &ApiServer, key: &str) -> Option<String> {
    let v = api.object("secrets", SYSTEM_NS, SECRET)?["data"][key].clone();
    let bytes: k8s_openapi::ByteString = serde_json::from_value(v).ok()?;
    String::from_utf8(bytes.0).ok()
}

/// An empty ConversionReview POSTed to the webhook as the API server would send it, trusting
/// only `bundle`; the certificate the server presented and the status of the answer.
async fn call_webhook(addr: SocketAddr, bundle: &str) -> Result<(Vec<u8>, u16), String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(HOST).unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let leaf = tls
        .get_ref()
        .1
        .peer_certificates()
        .ok_or("no peer certificate")?[0]
        .to_vec();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "u-1", "desiredAPIVersion": "edgeplane.dev/v1beta1", "objects": []}});
    let req = hyper::Request::post("/convert")
        .header("host", HOST)
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from(review.to_string())))
        .unwrap();
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    Ok((leaf, status))
}

fn der_of(pem: &str) -> Vec<u8> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .expect("a certificate")
        .expect("PEM")
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ca_bundle_is_published_and_follows_certificate_rotation() {
    let api = ApiServer::start().await;
    install_crds(&api);
    seed(&api, &[], &[]);
    let (certs, addr) = start_webhook(&api).await;
    // Certificates live 6 s and are renewed 4 s before expiry (served 1 s after staging).
    let rotation = Rotation {
        validity: Duration::from_secs(6),
        renew_before: Duration::from_secs(4),
    };
    let replica = Replica::start_with(
        &api,
        with_webhook("one", &certs, Some(rotation)),
        loopback_ip(),
    )
    .await;
    let crds = [
        "proxyconfigs.edgeplane.dev",
        "trafficpolicies.edgeplane.dev",
    ];
    let published = api
        .wait_until(T, |a| {
            let ca = secret_field(a, "ca.crt");
            ca.is_some() && crds.iter().all(|c| ca_bundle(a, c) == ca)
        })
        .await;
    assert!(
        published,
        "caBundle never published: {:?}",
        api.object("secrets", SYSTEM_NS, SECRET)
    );

    // Through several rotations: when a new certificate is staged, the CRDs trust the old and
    // the new CA; once it is served, the webhook presents it to a client trusting the bundle.
    let mut served = Vec::new();
    let mut saw_two_cas = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    while served.len() < 3 && Instant::now() < deadline {
        let bundle = ca_bundle(&api, crds[1]).unwrap_or_default();
        saw_two_cas |= bundle.matches("BEGIN CERTIFICATE").count() == 2
            && secret_field(&api, "next.crt").is_some();
        if let (Some(cert), Ok((leaf, status))) = (
            secret_field(&api, "tls.crt"),
            call_webhook(addr, &bundle).await,
        ) {
            assert_eq!(status, 200);
            if leaf == der_of(&cert) && served.last() != Some(&leaf) {
                served.push(leaf);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served.len() >= 3, "certificates served: {}", served.len());
    assert!(
        saw_two_cas,
        "no rotation overlap with both CAs in the bundle"
    );
    // Every client request above trusted only the CRD's bundle; the API server does too.
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_service_type_and_annotations_come_from_the_proxy_config() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &[], &[("svc-a", echoes[0].addr)]);
    api.insert(
        json!({"apiVersion": "edgeplane.dev/v1beta1", "kind": "ProxyConfig",
        "metadata": {"namespace": "web", "name": "edge"},
        "spec": {"service": {"type": "NodePort",
            "annotations": {"lb.example.com/scheme": "internal", "keep": "1"}}}}),
    );
    let mut gw = gateway("web", "gw", "ep", 80);
    gw["spec"]["infrastructure"] = json!({
        "parametersRef": {"group": "edgeplane.dev", "kind": "ProxyConfig", "name": "edge"}});
    api.insert(gw);
    api.insert(gateway("web", "plain", "ep", 80));
    let replica = Replica::start(&api, "one", port_base()).await;
    wait_gateway_port(&api, "web", "gw", 80).await;
    wait_gateway_port(&api, "web", "plain", 80).await;
    let service =
        |a: &ApiServer, gw: &str| crate::harness::gateway_service(a, "web", gw).unwrap_or_default();
    let svc = service(&api, "gw");
    assert_eq!(svc["spec"]["type"], "NodePort", "{svc}");
    assert_eq!(
        svc["metadata"]["annotations"]["lb.example.com/scheme"],
        "internal"
    );
    assert_eq!(
        service(&api, "plain")["spec"]["type"],
        "LoadBalancer",
        "the flag's default"
    );

    // Changed: the type and the annotations follow; a dropped annotation goes.
    api.insert(
        json!({"apiVersion": "edgeplane.dev/v1beta1", "kind": "ProxyConfig",
        "metadata": {"namespace": "web", "name": "edge"},
        "spec": {"service": {"type": "ClusterIP", "annotations": {"keep": "2"}}}}),
    );
    let followed = api
        .wait_until(T, |a| {
            let s = service(a, "gw");
            s["spec"]["type"] == "ClusterIP"
                && s["metadata"]["annotations"]["keep"] == "2"
                && s["metadata"]["annotations"]
                    .get("lb.example.com/scheme")
                    .is_none()
        })
        .await;
    assert!(followed, "{}", service(&api, "gw"));
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_service_traffic_fields_come_from_the_proxy_config() {
    let api = ApiServer::start().await;
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &[], &[("svc-a", echoes[0].addr)]);
    let config = |service: Value| {
        json!({"apiVersion": "edgeplane.dev/v1beta1", "kind": "ProxyConfig",
            "metadata": {"namespace": "web", "name": "edge"}, "spec": {"service": service}})
    };
    api.insert(config(
        json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
        "loadBalancerClass": "example.com/internal",
        "loadBalancerSourceRanges": ["192.0.2.0/24", "2001:db8::/32"]}),
    ));
    let mut gw = gateway("web", "gw", "ep", 80);
    gw["spec"]["infrastructure"] = json!({
        "parametersRef": {"group": "edgeplane.dev", "kind": "ProxyConfig", "name": "edge"}});
    api.insert(gw);
    api.insert(gateway("web", "plain", "ep", 80));
    let replica = Replica::start(&api, "one", port_base()).await;
    wait_gateway_port(&api, "web", "gw", 80).await;
    wait_gateway_port(&api, "web", "plain", 80).await;
    let service =
        |a: &ApiServer, gw: &str| crate::harness::gateway_service(a, "web", gw).unwrap_or_default();
    let svc = service(&api, "gw");
    assert_eq!(svc["spec"]["externalTrafficPolicy"], "Local", "{svc}");
    assert_eq!(svc["spec"]["loadBalancerClass"], "example.com/internal");
    assert_eq!(
        svc["spec"]["loadBalancerSourceRanges"],
        json!(["192.0.2.0/24", "2001:db8::/32"])
    );
    let plain = service(&api, "plain");
    assert_eq!(plain["spec"]["externalTrafficPolicy"], "Cluster", "{plain}");
    assert!(plain["spec"].get("loadBalancerClass").is_none(), "{plain}");
    assert!(plain["spec"].get("loadBalancerSourceRanges").is_none());
    let first_uid = svc["metadata"]["uid"].clone();
    let port = svc["spec"]["ports"][0]["targetPort"].clone();

    // Changed policy and ranges are patched onto the same Service.
    api.insert(config(
        json!({"type": "LoadBalancer", "externalTrafficPolicy": "Cluster",
        "loadBalancerClass": "example.com/internal",
        "loadBalancerSourceRanges": ["198.51.100.0/24"]}),
    ));
    let patched = api
        .wait_until(T, |a| {
            let s = service(a, "gw");
            s["spec"]["externalTrafficPolicy"] == "Cluster"
                && s["spec"]["loadBalancerSourceRanges"] == json!(["198.51.100.0/24"])
        })
        .await;
    assert!(patched, "{}", service(&api, "gw"));
    assert_eq!(service(&api, "gw")["metadata"]["uid"], first_uid);

    // A new class cannot be patched in (Kubernetes keeps it immutable): the Service is made
    // again, with the same target port.
    api.insert(config(json!({"type": "LoadBalancer",
        "loadBalancerClass": "example.com/external"})));
    let recreated = api
        .wait_until(T, |a| {
            let s = service(a, "gw");
            s["spec"]["loadBalancerClass"] == "example.com/external"
                && s["metadata"]["uid"] != first_uid
        })
        .await;
    let svc = service(&api, "gw");
    assert!(recreated, "{svc}");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], port);
    assert!(
        svc["spec"].get("loadBalancerSourceRanges").is_none(),
        "{svc}"
    );
    assert_eq!(svc["spec"]["externalTrafficPolicy"], "Cluster");

    // ClusterIP takes none of the three: they leave the Service.
    api.insert(config(
        json!({"type": "ClusterIP", "externalTrafficPolicy": "Local",
        "loadBalancerClass": "example.com/external", "loadBalancerSourceRanges": ["192.0.2.0/24"]}),
    ));
    let cleared = api
        .wait_until(T, |a| {
            let s = service(a, "gw");
            s["spec"]["type"] == "ClusterIP"
                && s["spec"].get("externalTrafficPolicy").is_none()
                && s["spec"].get("loadBalancerClass").is_none()
                && s["spec"].get("loadBalancerSourceRanges").is_none()
        })
        .await;
    assert!(cleared, "{}", service(&api, "gw"));
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_crds_gateway_api_is_still_served() {
    let api = ApiServer::start().await;
    for resource in [
        "proxyconfigs.edgeplane.dev",
        "trafficpolicies.edgeplane.dev",
    ] {
        api.unregister(resource);
    }
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &["gw"], &[("svc-a", echoes[0].addr)]);
    api.insert(route("web", "r", "gw", "example.com", "/", "svc-a"));
    let (certs, addr) = start_webhook(&api).await;
    let replica = Replica::start_with(&api, with_webhook("one", &certs, None), loopback_ip()).await;
    let port = wait_gateway_port(&api, "web", "gw", 80).await;
    replica
        .wait_for(port, "example.com", "/", 200, Some("pod-a"), T)
        .await
        .unwrap();
    // The certificate is still issued and served, ready for when the CRDs are installed.
    let issued = api
        .wait_until(T, |a| secret_field(a, "tls.crt").is_some())
        .await;
    assert!(issued, "no webhook Secret");
    let ca = secret_field(&api, "ca.crt").unwrap();
    let mut answered = None;
    for _ in 0..100 {
        answered = call_webhook(addr, &ca).await.ok();
        if answered.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(answered.map(|(_, s)| s), Some(200));
    replica.stop().await;
}

/// A TrafficPolicy written at v1alpha1 (one `targetRef`, flat settings) through the API: the
/// emulator has the product's webhook convert it, stores it as v1beta1, gives it back at
/// v1alpha1 as written; the controller reads v1beta1, applies it and writes its status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_policy_written_at_v1alpha1_is_stored_as_v1beta1_and_applied() {
    use kube::api::{Api, ApiResource, DynamicObject, PostParams};
    use kube::core::GroupVersionKind;

    let api = ApiServer::start().await;
    install_crds(&api);
    let echoes = start_fleet(&["pod-a"]).await;
    seed(&api, &["gw"], &[("svc-a", echoes[0].addr)]);
    api.insert(route("web", "r", "gw", "example.com", "/", "svc-a"));
    let (certs, _) = start_webhook(&api).await;
    let replica = Replica::start_with(&api, with_webhook("one", &certs, None), loopback_ip()).await;
    let port = wait_gateway_port(&api, "web", "gw", 80).await;
    replica
        .wait_for(port, "example.com", "/", 200, Some("pod-a"), T)
        .await
        .unwrap();
    let trusted = api
        .wait_until(T, |a| {
            ca_bundle(a, "trafficpolicies.edgeplane.dev").is_some_and(|b| !b.is_empty())
        })
        .await;
    assert!(trusted, "caBundle never set");

    let gvk = GroupVersionKind::gvk("edgeplane.dev", "v1alpha1", "TrafficPolicy");
    let alpha: Api<DynamicObject> = Api::namespaced_with(
        api.client(),
        "web",
        &ApiResource::from_gvk_with_plural(&gvk, "trafficpolicies"),
    );
    let spec = json!({
        "targetRef": {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "r"},
        "requestTimeout": "5s",
        "denyCIDRs": ["127.0.0.0/8"],
    });
    let written: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "edgeplane.dev/v1alpha1", "kind": "TrafficPolicy",
        "metadata": {"namespace": "web", "name": "deny"}, "spec": spec}))
    .unwrap();
    let before = api.conversions();
    // The first handshakes may precede the certificate's loading: retried briefly.
    let mut created = None;
    for _ in 0..50 {
        match alpha.create(&PostParams::default(), &written).await {
            Ok(o) => {
                created = Some(o);
                break;
            }
            Err(kube::Error::Api(s)) if s.code == 500 => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("create at v1alpha1: {e}"),
        }
    }
    let created = created.expect("created through the webhook");
    assert_eq!(created.data["spec"], spec);
    assert!(api.conversions() > before, "the webhook was not called");
    let stored = api
        .object("trafficpolicies.edgeplane.dev", "web", "deny")
        .expect("stored");
    assert_eq!(stored["apiVersion"], "edgeplane.dev/v1beta1");
    assert_eq!(stored["spec"]["targetRefs"][0]["name"], "r");
    assert_eq!(stored["spec"]["timeouts"]["request"], "5s");
    assert_eq!(alpha.get("deny").await.unwrap().data["spec"], spec);

    // Applied: the route's clients are now refused; its status is written at v1beta1 and
    // reads back at v1alpha1.
    replica
        .wait_for(port, "example.com", "/", 403, None, T)
        .await
        .unwrap();
    let accepted = |o: &Value| {
        o["status"]["ancestors"].as_array().is_some_and(|a| {
            a.iter().any(|x| {
                x["controllerName"] == CONTROLLER
                    && cond(&x["conditions"], "Accepted").is_some_and(|c| c["status"] == "True")
            })
        })
    };
    let written_status = api
        .wait_until(T, |a| {
            a.object("trafficpolicies.edgeplane.dev", "web", "deny")
                .is_some_and(|o| accepted(&o))
        })
        .await;
    assert!(
        written_status,
        "{:?}",
        api.object("trafficpolicies.edgeplane.dev", "web", "deny")
    );
    let read = serde_json::to_value(alpha.get("deny").await.unwrap()).unwrap();
    assert!(accepted(&read), "{read}");
    replica.stop().await;
}

/// `kubectl get trafficpolicies` through the API server's Table printing: a policy with three
/// targets, one of them missing, prints `Targets` 3 and `Accepted` 2/3 (the API server prints
/// only the first match of each column's JSONPath, so each column must select one value that
/// sums up every ancestor).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printer_columns_sum_up_every_target() {
    let api = ApiServer::start().await;
    install_crds(&api);
    seed(&api, &["gw", "other"], &[]);
    let target =
        |name: &str| json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name});
    api.insert(
        json!({"apiVersion": "edgeplane.dev/v1beta1", "kind": "TrafficPolicy",
        "metadata": {"namespace": "web", "name": "mixed"},
        "spec": {"targetRefs": [target("gw"), target("missing"), target("other")],
            "rateLimit": {"requests": 10, "unit": "Second"}}}),
    );
    let replica = Replica::start(&api, "one", port_base()).await;
    let summed = api
        .wait_until(T, |a| {
            a.object("trafficpolicies.edgeplane.dev", "web", "mixed")
                .is_some_and(|o| o["status"]["accepted"].is_string())
        })
        .await;
    assert!(
        summed,
        "{:?}",
        api.object("trafficpolicies.edgeplane.dev", "web", "mixed")
    );

    let raw = http::Request::get("/apis/edgeplane.dev/v1beta1/namespaces/web/trafficpolicies")
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: Value = api.client().request(raw).await.unwrap();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["Name", "Targets", "Accepted", "Age"], "{table}");
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[0], "mixed");
    assert_eq!(cells[1], 3, "{table}");
    assert_eq!(cells[2], "2/3", "{table}");
    replica.stop().await;
}
