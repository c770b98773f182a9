//! `Programmed` follows what the listener manager bound: an address that cannot be bound and a
//! port held by another process, both reported and both recovered without a restart; a
//! `--port-map`ped listener binds its local port and keeps its own port in status and redirects.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{admin_get, echo_fleet, get, ip, route, serve, service, test_net, write};

/// Longest wait for a status change: the retry back-off starts at 1 s and is capped at 30 s.
const RECOVERY: Duration = Duration::from_secs(40);

fn manifests(addresses: &[IpAddr], backend: &[SocketAddr]) -> String {
    let addresses: Vec<String> = addresses
        .iter()
        .map(|a| format!("{{type: IPAddress, value: \"{a}\"}}"))
        .collect();
    let addresses = if addresses.is_empty() {
        String::new()
    } else {
        format!("  addresses: [{}]\n", addresses.join(", "))
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: edge}}\n\
         spec: {{controllerName: edgeplane.dev/gateway-controller}}\n\
         ---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw}}\n\
         spec:\n  gatewayClassName: edge\n{addresses}  listeners:\n\
         \x20 - {{name: http, port: 8080, protocol: HTTP}}\n{}{}",
        service("v1", backend),
        route("r", "/", "v1"),
    )
}

/// The Gateway's status as `/debug/status` serves it.
async fn gateway(dashboard: SocketAddr) -> Value {
    let (status, body) = admin_get(dashboard, "/debug/status")
        .await
        .expect("debug status");
    assert_eq!(status, 200, "{body}");
    let all: Value = serde_json::from_str(&body).expect("status JSON");
    all.as_array()
        .and_then(|a| {
            a.iter()
                .find(|e| e["kind"] == "Gateway" && e["name"] == "gw")
        })
        .map(|e| e["status"].clone())
        .unwrap_or_else(|| panic!("no Gateway in {body}"))
}

fn programmed(conditions: &Value) -> &Value {
    conditions
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Programmed"))
        .unwrap_or(&Value::Null)
}

