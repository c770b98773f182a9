//! Session persistence through the proxy: a client carrying the session cookie (or header)
//! stays on its endpoint, across table swaps, until the endpoint leaves the Service; then it is
//! moved and told its new token.

use std::net::SocketAddr;

use edgeplane::table::{RuleFilters, SessionKind, SessionPersistence};
use http::Method;

use crate::support::client::{empty, h1_client, request, send, Reply, TestClient};
use crate::support::echo::start_fleet;
use crate::support::net::free_addr;
use crate::support::proxy::start;
use crate::support::tables::*;

fn persistence(kind: SessionKind) -> SessionPersistence {
    SessionPersistence {
        name: "sid".into(),
        kind,
        permanent: false,
        absolute_timeout: None,
        idle_timeout: None,
        cookie: Default::default(),
    }
}

fn table_to(
    addr: SocketAddr,
    generation: u64,
    endpoints: &[SocketAddr],
    kind: SessionKind,
) -> edgeplane::table::RouteTable {
    let svc = service("s", endpoints);
    let filters = RuleFilters {
        session: Some(Box::new(persistence(kind))),
        ..Default::default()
    };
    let mut t = single(
        addr,
        vec![rule("r").filters(filters).backend(to(&svc)).build()],
    );
    t.generation = generation;
    t
}

async fn get_with(c: &TestClient, addr: SocketAddr, header: Option<(&str, &str)>) -> Reply {
    let mut req = request(Method::GET, addr, "h", "/");
    if let Some((name, value)) = header {
        req = req.header(name, value);
    }
    send(c, req.body(empty()).expect("request"))
        .await
        .expect("response")
}

/// The `sid=...` pair of a `Set-Cookie` header.
fn cookie_pair(reply: &Reply) -> String {
    let set = reply.header("set-cookie").expect("a session cookie");
    assert!(
        !set.contains("Max-Age") && !set.contains("Expires"),
        "{set}"
    );
    set.split(';').next().expect("pair").to_owned()
}

#[tokio::test]
async fn a_cookie_keeps_the_client_on_its_endpoint_across_table_swaps() {
    let fleet = start_fleet(&["a", "b", "c"]).await;
    let addrs: Vec<SocketAddr> = fleet.iter().map(|e| e.addr).collect();
    let addr = free_addr();
    let p = start(table_to(addr, 1, &addrs, SessionKind::Cookie)).await;
    let c = h1_client();
    let first = get_with(&c, addr, None).await;
    assert_eq!(first.status, 200);
    let pod = first.pod().expect("pod");
    let cookie = cookie_pair(&first);
    for n in 0..15 {
        let r = get_with(&c, addr, Some(("cookie", &cookie))).await;
        assert_eq!(r.pod().as_deref(), Some(pod.as_str()), "request {n}");
        assert!(
            r.header("set-cookie").is_none(),
            "a known session is not rewritten"
        );
    }
    // A new table with the endpoints in another order and one more: the session holds.
    let mut more = addrs.clone();
    more.reverse();
    let extra = start_fleet(&["d"]).await;
    more.push(extra[0].addr);
    p.publish(table_to(addr, 2, &more, SessionKind::Cookie))
        .await;
    for n in 0..10 {
        let r = get_with(&c, addr, Some(("cookie", &cookie))).await;
        assert_eq!(
            r.pod().as_deref(),
            Some(pod.as_str()),
            "after the swap, request {n}"
        );
    }
    // Its endpoint leaves: the client lands elsewhere and gets a new cookie that sticks.
    let rest: Vec<SocketAddr> = fleet
        .iter()
        .filter(|e| e.pod != pod)
        .map(|e| e.addr)
        .collect();
    p.publish(table_to(addr, 3, &rest, SessionKind::Cookie))
        .await;
    let moved = get_with(&c, addr, Some(("cookie", &cookie))).await;
    let new_pod = moved.pod().expect("pod");
    assert_ne!(new_pod, pod);
    let new_cookie = cookie_pair(&moved);
    for _ in 0..10 {
        let r = get_with(&c, addr, Some(("cookie", &new_cookie))).await;
        assert_eq!(r.pod().as_deref(), Some(new_pod.as_str()));
    }
}

#[tokio::test]
async fn a_header_session_is_answered_with_its_token_and_honoured() {
    let fleet = start_fleet(&["a", "b", "c"]).await;
    let addrs: Vec<SocketAddr> = fleet.iter().map(|e| e.addr).collect();
    let addr = free_addr();
    let _p = start(table_to(addr, 1, &addrs, SessionKind::Header)).await;
    let c = h1_client();
    let first = get_with(&c, addr, None).await;
    let token = first.header("sid").expect("session header");
    let pod = first.pod().expect("pod");
    for _ in 0..15 {
        let r = get_with(&c, addr, Some(("sid", &token))).await;
        assert_eq!(r.pod().as_deref(), Some(pod.as_str()));
    }
    // Without the token, requests spread again.
    let mut pods = std::collections::BTreeSet::new();
    for _ in 0..30 {
        pods.insert(get_with(&c, addr, None).await.pod().expect("pod"));
    }
    assert!(pods.len() > 1, "{pods:?}");
}
