//! The dashboard in real headless browsers, driven over WebDriver on loopback: Debian's
//! `chromium` by `chromedriver` (package `chromium-driver`), and Firefox ESR (package
//! `firefox-esr`) by `geckodriver` (`cargo install geckodriver`). The real binary serves a
//! directory of manifests with a working and a broken route; the page must list both with
//! their conditions, say why the broken one is broken, count the requests sent through the
//! proxy, trace a request, and filter with its search box. Screenshots go to
//! `target/test-artifacts/` (one set per browser); with `UPDATE_SCREENSHOT=1` Chromium's first
//! one also replaces `docs/dashboard.png`.
//!
//! Without a browser or its driver the test fails, saying what to install.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

#[path = "support/port.rs"]
mod port;
use port::free_port;

const BIN: &str = env!("CARGO_BIN_EXE_edgeplane");
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const FIREFOX: &str = "/usr/bin/firefox-esr";

/// A browser the page is checked in.
#[derive(Clone, Copy, PartialEq)]
enum Browser {
    Chromium,
    Firefox,
}

impl Browser {
    fn name(self) -> &'static str {
        match self {
            Self::Chromium => "chromium",
            Self::Firefox => "firefox",
        }
    }
}

/// `geckodriver` from `PATH` or cargo's bin directory (`cargo install geckodriver`).
fn geckodriver() -> Option<PathBuf> {
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .map(|c| c.join("bin"));
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(cargo_bin)
        .map(|dir| dir.join("geckodriver"))
        .find(|p| p.is_file())
}

/// A child process killed when the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(program: &str, args: &[&str]) -> Killed {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("start {program}: {e}"));
    Killed(child)
}

/// One GET on a fresh connection: (status, body); None when nothing answers.
fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    Some((head.split(' ').nth(1)?.parse().ok()?, body.to_owned()))
}

/// Polls (bounded) until `addr` answers `path` with 200.
fn wait_200(addr: SocketAddr, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if get(addr, path).is_some_and(|(c, _)| c == 200) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{addr}{path} did not answer 200 in time");
}

/// Polls (bounded) until something accepts connections on `addr` (chromedriver keeps its
/// connections open, so a read to the end would wait).
fn wait_listening(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {addr}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Gateway with one HTTP listener, a route `web` to the echo backend and a route `broken`
/// to a Service that does not exist.
fn manifests(port: u16, backend: u16) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: edgeplane}}
spec: {{controllerName: edgeplane.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: edgeplane
  listeners:
  - {{name: http, protocol: HTTP, port: {port}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /web}}}}]
    backendRefs: [{{name: echo, port: 8080}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: broken, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /broken}}}}]
    backendRefs: [{{name: missing, port: 8080}}]
---
apiVersion: v1
kind: Service
metadata: {{name: echo, namespace: default}}
spec:
  ports: [{{name: http, port: 8080, targetPort: {backend}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: echo-1
  namespace: default
  labels: {{kubernetes.io/service-name: echo}}
addressType: IPv4
endpoints:
- addresses: ["127.0.0.1"]
  conditions: {{ready: true}}
ports: [{{name: http, port: {backend}}}]
"#
    )
}

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).expect("artifact directory");
    dir
}

