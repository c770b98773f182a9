//! Scenarios of profile GATEWAY-UDP: UDPRoutes attached by sectionName and port (beside a TCP
//! listener on the same port number), across namespaces with and without a ReferenceGrant,
//! with a missing backend, and on a listener that does not carry them. Traffic: datagrams to
//! the UDP listeners, answered by the pods' UDP echo with their name.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::time::Instant;

use crate::expect::{Outcome, CONSECUTIVE, CONSISTENCY_TIMEOUT};
use crate::harness::Env;
use crate::status::{gateway_listeners, route_condition_of, wait_status, Cond, Listener, Report};
use crate::INFRA;

const KIND: &str = "UDPRoute";
const GW: &str = "udp-gateway";
/// Wait for one reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(1);

fn listeners_ready(r: &Report) -> Outcome {
    let ok = vec![
        Cond("Accepted", "True", "Accepted"),
        Cond("Programmed", "True", "Programmed"),
        Cond("ResolvedRefs", "True", "ResolvedRefs"),
    ];
    let udp = |name: &'static str| Listener {
        name,
        kinds: &["UDPRoute"],
        attached: 1,
        conditions: ok.clone(),
    };
    let tcp = Listener {
        name: "tcp",
        kinds: &["TCPRoute"],
        attached: 0,
        conditions: ok.clone(),
    };
    let all = [
        udp("udp-1"),
        udp("udp-2"),
        udp("udp-3"),
        udp("udp-4"),
        udp("udp-5"),
        udp("udp-6"),
        Listener {
            attached: 2,
            ..udp("udp-7")
        },
        tcp,
    ];
    gateway_listeners(r, INFRA, GW, &all)
}

fn route(r: &Report, route: &str, c: Cond) -> Outcome {
    route_condition_of(r, KIND, INFRA, route, INFRA, GW, c)
}

fn accepted(r: &Report, name: &str) -> Outcome {
    route(r, name, Cond("Accepted", "True", "Accepted"))?;
    route(r, name, Cond("ResolvedRefs", "True", "ResolvedRefs"))
}

/// One datagram from a new client socket (a new session) to `to`; the reply, if any.
async fn exchange(to: SocketAddr, msg: &str) -> Result<String, String> {
    let client = UdpSocket::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| format!("bind client: {e}"))?;
    client
        .send_to(msg.as_bytes(), to)
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut buf = [0u8; 2048];
    let (n, _) = tokio::time::timeout(REPLY_TIMEOUT, client.recv_from(&mut buf))
        .await
        .map_err(|_| "no reply".to_owned())?
        .map_err(|e| format!("receive: {e}"))?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// [`CONSECUTIVE`] sessions in a row answered by a pod of `backend`, within the consistency
/// timeout.
async fn over_port(env: &Env, port: u16, backend: &str) -> Outcome {
    over(env, GW, port, backend).await
}

async fn over(env: &Env, gw: &str, port: u16, backend: &str) -> Outcome {
    let to = crate::harness::udp_socket_addr(env.gw(gw), port);
    let deadline = Instant::now() + CONSISTENCY_TIMEOUT;
    let mut streak = 0;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let last = match exchange(to, "ping").await {
            Ok(reply) if reply.starts_with(backend) && reply.ends_with(":ping") => Ok(()),
            Ok(reply) => Err(format!("reply {reply:?}, want one from {backend}")),
            Err(e) => Err(e),
        };
        match last {
            Ok(()) => {
                streak += 1;
                if streak == CONSECUTIVE {
                    return Ok(());
                }
            }
            Err(e) if Instant::now() > deadline => {
                return Err(format!("UDP {to}: {e} (after {attempts} attempts)"));
            }
            Err(_) => streak = 0,
        }
    }
}

pub async fn parent_ref_port_and_section_name(env: Arc<Env>) -> Outcome {
    wait_status(&env, "routes attached by sectionName and port", |r| {
        listeners_ready(r)?;
        accepted(r, "by-section")?;
        accepted(r, "by-port")
    })
    .await?;
    over_port(&env, 9101, "infra-backend-v1").await?;
    over_port(&env, 9102, "infra-backend-v2").await
}

