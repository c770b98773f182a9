//! `enable-access-log: "false"` through `serve --config-dir --access-log json`: the Ingress's
//! requests write no access log line, another Ingress's do.

use std::time::{Duration, Instant};

use crate::standalone::{serve_with, service};
use crate::support::client::{get, h1_client, send};
use crate::support::echo::start_echo;

const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
    metadata: {name: edge}\nspec: {controller: edgeplane.dev/ingress-controller}\n";

/// Ingress `name` for host `<name>.test`, `/` to Service `app`, with these annotations.
fn ingress(name: &str, annotations: &str) -> String {
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
         annotations: {{{annotations}}}\nspec:\n  ingressClassName: edge\n  rules:\n  - host: {name}.test\n    \
         http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: app, \
         port: {{number: 80}}}}}}}}\n"
    )
}

#[tokio::test]
async fn an_ingress_with_the_access_log_off_writes_no_line() {
    let echo = start_echo("app-pod").await;
    let mut text = format!("{CLASS}{}", service("app", &echo));
    text.push_str(&ingress(
        "quiet",
        "nginx.ingress.kubernetes.io/enable-access-log: \"false\"",
    ));
    text.push_str(&ingress(
        "logged",
        "nginx.ingress.kubernetes.io/enable-access-log: \"true\"",
    ));
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("config")).expect("mkdir");
    std::fs::write(dir.path().join("config/all.yaml"), text).expect("write");
    let log = dir.path().join("access.log");
    let log_arg = log.display().to_string();
    let client = h1_client();
    let flags = ["--access-log", "json", "--access-log-file", &log_arg];
    let server = serve_with(&dir.path().join("config"), &client, &flags).await;
    for host in ["quiet.test", "logged.test"] {
        let r = send(&client, get(server.http(), host, "/p"))
            .await
            .expect("request through edgeplane");
        assert_eq!(r.status, 200, "{host}");
    }
    // Lines are written in order: once the second request's is there, the first's would be.
    let deadline = Instant::now() + Duration::from_secs(10);
    let written = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("logged.test") {
            break text;
        }
        assert!(Instant::now() < deadline, "no access log line: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(!written.contains("quiet.test"), "{written}");
    assert_eq!(written.lines().count(), 1, "{written}");
}
