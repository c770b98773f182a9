//! Admin and dashboard servers over real sockets, against a `Published` filled by hand.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use edgeplane::admin::serve_admin;
use edgeplane::dashboard::{serve_dashboard, Dashboard};
use edgeplane::metrics::Metrics;
use edgeplane::reconcile::Published;
use edgeplane::status::{ObjectKind, ObjectStatus, StatusReport};
use edgeplane::table::{
    BackendSet, ListenerTable, RequestMatch, RouteRef, RouteRule, RouteTable, RuleFilters,
    VirtualHost,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// One HTTP/1.1 request on a fresh connection, read to the end (bounded in time).
async fn request(addr: SocketAddr, method: &str, path: &str) -> Reply {
    request_with_host(addr, method, path, &addr.to_string()).await
}

/// Like [`request`] with the given `Host` header.
async fn request_with_host(addr: SocketAddr, method: &str, path: &str, host: &str) -> Reply {
    let fut = async {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        s.write_all(head.as_bytes()).await.expect("write");
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.expect("read");
        raw
    };
    let raw = tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .expect("admin answered in time");
    let text = String::from_utf8(raw).expect("utf-8 reply");
    let (head, body) = text.split_once("\r\n\r\n").expect("complete head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn table() -> RouteTable {
    let bind: SocketAddr = "127.0.0.1:18080".parse().unwrap();
    let rule = Arc::new(RouteRule {
        route: Arc::new(RouteRef::new("HTTPRoute", "default", "web")),
        created: 0,
        rule_index: 0,
        match_index: 0,
        rule_name: None,
        matcher: RequestMatch::any(),
        filters: Arc::new(RuleFilters::default()),
        backends: Arc::new(BackendSet::default()),
    });
    let host = VirtualHost::new("example.com".into(), vec![rule]);
    let listener = ListenerTable::new(
        bind,
        vec![edgeplane::table::SocketSource::gateway(
            "default", "gw", "http",
        )],
        vec![host],
    );
    let mut t = RouteTable {
        generation: 7,
        ..RouteTable::default()
    };
    t.listeners.insert(bind, Arc::new(listener));
    t
}

fn status() -> StatusReport {
    StatusReport {
        entries: vec![ObjectStatus {
            kind: ObjectKind::Gateway,
            namespace: Some("default".into()),
            name: "gw".into(),
            generation: Some(2),
            status: json!({"conditions": [{"type": "Accepted", "status": "True",
                "reason": "Accepted", "message": "", "observedGeneration": 2,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}], "listeners": []})
            .into(),
        }],
    }
}

async fn start() -> (SocketAddr, Arc<Published>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let published = Published::new(Metrics::new());
    let p = published.clone();
    let task = tokio::spawn(async move {
        let _ = serve_admin(listener, p).await;
    });
    (addr, published, task)
}

/// The dashboard server over its own `Published`.
async fn start_dashboard() -> (SocketAddr, Arc<Published>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let published = Published::new(Metrics::new());
    let dashboard = Dashboard::new(published.clone(), None);
    let task = tokio::spawn(async move {
        let _ = serve_dashboard(listener, dashboard).await;
    });
    (addr, published, task)
}

#[tokio::test]
async fn health_and_readiness() {
    let (addr, published, task) = start().await;
    let r = request(addr, "GET", "/healthz").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.trim(), "ok");
    let r = request(addr, "GET", "/readyz").await;
    assert_eq!(r.status, 503, "not ready before the first publish");
    published.mark_ready();
    let r = request(addr, "GET", "/readyz").await;
    assert_eq!(r.status, 200);
    assert_eq!(request(addr, "GET", "/nowhere").await.status, 404);
    assert_eq!(request(addr, "POST", "/healthz").await.status, 405);
    task.abort();
}

#[tokio::test]
async fn metrics_are_prometheus_text() {
    let (addr, published, task) = start().await;
    published.metrics().table_generation.set(7);
    published
        .metrics()
        .http
        .requests
        .with_label_values(&[
            "default/gw",
            "http",
            "HTTPRoute/default/web",
            "0",
            "default/web:80",
            "GET",
            "200",
        ])
        .inc();
    published
        .metrics()
        .config_errors
        .with_label_values(&["file"])
        .inc();
    let r = request(addr, "GET", "/metrics").await;
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    for needle in [
        "# TYPE edgeplane_table_generation gauge",
        "edgeplane_table_generation 7",
        "edgeplane_table_rules",
        "edgeplane_requests_total{backend=\"default/web:80\",code=\"200\",gateway=\"default/gw\",listener=\"http\",method=\"GET\",route=\"HTTPRoute/default/web\",rule=\"0\"} 1",
        "edgeplane_build_info{commit=\"",
        "edgeplane_reconciles_total{result=\"ok\"} 0",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "edgeplane_config_errors_total{source=\"file\"} 1",
    ] {
        assert!(r.body.contains(needle), "missing {needle} in:\n{}", r.body);
    }
    task.abort();
}

#[tokio::test]
async fn the_admin_root_lists_its_endpoints_and_debug_views_moved() {
    let (addr, _published, task) = start().await;
    let r = request(addr, "GET", "/").await;
    assert_eq!(r.status, 200);
    for needle in [
        "/metrics",
        "/healthz",
        "/readyz",
        "--dashboard-addr",
        "127.0.0.1:9902",
    ] {
        assert!(r.body.contains(needle), "no {needle} in {}", r.body);
    }
    for path in ["/debug/config", "/debug/status"] {
        let r = request(addr, "GET", path).await;
        assert_eq!(r.status, 404, "{path}");
        assert!(
            r.body.contains("moved to the dashboard server") && r.body.contains(path),
            "{}",
            r.body
        );
        assert!(!r.body.contains("listeners"), "nothing leaks: {}", r.body);
    }
    task.abort();
}

#[tokio::test]
async fn debug_views_show_what_is_published() {
    let (addr, published, task) = start_dashboard().await;
    let r = request(addr, "GET", "/debug/status").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!([]), "empty before the first publish");

    published.publish_table(Arc::new(table()));
    published.publish_status(status().into());

    let r = request(addr, "GET", "/debug/config").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let config = r.json();
    assert_eq!(config["generation"], 7);
    let listener = &config["listeners"][0];
    assert_eq!(listener["bind"], "127.0.0.1:18080");
    assert_eq!(listener["sources"], json!(["default/gw/http"]));
    assert_eq!(listener["hosts"][0]["hostname"], "example.com");
    assert_eq!(listener["hosts"][0]["rules"][0]["route"]["name"], "web");

    let r = request(addr, "GET", "/debug/status").await;
    assert_eq!(r.header("content-type"), Some("application/json"));
    let entries = r.json();
    let entry = &entries[0];
    assert_eq!(entries.as_array().map(Vec::len), Some(1));
    for key in [
        "apiVersion",
        "kind",
        "namespace",
        "name",
        "generation",
        "status",
    ] {
        assert!(entry.get(key).is_some(), "entry lacks {key}: {entry}");
    }
    assert_eq!(entry["kind"], "Gateway");
    assert_eq!(entry["generation"], 2);
    assert_eq!(entry["status"]["conditions"][0]["type"], "Accepted");
    assert_eq!(entry["status"]["conditions"][0]["observedGeneration"], 2);
    task.abort();
}

