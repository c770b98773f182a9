//! A Secret updated to garbage PEM keeps its last good certificate serving: real TLS
//! handshakes before and after, the listener's status says so, and the served certificate's
//! expiry is exported.

use std::time::{Duration, Instant};

use edgeplane::status::ObjectKind;
use serde_json::Value;

use crate::standalone::{gateway, route, service, write, Standalone, HTTPS_PORT};
use crate::support::echo::start_echo;
use crate::support::tls::{self_signed, served_over_tls, TestCert};

fn secret(crt: &str, key: &str) -> String {
    let indent = |pem: &str| pem.replace('\n', "\n    ");
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: cert}}\nstringData:\n  tls.crt: |\n    {}\n  tls.key: |\n    {}\n",
        indent(crt.trim_end()),
        indent(key.trim_end())
    )
}

/// The conditions of the Gateway `gw` listener `name`, by type.
pub fn listener_conditions(status: &Value, name: &str) -> Vec<Value> {
    status["listeners"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["name"] == name))
        .and_then(|l| l["conditions"].as_array().cloned())
        .unwrap_or_default()
}

pub fn condition<'a>(conditions: &'a [Value], ty: &str) -> &'a Value {
    conditions
        .iter()
        .find(|c| c["type"] == ty)
        .unwrap_or(&Value::Null)
}

fn gateway_status(stack: &Standalone) -> Value {
    stack
        .published
        .status()
        .entries
        .iter()
        .find(|e| e.kind == ObjectKind::Gateway && &*e.name == "gw")
        .map(|e| e.status.to_json().into_owned())
        .unwrap_or_default()
}

/// Waits (bounded) until the https listener's `ResolvedRefs` has `status`: the status is
/// published just after the table it describes.
async fn wait_resolved(stack: &Standalone, status: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let conditions = listener_conditions(&gateway_status(stack), "https");
        if condition(&conditions, "ResolvedRefs")["status"] == status {
            return conditions;
        }
        assert!(
            Instant::now() < deadline,
            "ResolvedRefs never {status}: {conditions:#?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn handshake_ok(stack: &Standalone, trusted: &TestCert) -> Result<(), String> {
    served_over_tls(stack.addr(HTTPS_PORT), "a.secure.example", trusted).await
}

/// Waits (bounded) until a handshake trusting only `trusted` succeeds.
async fn wait_served(stack: &Standalone, trusted: &TestCert) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = handshake_ok(stack, trusted).await;
        if r.is_ok() {
            return;
        }
        assert!(Instant::now() < deadline, "certificate never served: {r:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_secret_keeps_the_last_good_certificate_serving() {
    let web = start_echo("web").await;
    let first = self_signed(&["*.secure.example"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    write(
        d,
        "base.yaml",
        &format!(
            "{}{}{}",
            gateway(true),
            service("web", &[web.addr]),
            route("r", "a.secure.example", "/", "web")
        ),
    );
    write(d, "secret.yaml", &secret(&first.cert_pem, &first.key_pem));
    let stack = Standalone::start(dir).await;
    wait_served(&stack, &first).await;
    let metrics = stack.published.metrics().encode();
    let expiry = metrics
        .lines()
        .find(|l| {
            l.starts_with("edgeplane_certificate_expiry_seconds{")
                && l.contains(r#"listener="default/gw/https""#)
                && l.contains(r#"name="cert""#)
                && l.contains(r#"namespace="default""#)
        })
        .unwrap_or_else(|| panic!("no expiry metric:\n{metrics}"));
    let not_after: i64 = expiry
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("a value");
    assert!(not_after > jiff::Timestamp::now().as_second(), "{expiry}");

    // Garbage PEM: the listener keeps serving the first certificate.
    let generation = stack.generation();
    write(
        stack.dir.path(),
        "secret.yaml",
        &secret("garbage", "more garbage"),
    );
    stack.wait_past(generation).await;
    let conditions = wait_resolved(&stack, "False").await;
    let resolved = condition(&conditions, "ResolvedRefs");
    assert_eq!(resolved["status"], "False", "{conditions:#?}");
    assert_eq!(resolved["reason"], "InvalidCertificateRef");
    let message = resolved["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("default/cert")
            && message.contains("previous certificate")
            && message.contains("still served"),
        "{message}"
    );
    assert_eq!(condition(&conditions, "Programmed")["status"], "True");
    for _ in 0..3 {
        handshake_ok(&stack, &first)
            .await
            .expect("the previous certificate is still served");
    }
    assert!(
        stack.published.metrics().encode().contains(expiry),
        "the expiry of the served certificate stays exported"
    );

    // A good certificate again: served at once, and the listener resolves.
    let second = self_signed(&["*.secure.example"]);
    write(
        stack.dir.path(),
        "secret.yaml",
        &secret(&second.cert_pem, &second.key_pem),
    );
    wait_served(&stack, &second).await;
    wait_resolved(&stack, "True").await;
    assert!(
        handshake_ok(&stack, &first).await.is_err(),
        "the first certificate is no longer served"
    );
    stack.stop().await;
}