pub async fn reference_grant(env: Arc<Env>) -> Outcome {
    wait_status(&env, "granted route resolved", |r| {
        listeners_ready(r)?;
        accepted(r, "granted")
    })
    .await?;
    over_port(&env, 9103, "app-backend-v1").await
}

pub async fn invalid_backend_nonexistent(env: Arc<Env>) -> Outcome {
    wait_status(&env, "nonexistent-backend: BackendNotFound", |r| {
        listeners_ready(r)?;
        route(
            r,
            "nonexistent-backend",
            Cond("Accepted", "True", "Accepted"),
        )?;
        let c = Cond("ResolvedRefs", "False", "BackendNotFound");
        route(r, "nonexistent-backend", c)
    })
    .await
}

pub async fn invalid_cross_namespace_backend(env: Arc<Env>) -> Outcome {
    wait_status(&env, "not-granted: RefNotPermitted", |r| {
        listeners_ready(r)?;
        route(r, "not-granted", Cond("Accepted", "True", "Accepted"))?;
        route(
            r,
            "not-granted",
            Cond("ResolvedRefs", "False", "RefNotPermitted"),
        )
    })
    .await
}

pub async fn not_allowed_by_listeners(env: Arc<Env>) -> Outcome {
    wait_status(&env, "on-tcp-listener: NotAllowedByListeners", |r| {
        listeners_ready(r)?;
        let c = Cond("Accepted", "False", "NotAllowedByListeners");
        route(r, "on-tcp-listener", c)
    })
    .await
}

/// Shares of 1,000 sessions (each from a new client socket) within 5 points of 70/30/0.
pub async fn weighted_routing(env: Arc<Env>) -> Outcome {
    wait_status(&env, "weighted route resolved", |r| {
        listeners_ready(r)?;
        accepted(r, "weighted")
    })
    .await?;
    let to = crate::harness::udp_socket_addr(env.gw(GW), 9106);
    let n = 1000;
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..n {
        let key = match exchange(to, "w").await {
            Ok(reply) => {
                let pod = reply.split(':').next().unwrap_or_default();
                match pod.rsplit_once('-') {
                    Some((svc, _)) => svc.to_owned(),
                    None => pod.to_owned(),
                }
            }
            Err(e) => e,
        };
        *counts.entry(key).or_insert(0) += 1;
    }
    crate::tcproute::weights_hold(&counts, n)
}

/// A parentRef without sectionName or port attaches to every UDP listener of the Gateway.
pub async fn parent_ref_attach_all(env: Arc<Env>) -> Outcome {
    wait_status(&env, "everywhere attached to both listeners", |r| {
        let ok = vec![
            Cond("Accepted", "True", "Accepted"),
            Cond("Programmed", "True", "Programmed"),
            Cond("ResolvedRefs", "True", "ResolvedRefs"),
        ];
        let l = |name: &'static str| Listener {
            name,
            kinds: &["UDPRoute"],
            attached: 1,
            conditions: ok.clone(),
        };
        gateway_listeners(r, INFRA, "udp-all", &[l("first"), l("second")])?;
        let a = Cond("Accepted", "True", "Accepted");
        route_condition_of(r, KIND, INFRA, "everywhere", INFRA, "udp-all", a)
    })
    .await?;
    for port in [9302, 9303] {
        over(&env, "udp-all", port, "infra-backend-v1").await?;
    }
    Ok(())
}

/// Two routes on one listener: both accepted and counted; the older one serves it.
pub async fn multiple_routes_attachment(env: Arc<Env>) -> Outcome {
    wait_status(&env, "older and newer accepted", |r| {
        listeners_ready(r)?;
        accepted(r, "older")?;
        accepted(r, "newer")
    })
    .await?;
    over_port(&env, 9107, "infra-backend-v1").await
}