#[tokio::test]
async fn the_dashboard_api_draws_the_publication() {
    let (addr, published, task) = start_dashboard().await;
    published.publish_table(Arc::new(table()));
    published.publish_status(status().into());
    published.mark_ready();

    let page = request(addr, "GET", "/").await;
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(
        page.body.contains("<script src=\"/app.js\">"),
        "{}",
        page.body
    );

    let o = request(addr, "GET", "/api/overview").await.json();
    assert_eq!(
        (o["generation"].clone(), o["ready"].clone()),
        (json!(7), json!(true))
    );
    let gw = &o["gateways"][0];
    assert_eq!(
        (gw["name"].as_str(), gw["accepted"].as_str()),
        (Some("gw"), Some("True"))
    );

    let tree = request(addr, "GET", "/api/routes").await.json();
    let listener = &tree["gateways"][0]["listeners"][0];
    assert_eq!(tree["gateways"][0]["name"], "default/gw");
    assert_eq!(listener["bind"], "127.0.0.1:18080");
    assert_eq!(listener["hosts"][0]["hostname"], "example.com");
    assert_eq!(
        listener["hosts"][0]["rules"][0]["route"],
        "HTTPRoute/default/web"
    );

    let traffic = request(addr, "GET", "/api/traffic").await.json();
    assert!(traffic["routes"].is_array(), "{traffic}");
    task.abort();
}

#[tokio::test]
async fn host_header_is_checked_against_dns_rebinding() {
    let (admin, _published, admin_task) = start().await;
    let (dashboard, published, dashboard_task) = start_dashboard().await;
    published.publish_table(Arc::new(table()));
    for (addr, path) in [(admin, "/healthz"), (dashboard, "/debug/config")] {
        let port = addr.port();
        for host in [
            addr.to_string(),
            format!("localhost:{port}"),
            "127.0.0.1".to_owned(),
            format!("[::1]:{port}"),
        ] {
            let r = request_with_host(addr, "GET", path, &host).await;
            assert_eq!(r.status, 200, "{path} Host: {host}");
        }
        for host in [
            format!("rebind.attacker.example:{port}"),
            "admin".to_owned(),
            format!("10.0.0.1:{port}"),
        ] {
            for p in [path, "/api/overview", "/debug/config"] {
                let r = request_with_host(addr, "GET", p, &host).await;
                assert_eq!(r.status, 403, "{p} Host: {host}");
                assert!(!r.body.contains("listeners"), "nothing leaks: {}", r.body);
            }
        }
    }
    admin_task.abort();
    dashboard_task.abort();
}

#[path = "admin/metrics_doc.rs"]
mod metrics_doc;
