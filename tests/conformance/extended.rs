//! Extended GATEWAY-HTTP scenarios that need no TLS: matching by query and method, header
//! edits, mirrors, timeouts, parentRef port, backend protocols, named
//! rules, CORS and the Gateway address and port features.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::expect::{check, check_all, Outcome, Req, Want};
use crate::harness::Env;
use crate::status::{accepted, cond, gateway_ready, wait_status};
use crate::INFRA;

pub async fn query_param_matching(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "by-query", &["same-namespace"]).await?;
    let cases = [
        (Req::get("/?pet=cat"), Want::ok("infra-backend-v1")),
        (Req::get("/?pet=dog"), Want::ok("infra-backend-v2")),
        (Req::get("/?pet=dog&size=big"), Want::ok("infra-backend-v3")),
        (Req::get("/?size=big&pet=dog"), Want::ok("infra-backend-v3")),
        (
            Req::get("/?pet=dog&size=small"),
            Want::ok("infra-backend-v2"),
        ),
        (
            Req::get("/shop?sort=price&pet=cat"),
            Want::ok("infra-backend-v3"),
        ),
        (Req::get("/?pet=bird"), Want::status(404)),
        (Req::get("/?PET=cat"), Want::status(404)),
        (Req::get("/"), Want::status(404)),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn method_matching(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "by-method", &["same-namespace"]).await?;
    let cases = [
        (Req::get("/").method("POST"), Want::ok("infra-backend-v1")),
        (Req::get("/"), Want::ok("infra-backend-v2")),
        (
            Req::get("/orders/7").method("DELETE"),
            Want::ok("infra-backend-v3"),
        ),
        (
            Req::get("/").method("PUT").header("tier", "gold"),
            Want::ok("infra-backend-v3"),
        ),
        (Req::get("/").method("PUT"), Want::status(404)),
        (Req::get("/").method("DELETE"), Want::status(404)),
        (Req::get("/").method("HEAD"), Want::status(404)),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn response_header_modifier(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "response-edits", &["same-namespace"]).await?;
    let ok = || Want::ok("infra-backend-v1");
    let cases = [
        (Req::get("/set"), ok().resp_header("x-served-by", "edge")),
        (
            Req::get("/add"),
            ok().resp_header("x-trace", "one")
                .resp_header("x-trace-two", "two"),
        ),
        (Req::get("/remove"), ok().resp_absent("content-type")),
        (
            Req::get("/replace"),
            ok().resp_header("content-type", "text/plain"),
        ),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn backend_request_header_modifier(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "per-backend-edits", &["same-namespace"]).await?;
    let cases = [
        (
            Req::get("/only-v1")
                .header("X-Drop", "x")
                .header("X-Backend", "client"),
            Want::ok("infra-backend-v1")
                .header("X-Backend", "v1")
                .absent("X-Drop"),
        ),
        (
            Req::get("/rule-and-backend"),
            Want::ok("infra-backend-v2")
                .header("X-Rule", "rule")
                .header("X-Backend", "v2"),
        ),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

/// Waits (bounded) until the pods of `svc` logged a request for `path`, returning it.
async fn mirrored(
    env: &Env,
    svc: &str,
    path: &str,
) -> Result<edgeplane::devtools::echo::LoggedRequest, String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(r) = env.logged(svc).into_iter().find(|r| r.path == path) {
            return Ok(r);
        }
        if Instant::now() > deadline {
            return Err(format!("{svc} never received the mirrored request {path}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn request_mirror(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "mirrored", &["same-namespace"]).await?;
    let gw = env.gw("same-namespace");
    check(gw, &Req::get("/mirror/one"), &Want::ok("infra-backend-v1")).await?;
    mirrored(&env, "infra-backend-v2", "/mirror/one").await?;
    check(
        gw,
        &Req::get("/mirror-and-edit"),
        &Want::ok("infra-backend-v1").header("X-Edited", "yes"),
    )
    .await?;
    let copy = mirrored(&env, "infra-backend-v2", "/mirror-and-edit").await?;
    if !copy
        .headers
        .iter()
        .any(|(n, v)| n == "x-edited" && v == "yes")
    {
        return Err(format!(
            "mirror lacks the edited header: {:?}",
            copy.headers
        ));
    }
    Ok(())
}

pub async fn multiple_mirrors(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "mirrored-twice", &["same-namespace"]).await?;
    check(
        env.gw("same-namespace"),
        &Req::get("/fanout"),
        &Want::ok("infra-backend-v1"),
    )
    .await?;
    mirrored(&env, "infra-backend-v2", "/fanout").await?;
    mirrored(&env, "infra-backend-v3", "/fanout").await?;
    Ok(())
}

pub async fn percentage_mirror(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "mirrored-sometimes", &["same-namespace"]).await?;
    let gw = env.gw("same-namespace");
    check(
        gw,
        &Req::get("/percent/warmup"),
        &Want::ok("infra-backend-v1"),
    )
    .await?;
    check(
        gw,
        &Req::get("/fraction/warmup"),
        &Want::ok("infra-backend-v1"),
    )
    .await?;
    let n = 400;
    for (path, svc, want) in [
        ("/percent/n", "infra-backend-v2", 0.20),
        ("/fraction/n", "infra-backend-v3", 0.5),
    ] {
        let counts = crate::expect::distribution(gw, &Req::get(path), n).await;
        if counts.get("infra-backend-v1") != Some(&n) {
            return Err(format!(
                "{path}: answers {counts:?}, want all from infra-backend-v1"
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let got = env.logged(svc).iter().filter(|r| r.path == path).count();
        let share = got as f64 / n as f64;
        if (share - want).abs() > 0.08 {
            return Err(format!(
                "{path}: {got} of {n} mirrored, want {want} within 0.08"
            ));
        }
    }
    Ok(())
}

/// The backend answers after `delay`; the route's timeout (500 ms) answers 504 first.
async fn timeouts(env: &Env, route: &str) -> Outcome {
    accepted(env, INFRA, route, &["same-namespace"]).await?;
    let gw = env.gw("same-namespace");
    check(gw, &Req::get("/limited"), &Want::ok("infra-backend-v1")).await?;
    check(gw, &Req::get("/limited?delay=1s"), &Want::status(504)).await?;
    check(
        gw,
        &Req::get("/unlimited?delay=1s"),
        &Want::ok("infra-backend-v1"),
    )
    .await
}

pub async fn request_timeout(env: Arc<Env>) -> Outcome {
    timeouts(&env, "request-deadline").await
}

pub async fn backend_timeout(env: Arc<Env>) -> Outcome {
    timeouts(&env, "backend-deadline").await
}

pub async fn parent_ref_port(env: Arc<Env>) -> Outcome {
    wait_status(&env, "routes attached by port", |r| {
        gateway_ready(r, INFRA, "by-port")?;
        for (route, sections) in [
            ("port-80", &[][..]),
            ("port-8080", &[]),
            ("port-8090-a", &["a-8090"]),
        ] {
            crate::status::routes_accepted_at(r, "by-port", sections, &[(INFRA, route)])?;
        }
        Ok(())
    })
    .await?;
    let gw = env.gw("by-port");
    let at = |host: &str, port: u16| Req::get("/").host(host).port(port);
    let cases = [
        (at("a.port.test", 80), Want::ok("infra-backend-v1")),
        (at("a.port.test", 8080), Want::ok("infra-backend-v2")),
        (at("b.port.test", 8080), Want::ok("infra-backend-v2")),
        (at("a.port.test", 8090), Want::ok("infra-backend-v3")),
        (at("b.port.test", 8090), Want::status(404)),
        (at("b.port.test", 80), Want::status(404)),
    ];
    check_all(gw, &cases).await
}

pub async fn backend_h2c(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "over-h2c", &["same-namespace"]).await?;
    let want = Want::ok("infra-backend-v1").proto("HTTP/2.0");
    check(
        env.gw("same-namespace"),
        &Req::get("/").host("h2c.test"),
        &want,
    )
    .await
}

pub async fn backend_websocket(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "over-websocket", &["same-namespace"]).await?;
    let addr = crate::harness::socket_addr(env.gw("same-namespace"), 80);
    let mut last = String::new();
    for _ in 0..50 {
        match websocket_roundtrip(addr).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("websocket through the Gateway: {last}"))
}

/// Opens a WebSocket upgrade through the Gateway, sends one masked text frame and expects the
/// echo backend to send the same bytes back.
async fn websocket_roundtrip(addr: SocketAddr) -> Result<(), String> {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(
            b"GET /chat HTTP/1.1\r\nHost: ws.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
              Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        )
        .await?;
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 4096 {
            if s.read(&mut byte).await? == 0 {
                break;
            }
            head.push(byte[0]);
        }
        let frame = [
            0x81u8,
            0x85,
            1,
            2,
            3,
            4,
            b'h' ^ 1,
            b'e' ^ 2,
            b'l' ^ 3,
            b'l' ^ 4,
            b'o' ^ 1,
        ];
        s.write_all(&frame).await?;
        let mut back = [0u8; 11];
        s.read_exact(&mut back).await?;
        Ok::<_, std::io::Error>((head, back, frame))
    };
    let (head, back, frame) = tokio::time::timeout(Duration::from_secs(5), io)
        .await
        .map_err(|_| "timed out".to_owned())?
        .map_err(|e| e.to_string())?;
    let head = String::from_utf8_lossy(&head);
    if !head.starts_with("HTTP/1.1 101") {
        return Err(format!("no 101: {head}"));
    }
    if back != frame {
        return Err(format!("echoed {back:?}, want {frame:?}"));
    }
    Ok(())
}

pub async fn named_rule(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "named-rules", &["same-namespace"]).await?;
    let cases = [
        (Req::get("/catalogue"), Want::ok("infra-backend-v1")),
        (Req::get("/anonymous"), Want::ok("infra-backend-v2")),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn cors(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "cross-origin", &["same-namespace"]).await?;
    let preflight = |origin: &str| {
        Req::get("/cors")
            .method("OPTIONS")
            .header("origin", origin)
            .header("access-control-request-method", "GET")
            .header("access-control-request-headers", "x-client-one")
    };
    let allowed = |origin: &str| {
        Want::status(200)
            .resp_header("access-control-allow-origin", origin)
            .resp_header("access-control-allow-credentials", "true")
            .resp_header("access-control-max-age", "600")
    };
    let cases = [
        (
            preflight("https://app.cors.test"),
            allowed("https://app.cors.test"),
        ),
        (
            preflight("https://a.partner.test"),
            allowed("https://a.partner.test"),
        ),
        (
            preflight("https://evil.test"),
            Want::status(200).resp_absent("access-control-allow-origin"),
        ),
        (
            Req::get("/cors").header("origin", "https://app.cors.test"),
            Want::ok("infra-backend-v1")
                .resp_header("access-control-allow-origin", "https://app.cors.test")
                .resp_header("access-control-expose-headers", "x-server-one"),
        ),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn port_8080(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "via-8080", &["on-8080"]).await?;
    check(
        env.gw("on-8080"),
        &Req::get("/").port(8080),
        &Want::ok("infra-backend-v1"),
    )
    .await
}

pub async fn static_addresses(env: Arc<Env>) -> Outcome {
    wait_status(&env, "an address of an unknown type is refused", |r| {
        cond(
            r.gateway(INFRA, "fixed-address")?,
            "Accepted",
            "False",
            "UnsupportedAddress",
        )
    })
    .await?;
    env.apply(
        "scenario.yaml",
        include_str!("manifests/static-addresses-unusable.yaml"),
    )?;
    wait_status(
        &env,
        "an address that cannot be bound is not programmed",
        |r| {
            let gw = r.gateway(INFRA, "fixed-address")?;
            cond(gw, "Accepted", "True", "")?;
            cond(gw, "Programmed", "False", "AddressNotUsable")
        },
    )
    .await?;
    env.apply(
        "scenario.yaml",
        include_str!("manifests/static-addresses-valid.yaml"),
    )?;
    let ip = env.net.ip(200);
    wait_status(&env, "the static address is programmed", |r| {
        gateway_ready(r, INFRA, "fixed-address")?;
        let addrs = &r.gateway(INFRA, "fixed-address")?["addresses"];
        if addrs
            .as_array()
            .is_none_or(|a| !a.iter().any(|x| x["value"] == ip.to_string()))
        {
            return Err(format!("status.addresses {addrs}, want {ip}"));
        }
        Ok(())
    })
    .await?;
    check(ip, &Req::get("/").port(8080), &Want::ok("infra-backend-v1")).await
}

pub async fn listener_isolation(env: Arc<Env>) -> Outcome {
    wait_status(&env, "isolation routes attached", |r| {
        gateway_ready(r, INFRA, "isolated")?;
        for section in ["any", "wild", "deeper", "exact"] {
            let route = format!("iso-{section}");
            crate::status::routes_accepted_at(r, "isolated", &[section], &[(INFRA, &route)])?;
        }
        Ok(())
    })
    .await?;
    let at = |host: &str, path: &str| Req::get(path).host(host);
    let cases = [
        (
            at("one.deep.iso.test", "/exact"),
            Want::ok("infra-backend-v1"),
        ),
        (at("one.deep.iso.test", "/deeper"), Want::status(404)),
        (at("one.deep.iso.test", "/wild"), Want::status(404)),
        (at("one.deep.iso.test", "/any"), Want::status(404)),
        (
            at("two.deep.iso.test", "/deeper"),
            Want::ok("infra-backend-v3"),
        ),
        (at("two.deep.iso.test", "/exact"), Want::status(404)),
        (at("two.deep.iso.test", "/wild"), Want::status(404)),
        (at("x.iso.test", "/wild"), Want::ok("infra-backend-v2")),
        (at("x.iso.test", "/any"), Want::status(404)),
        (at("other.test", "/any"), Want::ok("infra-backend-v1")),
        (at("other.test", "/wild"), Want::status(404)),
    ];
    check_all(env.gw("isolated"), &cases).await
}

pub async fn listener_isolation_intersection(env: Arc<Env>) -> Outcome {
    wait_status(&env, "overlapping routes attached", |r| {
        gateway_ready(r, INFRA, "isolated-overlap")?;
        for section in ["any", "wild", "deeper", "exact"] {
            let route = format!("overlap-{section}");
            let routes = [(INFRA, route.as_str())];
            crate::status::routes_accepted_at(r, "isolated-overlap", &[section], &routes)?;
        }
        Ok(())
    })
    .await?;
    let at = |host: &str, path: &str| Req::get(path).host(host);
    let cases = [
        (at("plain.test", "/any"), Want::ok("infra-backend-v1")),
        (at("plain.test", "/wild"), Want::status(404)),
        (at("x.overlap.test", "/wild"), Want::ok("infra-backend-v2")),
        (at("x.overlap.test", "/any"), Want::status(404)),
        (at("x.overlap.test", "/deeper"), Want::status(404)),
        (
            at("two.deep.overlap.test", "/deeper"),
            Want::ok("infra-backend-v3"),
        ),
        (at("two.deep.overlap.test", "/wild"), Want::status(404)),
        (at("two.deep.overlap.test", "/any"), Want::status(404)),
        (
            at("one.deep.overlap.test", "/exact"),
            Want::ok("infra-backend-v1"),
        ),
        (at("one.deep.overlap.test", "/deeper"), Want::status(404)),
        (at("one.deep.overlap.test", "/wild"), Want::status(404)),
        (at("one.deep.overlap.test", "/any"), Want::status(404)),
    ];
    check_all(env.gw("isolated-overlap"), &cases).await
}

pub async fn address_empty(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "via-any-address", &["any-address"]).await?;
    let s = crate::status::status(&env).await?;
    let g = crate::status::Report(s);
    let addrs = g.gateway(INFRA, "any-address")?["addresses"].clone();
    let ip = addrs[0]["value"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("status.addresses {addrs} has no IP"))?;
    check(ip, &Req::get("/").port(8080), &Want::ok("infra-backend-v1")).await
}