/// Polls `/debug/status` until the Gateway's `Programmed` has `status`; returns that status.
async fn wait_programmed(admin: SocketAddr, status: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let gw = gateway(admin).await;
        if programmed(&gw["conditions"])["status"] == status {
            return gw;
        }
        assert!(
            Instant::now() < deadline,
            "Gateway never Programmed={status}: {gw}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn addresses(gw: &Value) -> Vec<String> {
    gw["addresses"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["value"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn unusable_address_is_reported_until_removed() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    // TEST-NET-1 is never local: binding it fails with EADDRNOTAVAIL and sends nothing.
    let unusable: IpAddr = "192.0.2.10".parse().expect("ip");
    let usable = ip(net, 2);
    write(dir.path(), "all.yaml", &manifests(&[unusable, usable], &v1));
    let server = serve(dir.path(), net).await;

    let gw = wait_programmed(server.dashboard, "False", Duration::from_secs(10)).await;
    let cond = programmed(&gw["conditions"]);
    assert_eq!(cond["reason"], "AddressNotUsable", "{gw}");
    let message = cond["message"].as_str().unwrap_or("");
    assert!(message.contains("192.0.2.10:8080"), "{message}");
    assert!(message.contains("os error 99"), "{message}");
    let listener = programmed(&gw["listeners"][0]["conditions"]);
    assert_eq!(
        (&listener["status"], &listener["reason"]),
        (&"False".into(), &"Pending".into()),
        "{gw}"
    );
    assert_eq!(addresses(&gw), [usable.to_string()], "only bound addresses");
    assert_eq!(
        programmed(&gw["conditions"])["observedGeneration"],
        gw["conditions"][0]["observedGeneration"]
    );
    // The usable address serves meanwhile.
    let (status, body) = get(SocketAddr::new(usable, 8080), "/").await.expect("get");
    assert_eq!(status, 200, "{body}");

    write(dir.path(), "all.yaml", &manifests(&[usable], &v1));
    let gw = wait_programmed(server.dashboard, "True", Duration::from_secs(10)).await;
    assert_eq!(programmed(&gw["conditions"])["reason"], "Programmed");
    assert_eq!(
        programmed(&gw["listeners"][0]["conditions"])["status"],
        "True"
    );
    assert_eq!(addresses(&gw), [usable.to_string()]);
    let (status, _) = get(SocketAddr::new(usable, 8080), "/").await.expect("get");
    assert_eq!(status, 200);
}

#[tokio::test]
async fn port_in_use_recovers_when_freed() {
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "all.yaml", &manifests(&[], &v1));
    // `serve` binds Gateways without addresses on net.1; another process holds its port.
    let socket = SocketAddr::new(ip(net, 1), 8080);
    let occupier = std::net::TcpListener::bind(socket).expect("occupy the port");
    let server = serve(dir.path(), net).await;

    let gw = wait_programmed(server.dashboard, "False", Duration::from_secs(10)).await;
    let cond = programmed(&gw["conditions"]);
    assert_eq!(cond["reason"], "AddressNotUsable", "{gw}");
    assert!(
        cond["message"]
            .as_str()
            .is_some_and(|m| m.contains(&socket.to_string())),
        "{gw}"
    );
    assert_eq!(
        programmed(&gw["listeners"][0]["conditions"])["status"],
        "False"
    );
    assert!(addresses(&gw).is_empty(), "nothing bound: {gw}");
    let failed_at = programmed(&gw["conditions"])["lastTransitionTime"].clone();

    drop(occupier);
    let gw = wait_programmed(server.dashboard, "True", RECOVERY).await;
    assert_eq!(
        programmed(&gw["listeners"][0]["conditions"])["status"],
        "True",
        "{gw}"
    );
    assert_eq!(addresses(&gw), [socket.ip().to_string()]);
    assert_ne!(
        programmed(&gw["conditions"])["lastTransitionTime"],
        failed_at,
        "the transition is stamped when it happens"
    );
    let (status, body) = get(socket, "/").await.expect("served after the retry");
    assert_eq!(status, 200, "{body}");
}

/// `--port-map 80=18080`: a Gateway listening on port 80 is served on local port 18080, which
/// needs no privilege; its status is the one of port 80 and a redirect without a port keeps
/// port 80 (the default, so the `Location` names none), never the local port.
#[tokio::test]
async fn port_map_binds_local_ports_and_keeps_listener_ports() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let net = test_net();
    let v1 = echo_fleet(net, 10, &["v1-a"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let redirect = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
         metadata: {name: moved}\nspec:\n  parentRefs: [{name: gw}]\n  rules:\n\
         \x20 - matches: [{path: {type: PathPrefix, value: /moved}}]\n\
         \x20   filters: [{type: RequestRedirect, requestRedirect: {hostname: moved.example}}]\n";
    let text = manifests(&[], &v1).replace("port: 8080,", "port: 80,") + redirect;
    write(dir.path(), "all.yaml", &text);
    let server = super::serve_with(
        dir.path(),
        net,
        &["--port-map", "80=18080"],
        std::process::Stdio::inherit(),
    )
    .await;

    let gw = wait_programmed(server.dashboard, "True", Duration::from_secs(10)).await;
    assert_eq!(gw["listeners"][0]["name"], "http", "{gw}");
    assert_eq!(
        programmed(&gw["listeners"][0]["conditions"])["status"],
        "True"
    );
    assert_eq!(addresses(&gw), [ip(net, 1).to_string()]);
    let local = SocketAddr::new(ip(net, 1), 18080);
    let (status, body) = get(local, "/").await.expect("served on the local port");
    assert_eq!(status, 200, "{body}");
    assert!(
        tokio::net::TcpStream::connect(SocketAddr::new(ip(net, 1), 80))
            .await
            .is_err(),
        "port 80 itself is not bound"
    );

    let mut s = tokio::net::TcpStream::connect(local)
        .await
        .expect("connect");
    s.write_all(b"GET /moved/x HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n")
        .await
        .expect("send");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut raw))
        .await
        .expect("answer in time")
        .expect("read");
    let head = String::from_utf8_lossy(&raw).to_lowercase();
    assert!(head.starts_with("http/1.1 302"), "{head}");
    assert!(
        head.contains("\r\nlocation: http://moved.example/moved/x\r\n"),
        "{head}"
    );
}
