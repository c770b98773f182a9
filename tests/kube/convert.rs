//! `edgeplane convert ingress --from-cluster` through the binary against the API emulator:
//! the Ingresses, IngressClasses, Services, EndpointSlices and Secrets are listed from the
//! cluster, converted and verified as files are (no difference: exit 0), a difference planted
//! in an edited conversion is found (exit 1), and an unreachable cluster is bad input (exit 2).

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use crate::support::apiserver::ApiServer;
use crate::support::tls::self_signed;

async fn convert(kubeconfig: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_edgeplane"))
        .args(["convert", "ingress", "--from-cluster"])
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .await
        .expect("run edgeplane convert")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn objects() -> Vec<Value> {
    let cert = self_signed(&["shop.example.com"]);
    vec![
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx"}}),
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"ports": [{"name": "http", "port": 80}]}}),
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "api", "namespace": "shop"},
            "spec": {"ports": [{"name": "http", "port": 8080}]}}),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "shop-tls", "namespace": "shop"}, "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": cert.cert_pem, "tls.key": cert.key_pem}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web", "namespace": "shop",
                "annotations": {"nginx.ingress.kubernetes.io/proxy-body-size": "2m"}},
            "spec": {"ingressClassName": "nginx",
                "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
                "rules": [{"host": "shop.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": "web", "port": {"name": "http"}}}},
                    {"path": "/api", "pathType": "Prefix",
                     "backend": {"service": {"name": "api", "port": {"number": 8080}}}}]}}]}}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clusters_ingresses_convert_and_verify() {
    let api = ApiServer::start().await;
    for o in objects() {
        api.insert(o);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).expect("kubeconfig");

    let out = convert(&kubeconfig, &[]).await;
    let (objects, report) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(
        report.contains("Ingress shop/web: written as HTTPRoute shop/web-https-redirect, HTTPRoute shop/web, TrafficPolicy shop/web"),
        "{report}"
    );
    // The Secret was read: the certificate is the listener's, no problem reported.
    assert!(!report.contains(": not converted"), "{report}");
    assert!(objects.contains("name: shop-tls"), "{objects}{report}");

    let out = convert(&kubeconfig, &["--verify"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(!stdout.contains("problem"), "{stdout}");
    assert!(stdout.contains(", 0 decided differently"), "{stdout}");

    // An edited conversion sending /api to the wrong port.
    let converted = dir.path().join("converted");
    let out = convert(&kubeconfig, &["-o", &converted.display().to_string()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let route = converted.join("httproute-shop-web.yaml");
    let yaml = std::fs::read_to_string(&route).expect("route");
    assert!(yaml.contains("port: 8080"), "{yaml}");
    std::fs::write(&route, yaml.replace("port: 8080", "port: 80")).expect("plant");
    let out = convert(
        &kubeconfig,
        &["--verify", "--converted", &converted.display().to_string()],
    )
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("difference: GET http://shop.example.com/api")
            || stdout.contains("difference: GET https://shop.example.com/api"),
        "{stdout}"
    );

    // A cluster that does not answer.
    api.set_unavailable(true);
    let out = convert(&kubeconfig, &["--verify"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("error: cannot read the cluster"),
        "{}",
        text(&out.stderr)
    );
}
