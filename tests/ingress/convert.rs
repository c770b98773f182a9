//! Equivalence through the real binary: the Ingresses of the conversion corpus
//! (`tests/fixtures/convert/input`) served directly by one `edgeplane serve`, and their
//! conversion (`edgeplane convert ingress -o DIR`) served by another, each with the same
//! Services (echo backends, one per Service), Secrets and GatewayClass; the same requests,
//! plain and TLS, get the same status, backend, path, Host, forwarded-prefix header and
//! `Location` from both.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::standalone::{serve, Server};
use crate::support::client::{get, h1_client, send, TestClient};
use crate::support::echo::{start_echo, Echo};
use crate::support::tls::{get_tls, self_signed, TestCert};

/// The Services of the corpus: namespace, name, port.
const SERVICES: &[(&str, &str, u16)] = &[
    ("shop", "web", 80),
    ("shop", "static", 80),
    ("shop", "api", 8080),
    ("shop", "admin", 80),
    ("blog", "blog", 80),
    ("blog", "legacy", 80),
    ("api", "v1", 80),
    ("api", "v2", 80),
    ("api", "v2-canary", 80),
    ("canaries", "status-next", 80),
    ("api", "fallback", 80),
];

/// The corpus's Ingress files (its Services and Secrets are replaced by the test's own).
const INGRESS_FILES: &[&str] = &[
    "classes.yaml",
    "shop.yaml",
    "blog.yaml",
    "api.yaml",
    "unsupported.yaml",
];

fn backends(echoes: &[Echo], cert: &TestCert) -> String {
    let mut out = String::new();
    for ((ns, name, port), echo) in SERVICES.iter().zip(echoes) {
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             spec: {{ports: [{{name: http, port: {port}, targetPort: {e}}}]}}\n\
             ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: {name}-1, namespace: {ns}, labels: {{kubernetes.io/service-name: {name}}}}}\n\
             addressType: IPv4\nports: [{{name: http, port: {e}}}]\n\
             endpoints: [{{addresses: [\"{ip}\"], conditions: {{ready: true}}}}]\n",
            e = echo.addr.port(),
            ip = echo.addr.ip(),
        ));
    }
    let indent = |pem: &str| {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    for (ns, name) in [
        ("shop", "shop-tls"),
        ("blog", "blog-tls"),
        ("api", "api-tls"),
    ] {
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             type: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
            indent(&cert.cert_pem),
            indent(&cert.key_pem)
        ));
    }
    out
}

/// What a client sees of one answer: status, backend, path and Host upstream, the
/// forwarded prefix, `Location`.
async fn seen(
    client: &TestClient,
    server: &Server,
    cert: &TestCert,
    tls: bool,
    host: &str,
    path: &str,
) -> String {
    let reply = if tls {
        get_tls(server.https(), host, &[cert], host, path).await
    } else {
        send(client, get(server.http(), host, path)).await
    };
    match reply {
        Ok(r) => format!(
            "{} pod={} path={} host={} prefix={:?} location={}",
            r.status.as_u16(),
            r.pod().unwrap_or_default(),
            r.field("path").unwrap_or_default(),
            r.field("host").unwrap_or_default(),
            r.echoed_header("x-forwarded-prefix"),
            r.header("location").unwrap_or_default(),
        ),
        Err(e) => format!("error: {e}"),
    }
}

#[tokio::test]
async fn an_ingress_and_its_conversion_answer_the_same() {
    let mut echoes = Vec::new();
    for (ns, name, _) in SERVICES {
        echoes.push(start_echo(&format!("{ns}-{name}")).await);
    }
    let cert = self_signed(&["shop.example.com", "*.blog.example.com", "api.example.com"]);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/convert/input");
    let tmp = tempfile::tempdir().expect("temp dir");
    let direct = tmp.path().join("direct");
    let converted = tmp.path().join("converted");
    std::fs::create_dir_all(&direct).expect("mkdir");
    for f in INGRESS_FILES {
        let text = std::fs::read_to_string(fixtures.join(f)).expect("fixture");
        // Served directly, ingress-nginx's class is edgeplane's.
        let text = text.replace("k8s.io/ingress-nginx", "edgeplane.dev/ingress-controller");
        std::fs::write(direct.join(f), text).expect("write");
    }
    std::fs::write(direct.join("backends.yaml"), backends(&echoes, &cert)).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_edgeplane"))
        .args(["convert", "ingress", "-f"])
        .arg(&direct)
        .arg("-o")
        .arg(converted.join("out"))
        .output()
        .expect("run convert");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(converted.join("backends.yaml"), backends(&echoes, &cert)).expect("write");
    std::fs::write(
        converted.join("class.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: edgeplane}\nspec: {controllerName: edgeplane.dev/gateway-controller}\n",
    )
    .expect("write");

    let client = h1_client();
    let a = serve(&direct, &client).await;
    let b = serve(&converted, &client).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    for server in [&a, &b] {
        while !seen(&client, server, &cert, false, "api.example.com", "/other")
            .await
            .starts_with("200 pod=api-fallback")
        {
            assert!(Instant::now() < deadline, "the routes were never served");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    let cases: &[(bool, &str, &str)] = &[
        (false, "shop.example.com", "/"),
        (false, "shop.example.com", "/api/items"),
        (false, "shop.example.com", "/api/health"),
        (false, "shop.example.com", "/admin"),
        (true, "shop.example.com", "/"),
        (true, "shop.example.com", "/static/app.js"),
        (true, "shop.example.com", "/api/items?q=1"),
        (true, "shop.example.com", "/admin/users"),
        (false, "a.blog.example.com", "/post/1"),
        (true, "a.blog.example.com", "/"),
        (true, "a.blog.example.com", "/post/1"),
        (false, "legacy.example.com", "/old/page"),
        (false, "moved.example.com", "/"),
        (false, "api.example.com", "/v1/users"),
        (false, "api.example.com", "/v1/status"),
        (false, "api.example.com", "/v2/users"),
        (false, "api.example.com", "/V1/users"),
        (false, "api.example.com", "/other"),
        (true, "api.example.com", "/v1/users"),
        (false, "internal.example.com", "/"),
        (false, "unknown.example.org", "/"),
        (false, "regex.example.com", "/shop/cart"),
    ];
    let mut answers = Vec::new();
    for (tls, host, path) in cases {
        let direct = seen(&client, &a, &cert, *tls, host, path).await;
        let converted = seen(&client, &b, &cert, *tls, host, path).await;
        assert_eq!(
            direct,
            converted,
            "{} {host}{path}",
            if *tls { "https" } else { "http" }
        );
        answers.push(direct);
    }
    // The answers are the corpus's meaning, not two equal failures.
    let expect = [
        (
            0,
            "308 pod= path= host= prefix=[] location=https://shop.example.com/",
        ),
        (
            1,
            "200 pod=shop-api path=/v2 host=shop.example.com prefix=[\"/api\"]",
        ),
        (6, "200 pod=shop-api path=/v2?q=1"),
        (7, "403"),
        (10, "200 pod=blog-blog path=/post/1 host=blog.internal"),
        (
            11,
            "308 pod= path= host= prefix=[] location=https://www.blog.example.com/archive",
        ),
        (17, "200 pod=api-fallback"),
        (19, "403"),
        (20, "200 pod=api-fallback"),
    ];
    for (i, want) in expect {
        assert!(
            answers[i].starts_with(want),
            "case {i}: {} (want {want})",
            answers[i]
        );
    }
}