/// The browser and its driver must be there: a missing one fails the test with what to do.
/// Returns the driver's path.
fn require_browser(browser: Browser) -> PathBuf {
    match browser {
        Browser::Chromium => {
            let missing: Vec<&str> = [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")]
                .iter()
                .filter(|(path, _)| !Path::new(path).exists())
                .map(|(_, package)| *package)
                .collect();
            assert!(
                missing.is_empty(),
                "the dashboard test needs a headless browser: {CHROMIUM} and {CHROMEDRIVER} \
                 (missing packages: {}); install them with `apt-get install chromium \
                 chromium-driver` (.ci/run does so)",
                missing.join(", ")
            );
            PathBuf::from(CHROMEDRIVER)
        }
        Browser::Firefox => {
            assert!(
                Path::new(FIREFOX).exists(),
                "the dashboard test needs {FIREFOX}: `apt-get install firefox-esr` (.ci/run \
                 does so)"
            );
            geckodriver().expect(
                "the dashboard test needs geckodriver on PATH or in cargo's bin directory: \
                 `cargo install geckodriver --locked` (.ci/run does so)",
            )
        }
    }
}

/// The WebDriver capabilities of a headless `browser` with its profile in `profile`, at a
/// laptop's window size.
fn capabilities(browser: Browser, profile: &Path) -> serde_json::Map<String, serde_json::Value> {
    let mut caps = serde_json::Map::new();
    match browser {
        Browser::Chromium => caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                    format!("--user-data-dir={}", profile.display()),
                    "--window-size=1366,900",
                ],
            }),
        ),
        Browser::Firefox => caps.insert(
            "moz:firefoxOptions".into(),
            json!({
                "binary": FIREFOX,
                "args": ["-headless", "-profile", profile],
                "prefs": {
                    "app.update.enabled": false,
                    "browser.shell.checkDefaultBrowser": false,
                    "datareporting.policy.dataSubmissionEnabled": false,
                    "network.captive-portal-service.enabled": false,
                    "toolkit.telemetry.enabled": false,
                },
            }),
        ),
    };
    caps
}

