//! `edgeplane convert ingress` through the binary, over the corpus of
//! `tests/fixtures/convert/input`: the written objects and report are the golden files of
//! `tests/fixtures/convert/expected` (`UPDATE_GOLDEN=1` rewrites them), they pass `check`,
//! `--verify` finds no difference and catches one planted in the output, and bad input or
//! nothing to convert exits with its own code, writing nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{text, write, BIN};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/convert")
}

fn convert(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["convert", "ingress"])
        .args(args)
        .output()
        .expect("run edgeplane convert")
}

/// `actual` is the golden file `name`, or becomes it with `UPDATE_GOLDEN=1`.
fn golden(name: &str, actual: &str) {
    let path = fixtures().join("expected").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        want == actual,
        "{} differs (UPDATE_GOLDEN=1 rewrites it):\n{actual}",
        path.display()
    );
}

fn input() -> String {
    fixtures().join("input").display().to_string()
}

#[test]
fn the_corpus_converts_to_the_golden_objects_and_report() {
    let out = convert(&["-f", &input()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let objects = text(&out.stdout);
    assert!(!objects.contains("edgeplane:ingress"), "{objects}");
    assert!(!objects.contains("serving-gateway"), "{objects}");
    assert!(
        !objects.contains("nginx.ingress.kubernetes.io"),
        "{objects}"
    );
    golden("converted.yaml", &objects);
    golden("report.txt", &text(&out.stderr));
}

#[test]
fn the_written_directory_passes_check_and_holds_the_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out_dir = dir.path().join("out");
    write(&out_dir, "old-route.yaml", "kind: HTTPRoute\n");
    let out = convert(&["-f", &input(), "-o", &out_dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("did not write (left as they are): old-route.yaml"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_file(out_dir.join("old-route.yaml")).expect("remove");
    assert!(
        text(&out.stderr).contains("summary: 16 of 17 Ingresses converted"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert!(out_dir
        .join("gateway-edgeplane-system-nginx.yaml")
        .is_file());
    assert!(out_dir
        .join("httproute-shop-web-https-redirect.yaml")
        .is_file());
    assert!(out_dir.join("trafficpolicy-shop-admin.yaml").is_file());
    let tls =
        std::fs::read_to_string(out_dir.join("backendtlspolicy-shop-payments-backend-tls.yaml"))
            .expect("the payments backend's BackendTLSPolicy");
    assert!(tls.contains("hostname: shop.example.com"), "{tls}");
    assert!(tls.contains("name: payments-ca"), "{tls}");
    let report = std::fs::read_to_string(out_dir.join("report.txt")).expect("report.txt");
    assert!(
        report.contains("Ingress api/dashboard: not converted"),
        "{report}"
    );
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("report.jsonl")).expect("report.jsonl"),
    )
    .expect("JSON report");
    let canary = json["ingresses"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["ingress"] == "api/canary"))
        .expect("api/canary in the report");
    // Folded into the main Ingress of its path, as ingress-nginx serves it.
    assert_eq!(canary["annotations"][0]["outcome"], "converted");

    // With the Services, Secrets and the GatewayClass, `check` finds every object fine.
    write(
        dir.path(),
        "class.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: edgeplane}\nspec: {controllerName: edgeplane.dev/gateway-controller}\n",
    );
    let input = fixtures().join("input");
    let check = Command::new(BIN)
        .args(["check", "-o", "summary", "-f"])
        .arg(&out_dir)
        .arg("-f")
        .arg(input.join("backends.yaml"))
        .arg("-f")
        .arg(input.join("secrets.yaml"))
        .arg("-f")
        .arg(dir.path().join("class.yaml"))
        .output()
        .expect("run check");
    let summary = text(&check.stdout);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{summary}{}",
        text(&check.stderr)
    );
    assert!(
        summary.contains("ok Gateway edgeplane-system/nginx"),
        "{summary}"
    );
    assert!(summary.contains("ok HTTPRoute shop/web"), "{summary}");
    assert!(summary.contains("ok TrafficPolicy shop/admin"), "{summary}");
    assert!(
        summary.contains("ok BackendTLSPolicy shop/payments-backend-tls"),
        "{summary}"
    );
    assert!(
        summary.contains("ok TrafficPolicy shop/payments-balance"),
        "{summary}"
    );
    assert!(summary.contains("ok TLSRoute shop/vault"), "{summary}");
}

#[test]
fn verify_finds_no_difference_on_the_corpus() {
    let out = convert(&["-f", &input(), "--verify"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(!stdout.contains("difference:"), "{stdout}");
    assert!(stdout.ends_with(" decided differently\n"), "{stdout}");
    assert!(stdout.contains(", 0 decided differently"), "{stdout}");
    let replayed: usize = stdout
        .trim_start_matches("verify: ")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count of requests");
    assert!(replayed > 100, "{stdout}");
}

#[test]
fn a_route_on_more_than_32_listeners_is_split_and_verifies() {
    let file = fixtures().join("many-listeners.yaml").display().to_string();
    let out = convert(&["-f", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    golden("many-listeners.yaml", &text(&out.stdout));
    assert!(
        text(&out.stderr)
            .contains("written as HTTPRoute many/wildcard, HTTPRoute many/wildcard-2,"),
        "{}",
        text(&out.stderr)
    );
    // Admitted (at most 32 parentRefs each) and routing as the Ingress.
    let out = convert(&["-f", &file, "--verify"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(!stdout.contains("problem"), "{stdout}");
    assert!(stdout.contains(", 0 decided differently"), "{stdout}");
}

#[test]
fn grpc_ingresses_convert_to_grpcroutes_that_pass_check_and_verify() {
    let file = fixtures().join("grpc.yaml");
    let dir = tempfile::tempdir().expect("temp dir");
    let out_dir = dir.path().join("out");
    let out = convert(&["-f", &file.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    golden("grpc.yaml", &text(&out.stdout));
    let out = convert(&[
        "-f",
        &file.display().to_string(),
        "-o",
        &out_dir.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The Services (the Ingresses too: check reads them, nothing else does) and the class.
    write(
        dir.path(),
        "class.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: edgeplane}\nspec: {controllerName: edgeplane.dev/gateway-controller}\n",
    );
    let check = std::process::Command::new(BIN)
        .args(["check", "-o", "summary", "-f"])
        .arg(&out_dir)
        .arg("-f")
        .arg(&file)
        .arg("-f")
        .arg(dir.path().join("class.yaml"))
        .output()
        .expect("run check");
    let summary = text(&check.stdout);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{summary}{}",
        text(&check.stderr)
    );
    assert!(summary.contains("ok GRPCRoute rpc/greeter"), "{summary}");
    assert!(summary.contains("ok GRPCRoute rpc/health"), "{summary}");
    let out = convert(&["-f", &file.display().to_string(), "--verify"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(", 0 decided differently"), "{stdout}");
}

#[test]
fn a_capture_rewrite_is_reported_and_its_difference_shown() {
    let file = format!(
        "{}/tests/fixtures/convert/captures.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = convert(&["-f", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (objects, report) = (text(&out.stdout), text(&out.stderr));
    assert!(!objects.contains("$2"), "{objects}");
    assert!(
        report.contains("converted with a difference") && report.contains("regex captures"),
        "{report}"
    );
    let out = convert(&["-f", &file, "--verify"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("difference: GET http://captures.example.com/shop/"),
        "{stdout}"
    );
}

#[test]
fn backend_protocols_without_a_gateway_api_form_are_reported_and_their_difference_shown() {
    let file = fixtures().join("upstream.yaml").display().to_string();
    let out = convert(&["-f", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (objects, report) = (text(&out.stdout), text(&out.stderr));
    assert!(!objects.contains("BackendTLSPolicy"), "{objects}");
    assert!(
        report.contains("backend-protocol: not converted: not written: HTTP/2 to the backend"),
        "{report}"
    );
    assert!(
        report.contains("a BackendTLSPolicy always verifies one"),
        "{report}"
    );
    let out = convert(&["-f", &file, "--verify"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let grpc = stdout
        .lines()
        .skip_while(|l| !l.starts_with("difference: GET http://grpc.example.com/"))
        .nth(1)
        .unwrap_or_default();
    assert!(grpc.contains("shop/grpc:50051 weight 1 h2c"), "{stdout}");
    let tls = stdout
        .lines()
        .skip_while(|l| !l.starts_with("difference: GET http://dashboard.example.com/"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        tls.contains("tls dashboard.shop.svc unverified"),
        "{stdout}"
    );
}

#[test]
fn verify_catches_a_difference_planted_in_the_conversion() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out_dir = dir.path().join("out");
    let out = convert(&["-f", &input(), "-o", &out_dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The API's rewrite goes to /v3 instead of /v2.
    let route = out_dir.join("httproute-shop-api.yaml");
    let yaml = std::fs::read_to_string(&route).expect("route");
    assert!(yaml.contains("replaceFullPath: /v2"), "{yaml}");
    std::fs::write(
        &route,
        yaml.replace("replaceFullPath: /v2", "replaceFullPath: /v3"),
    )
    .expect("plant");
    let out = convert(&[
        "-f",
        &input(),
        "--verify",
        "--converted",
        &out_dir.display().to_string(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let mut lines = stdout.lines();
    let first = lines.next().unwrap_or_default();
    assert!(
        first.starts_with("difference: ")
            && first.to_ascii_lowercase().contains("shop.example.com/api"),
        "{stdout}"
    );
    let ingress = lines.next().unwrap_or_default();
    let converted = lines.next().unwrap_or_default();
    assert!(ingress.trim_start().starts_with("ingress:"), "{stdout}");
    assert!(ingress.contains("\"path\":\"/v2"), "{stdout}");
    assert!(converted.trim_start().starts_with("converted:"), "{stdout}");
    assert!(converted.contains("\"path\":\"/v3"), "{stdout}");
    // Only the API's requests differ (its paths are regex, matched in any case).
    for l in stdout.lines().filter(|l| l.starts_with("difference:")) {
        assert!(
            l.to_ascii_lowercase().contains("shop.example.com/api"),
            "{l}"
        );
    }
}

#[test]
fn custom_http_errors_convert_to_error_pages_that_verify_compares() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out_dir = dir.path().join("out");
    let out = convert(&["-f", &input(), "-o", &out_dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The outage Ingress's error pages lose 503 in the conversion.
    let policy = out_dir.join("trafficpolicy-shop-outage.yaml");
    let yaml = std::fs::read_to_string(&policy).expect("policy");
    assert!(
        yaml.contains("errorPages:") && yaml.contains("- 503"),
        "{yaml}"
    );
    std::fs::write(&policy, yaml.replace("    - 503\n", "")).expect("plant");
    let out = convert(&[
        "-f",
        &input(),
        "--verify",
        "--converted",
        &out_dir.display().to_string(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let differences: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("difference:"))
        .collect();
    assert!(!differences.is_empty(), "{stdout}");
    for l in differences {
        assert!(l.contains("outage.example.com"), "{l}");
    }
    assert!(stdout.contains("errorPages"), "{stdout}");
}

#[test]
fn a_passthrough_ingress_converts_to_a_tls_route_and_verify_catches_a_planted_backend() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out_dir = dir.path().join("out");
    let out = convert(&["-f", &input(), "-o", &out_dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let gateway = std::fs::read_to_string(out_dir.join("gateway-edgeplane-system-nginx.yaml"))
        .expect("the Gateway");
    let listener = gateway
        .split("  - ")
        .find(|l| l.contains("name: tls-vault-example-com"))
        .unwrap_or_default();
    for want in [
        "hostname: vault.example.com",
        "port: 443",
        "protocol: TLS",
        "mode: Passthrough",
    ] {
        assert!(listener.contains(want), "{want}: {gateway}");
    }
    let path = out_dir.join("tlsroute-shop-vault.yaml");
    let route = std::fs::read_to_string(&path).expect("the TLSRoute");
    for want in [
        "apiVersion: gateway.networking.k8s.io/v1",
        "sectionName: tls-vault-example-com",
        "- vault.example.com",
        "name: vault",
        "port: 8443",
    ] {
        assert!(route.contains(want), "{want}: {route}");
    }
    let report = std::fs::read_to_string(out_dir.join("report.txt")).expect("report");
    assert!(
        report.contains("nginx.ingress.kubernetes.io/ssl-passthrough: converted: a TLS listener"),
        "{report}"
    );

    // A TLSRoute sending the host's connections to another port (which the Service lacks) is
    // caught.
    std::fs::write(&path, route.replace("port: 8443", "port: 9443")).expect("plant");
    let out = convert(&[
        "-f",
        &input(),
        "--verify",
        "--converted",
        &out_dir.display().to_string(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let mut lines = stdout.lines();
    let first = lines.next().unwrap_or_default();
    assert!(
        first.starts_with("difference: GET https://vault.example.com/"),
        "{stdout}"
    );
    let ingress = lines.next().unwrap_or_default();
    let converted = lines.next().unwrap_or_default();
    assert!(
        ingress.contains("\"outcome\":\"passthrough\"") && ingress.contains("shop/vault:8443"),
        "{stdout}"
    );
    assert!(
        converted.contains("9443") && !converted.contains("shop/vault:8443"),
        "{stdout}"
    );
    for l in stdout.lines().filter(|l| l.starts_with("difference:")) {
        assert!(l.contains("https://vault.example.com/"), "{l}");
    }
}

#[test]
fn bad_input_and_nothing_to_convert_have_their_own_exit_codes() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "bad/broken.yaml",
        "kind: Ingress\nmetadata: [\n",
    );
    let out = convert(&["-f", &dir.path().join("bad").display().to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("broken.yaml"),
        "{}",
        text(&out.stderr)
    );

    write(
        dir.path(),
        "none/svc.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n",
    );
    let out = convert(&["-f", &dir.path().join("none").display().to_string()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("nothing converted"),
        "{}",
        text(&out.stderr)
    );

    let out = convert(&["-f", &dir.path().join("missing").display().to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn a_request_uri_hash_converts_to_a_path_and_query_key_that_verify_compares() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("pages.yaml");
    std::fs::write(
        &file,
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: nginx}\n\
         spec: {controller: k8s.io/ingress-nginx}\n---\n\
         apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: pages\n  \
         namespace: shop\n  annotations:\n    \
         nginx.ingress.kubernetes.io/upstream-hash-by: $request_uri\nspec:\n  \
         ingressClassName: nginx\n  rules:\n  - host: pages.example.com\n    http:\n      \
         paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: pages, port: \
         {number: 80}}}}\n---\napiVersion: v1\nkind: Service\n\
         metadata: {name: pages, namespace: shop}\nspec: {ports: [{name: http, port: 80}]}\n",
    )
    .expect("write input");
    let input = file.display().to_string();
    let out_dir = dir.path().join("out");
    let out = convert(&["-f", &input, "-o", &out_dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let path = out_dir.join("trafficpolicy-shop-pages-balance.yaml");
    let policy = std::fs::read_to_string(&path).expect("the TrafficPolicy");
    assert!(policy.contains("pathAndQuery: true"), "{policy}");
    assert!(policy.contains("algorithm: ConsistentHash"), "{policy}");

    let verify = |converted: Option<&Path>| {
        let mut args = vec!["-f".to_owned(), input.clone(), "--verify".to_owned()];
        if let Some(c) = converted {
            args.extend(["--converted".to_owned(), c.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        convert(&args)
    };
    let out = verify(None);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(", 0 decided differently"), "{stdout}");

    // Hashing the path alone is a different balance, and verify says so.
    std::fs::write(&path, policy.replace("pathAndQuery: true", "path: true")).expect("plant");
    let out = verify(Some(&out_dir));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("difference: GET http://pages.example.com/"),
        "{stdout}"
    );
    assert!(stdout.contains("pathAndQuery"), "{stdout}");
}

#[test]
fn add_header_without_always_is_converted_with_a_difference_that_verify_shows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("added.yaml");
    std::fs::write(
        &file,
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: nginx}\n\
         spec: {controller: k8s.io/ingress-nginx}\n---\n\
         apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: added\n  \
         namespace: shop\n  annotations:\n    \
         nginx.ingress.kubernetes.io/configuration-snippet: \"add_header X-Ok yes;\"\nspec:\n  \
         ingressClassName: nginx\n  rules:\n  - host: added.example.com\n    http:\n      \
         paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: added, port: \
         {number: 80}}}}\n---\napiVersion: v1\nkind: Service\n\
         metadata: {name: added, namespace: shop}\nspec: {ports: [{name: http, port: 80}]}\n",
    )
    .expect("write input");
    let input = file.display().to_string();
    let out = convert(&["-f", &input]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (objects, report) = (text(&out.stdout), text(&out.stderr));
    assert!(objects.contains("name: X-Ok"), "{objects}");
    assert!(
        report.contains("converted with a difference")
            && report.contains("add_header without always to every response"),
        "{report}"
    );
    let out = convert(&["-f", &input, "--verify"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("difference: GET http://added.example.com/"),
        "{stdout}"
    );
    assert!(stdout.contains("addOnSuccess"), "{stdout}");
}

#[test]
fn a_server_snippet_is_written_on_every_route_of_its_host_and_verify_agrees() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("shared.yaml");
    let ingress = |name: &str, second: u32, snippet: &str| {
        format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
             namespace: shop\n  creationTimestamp: \"2026-01-01T00:00:{second:02}Z\"\n{snippet}\
             spec:\n  ingressClassName: nginx\n  rules:\n  - host: shared.example.com\n    \
             http:\n      paths:\n      - {{path: /{name}, pathType: Prefix, backend: \
             {{service: {{name: app, port: {{number: 80}}}}}}}}\n"
        )
    };
    let snippet = "  annotations:\n    nginx.ingress.kubernetes.io/server-snippet: \
                   'more_set_headers \"X-Server: old\";'\n";
    let manifests = format!(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {{name: nginx}}\n\
         spec: {{controller: k8s.io/ingress-nginx}}\n{}{}---\napiVersion: v1\nkind: Service\n\
         metadata: {{name: app, namespace: shop}}\nspec: {{ports: [{{name: http, port: 80}}]}}\n",
        ingress("old", 1, snippet),
        ingress("plain", 2, ""),
    );
    std::fs::write(&file, manifests).expect("write input");
    let input = file.display().to_string();
    let out_dir = dir.path().join("out");
    let out = convert(&["-f", &input, "-o", &out_dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plain = std::fs::read_to_string(out_dir.join("httproute-shop-plain.yaml"))
        .expect("the HTTPRoute of the Ingress without the snippet");
    assert!(plain.contains("name: X-Server"), "{plain}");
    let out = convert(&["-f", &input, "--verify"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(", 0 decided differently"), "{stdout}");
}

#[test]
fn app_root_is_written_only_where_the_ingress_holds_a_location() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("root.yaml");
    let ingress = |name: &str, host: &str, path: &str, notes: &str| {
        format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
             namespace: shop\n{notes}spec:\n  ingressClassName: nginx\n  rules:\n  \
             - host: {host}\n    http:\n      paths:\n      - {{path: {path}, \
             pathType: Prefix, backend: {{service: {{name: app, port: {{number: 80}}}}}}}}\n"
        )
    };
    let notes = "  annotations:\n    nginx.ingress.kubernetes.io/app-root: /app\n";
    // site.example.com: subapp holds /app, so its server-wide redirect applies. Files carry
    // no creation time: b-late is newer than a-main by name, and a-main's / is served.
    let manifests = format!(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {{name: nginx}}\n\
         spec: {{controller: k8s.io/ingress-nginx}}\n{}{}{}{}---\napiVersion: v1\nkind: Service\n\
         metadata: {{name: app, namespace: shop}}\nspec: {{ports: [{{name: http, port: 80}}]}}\n",
        ingress("subapp", "site.example.com", "/app", notes),
        ingress("site", "site.example.com", "/", ""),
        ingress("a-main", "other.example.com", "/", ""),
        ingress("b-late", "other.example.com", "/", notes),
    );
    std::fs::write(&file, manifests).expect("write input");
    let input = file.display().to_string();
    let out = convert(&["-f", &input]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let objects = text(&out.stdout);
    assert_eq!(objects.matches("RequestRedirect").count(), 1, "{objects}");
    let report = text(&out.stderr);
    assert!(
        report.contains("app-root: not converted: annotation nginx.ingress.kubernetes.io/app-root: not applied on host other.example.com"),
        "{report}"
    );
    let out = convert(&["-f", &input, "--verify"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(", 0 decided differently"), "{stdout}");
}

#[test]
fn client_certificates_that_differ_are_not_written_and_verify_shows_it() {
    let file = fixtures()
        .join("client-certificates.yaml")
        .display()
        .to_string();
    let out = convert(&["-f", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (objects, report) = (text(&out.stdout), text(&out.stderr));
    assert!(objects.contains("kind: BackendTLSPolicy"), "{objects}");
    assert!(!objects.contains("clientCertificateRef"), "{objects}");
    assert!(
        report.contains(
            "proxy-ssl-secret: converted with a difference: BackendTLSPolicy validation \
             (hostname, caCertificateRefs); the client certificate is not written: the \
             Ingresses of Gateway edgeplane-system/nginx present different Secrets \
             (shop/client-a, shop/client-b)"
        ),
        "{report}"
    );
    // Served, each backend gets its Ingress's certificate; converted, none.
    let out = convert(&["-f", &file, "--verify"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let mut lines = stdout
        .lines()
        .skip_while(|l| !l.starts_with("difference: GET http://pay-a.example.com/"))
        .skip(1);
    let (served, converted) = (lines.next(), lines.next());
    let (served, converted) = (served.unwrap_or_default(), converted.unwrap_or_default());
    assert!(served.contains("presenting shop/client-a"), "{stdout}");
    assert!(converted.starts_with("  converted:"), "{stdout}");
    assert!(!converted.contains("presenting"), "{stdout}");
}