/// The text of the first element `css` selects, or "" while there is none.
async fn text_of(client: &fantoccini::Client, css: &str) -> String {
    match client.find(Locator::Css(css)).await {
        Ok(e) => e.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Polls (bounded) until `ok` holds for the text at `css`; returns it.
async fn wait_text(client: &fantoccini::Client, css: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    while Instant::now() < deadline {
        last = text_of(client, css).await;
        if ok(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{css}: no expected text in time; last {last:?}");
}

#[tokio::test]
async fn the_dashboard_shows_routes_reasons_and_live_traffic_in_chromium() {
    dashboard_in(Browser::Chromium).await;
}

#[tokio::test]
async fn the_dashboard_shows_routes_reasons_and_live_traffic_in_firefox() {
    dashboard_in(Browser::Firefox).await;
}

/// Serves the manifests and checks the page in `browser`.
async fn dashboard_in(browser: Browser) {
    let driver_bin = require_browser(browser);
    let (port, backend, admin, dashboard, driver) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    );
    let _echo = spawn(BIN, &["echo", "--listen", &format!("127.0.0.1:{backend}")]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), manifests(port, backend)).unwrap();
    let dashboard_addr: SocketAddr = ([127, 0, 0, 1], dashboard).into();
    let _serve = spawn(
        BIN,
        &[
            "serve",
            "--config-dir",
            dir.path().to_str().unwrap(),
            "--admin-addr",
            &format!("127.0.0.1:{admin}"),
            "--dashboard-addr",
            &dashboard_addr.to_string(),
            "--drain-timeout",
            "1s",
        ],
    );
    wait_200(([127, 0, 0, 1], admin).into(), "/readyz");

    let driver_args = match browser {
        Browser::Chromium => vec![format!("--port={driver}"), "--allowed-ips=127.0.0.1".into()],
        Browser::Firefox => vec![
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            driver.to_string(),
        ],
    };
    let driver_args: Vec<&str> = driver_args.iter().map(String::as_str).collect();
    let _driver = spawn(driver_bin.to_str().expect("utf-8 path"), &driver_args);
    wait_listening(([127, 0, 0, 1], driver).into());
    let profile = tempfile::tempdir().unwrap();
    let client = ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities(browser, profile.path()))
        .connect(&format!("http://127.0.0.1:{driver}"))
        .await
        .unwrap_or_else(|e| panic!("a WebDriver session with headless {}: {e}", browser.name()));
    if browser == Browser::Firefox {
        // Firefox takes its window size over WebDriver: the same as Chromium's.
        client
            .set_window_size(1366, 900)
            .await
            .expect("window size");
    }
    let outcome = check_page(&client, dashboard_addr, port, browser).await;
    let _ = client.close().await;
    outcome.expect("dashboard checks");
}

async fn check_page(
    client: &fantoccini::Client,
    dashboard: SocketAddr,
    port: u16,
    browser: Browser,
) -> Result<(), fantoccini::error::CmdError> {
    let shot_path =
        |what: &str| artifacts().join(format!("dashboard{what}-{}.png", browser.name()));
    client.goto(&format!("http://{dashboard}/")).await?;
    assert_eq!(client.title().await?, "edgeplane dashboard");
    let web = r#"#routes tr[data-key="HTTPRoute/default/web"]"#;
    let broken = r#"#routes tr[data-key="HTTPRoute/default/broken"]"#;
    // The routes, their conditions, and the broken one's reason.
    wait_text(client, &format!("{web} td.accepted"), |t| t == "True").await;
    wait_text(client, &format!("{web} td.resolved"), |t| t == "True").await;
    wait_text(client, &format!("{broken} td.resolved"), |t| t == "False").await;
    let reason = text_of(client, &format!("{broken} td.reason")).await;
    assert!(reason.contains("BackendNotFound"), "{reason}");
    assert!(
        reason.contains("missing"),
        "the message names the Service: {reason}"
    );
    // One script reads the row at once: the page redraws its tables every poll.
    let class = client
        .execute(
            "return document.querySelector(arguments[0]).className",
            vec![json!(broken)],
        )
        .await?;
    assert!(
        class.as_str().unwrap_or_default().contains("broken"),
        "{class}"
    );
    let gateway = text_of(client, "#gateways tbody").await;
    assert!(
        gateway.contains("default/gw") && gateway.contains(&format!("127.0.0.1:{port}")),
        "{gateway}"
    );
    let backends = text_of(client, "#backends tbody").await;
    assert!(
        backends.contains("default/echo:8080") && backends.contains("ready"),
        "{backends}"
    );

    // Real traffic through the proxy raises the page's request counter, without a reload.
    let before: u64 = text_of(client, &format!("{web} td:nth-child(7)"))
        .await
        .parse()
        .unwrap_or(0);
    let proxy: SocketAddr = ([127, 0, 0, 1], port).into();
    for _ in 0..5 {
        assert_eq!(get(proxy, "/web/x").map(|r| r.0), Some(200));
    }
    let counted = wait_text(client, &format!("{web} td:nth-child(7)"), |t| {
        t.parse::<u64>().is_ok_and(|n| n >= before + 5)
    })
    .await;
    println!("requests counted on the page: {before} -> {counted}");
    let shot = client.screenshot().await?;
    std::fs::write(shot_path(""), &shot).expect("save screenshot");
    if browser == Browser::Chromium && std::env::var_os("UPDATE_SCREENSHOT").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/dashboard.png");
        std::fs::write(docs, &shot).expect("save docs/dashboard.png");
    }

    // The tracer: armed from the page, it shows the next matching request's way. The page's
    // subscription opens when its request reaches the server, so requests are sent until one
    // is traced (bounded).
    client
        .find(Locator::Id("trace-path"))
        .await?
        .send_keys("/web/traced")
        .await?;
    client
        .find(Locator::Id("trace-start"))
        .await?
        .click()
        .await?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let steps = loop {
        assert_eq!(get(proxy, "/web/traced").map(|r| r.0), Some(200));
        let steps = text_of(client, "#trace-steps tbody").await;
        if steps.contains("matched") {
            break steps;
        }
        assert!(
            Instant::now() < deadline,
            "the tracer showed no request: {steps}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(steps.contains("GET 127.0.0.1/web/traced"), "{steps}");
    assert!(steps.contains("HTTPRoute/default/web rule 0"), "{steps}");
    assert!(steps.contains("default/echo:8080"), "{steps}");
    assert!(steps.contains("picked the only backendRef"), "{steps}");
    assert!(
        steps.contains("attempt 1") && steps.contains("answered 200"),
        "{steps}"
    );
    let shot = client.screenshot().await?;
    std::fs::write(shot_path("-tracer"), &shot).expect("save screenshot");

    // The search box filters every table.
    let search = client.find(Locator::Id("search")).await?;
    search.send_keys("broken").await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let shown = client
            .execute(
                "return [arguments[0], arguments[1]].map(
                    (css) => document.querySelector(css).offsetParent !== null)",
                vec![json!(web), json!(broken)],
            )
            .await?;
        if shown == json!([false, true]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the filter did not hide the other route"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let shot = client.screenshot().await?;
    std::fs::write(shot_path("-filtered"), &shot).expect("save screenshot");
    Ok(())
}
