//! Retry and session persistence scenarios. `HTTPRouteRetry` is upstream's: the echo backend's
//! retry simulation fails the first `succeedAfter` attempts of each `uuid`, and every probe
//! carries a fresh `uuid` so it is counted on its own. Its connection-error and backend-timeout
//! variants and the session persistence scenarios have no test in v1.6.1; they are ours,
//! written the way the upstream drafts check the same behaviour.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::expect::{Outcome, Req, Want, CONSECUTIVE, CONSISTENCY_TIMEOUT};
use crate::harness::Env;
use crate::status::accepted;
use crate::support::client::{h1_client, send, Reply};
use crate::INFRA;

/// Pause between two rounds of probes that did not all match.
const ROUND_PAUSE: Duration = Duration::from_millis(100);

/// A `uuid` no other probe of this process used.
fn fresh_uuid() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        fastrand::u64(..)
    )
}

/// Probes `path?query&uuid=<fresh>` until [`CONSECUTIVE`] probes in a row get `want`, within
/// [`CONSISTENCY_TIMEOUT`].
async fn retried(ip: IpAddr, path: &str, query: &str, want: &Want) -> Outcome {
    let client = h1_client();
    let deadline = Instant::now() + CONSISTENCY_TIMEOUT;
    loop {
        let mut failure = None;
        for _ in 0..CONSECUTIVE {
            let req = Req::get(&format!("{path}?{query}&uuid={}", fresh_uuid()));
            let outcome = match send(&client, req.build(ip)).await {
                Ok(reply) => want.matches(&req, &reply),
                Err(e) => Err(format!("request failed: {e}")),
            };
            if let Err(e) = outcome {
                failure = Some(e);
                break;
            }
        }
        match failure {
            None => return Ok(()),
            Some(e) if Instant::now() > deadline => return Err(format!("{path}?{query}: {e}")),
            Some(_) => tokio::time::sleep(ROUND_PAUSE).await,
        }
    }
}

async fn all_retried(env: &Env, route: &str, cases: &[(&str, &str, u16)]) -> Outcome {
    accepted(env, INFRA, route, &["same-namespace"]).await?;
    let gw = env.gw("same-namespace");
    for (path, query, status) in cases {
        let want = match status {
            200 => Want::ok("infra-backend-v3"),
            s => Want::status(*s),
        };
        retried(gw, path, query, &want).await?;
    }
    Ok(())
}

pub async fn retry(env: Arc<Env>) -> Outcome {
    const A3: &str = "/retry/code-500-attempts-3";
    const ALL: &str = "/retry/code-all-attempts-2";
    all_retried(
        &env,
        "retries",
        &[
            (A3, "responseCode=500&succeedAfter=2", 200),
            (A3, "responseCode=500&succeedAfter=4", 500),
            (A3, "responseCode=503&succeedAfter=2", 503),
            (ALL, "responseCode=500&succeedAfter=1", 200),
            (ALL, "responseCode=500&succeedAfter=3", 500),
            (ALL, "responseCode=502&succeedAfter=1", 200),
            (ALL, "responseCode=502&succeedAfter=3", 502),
            (ALL, "responseCode=503&succeedAfter=1", 200),
            (ALL, "responseCode=503&succeedAfter=3", 503),
            (ALL, "responseCode=504&succeedAfter=1", 200),
            (ALL, "responseCode=504&succeedAfter=3", 504),
        ],
    )
    .await
}

/// The backend resets the connection instead of answering: retried under a `retry` without
/// codes, up to its attempts; then the client gets 502.
pub async fn retry_connection_error(env: Arc<Env>) -> Outcome {
    const A3: &str = "/retry/no-status-code-attempts-3";
    all_retried(
        &env,
        "retries-connection-error",
        &[
            (A3, "succeedAfter=2", 200),
            (A3, "succeedAfter=3", 200),
            (A3, "succeedAfter=4", 502),
        ],
    )
    .await
}

/// A late attempt ends at `backendRequest` and is retried; all tries end at `request`.
pub async fn retry_with_timeouts(env: Arc<Env>) -> Outcome {
    const BACKEND: &str = "/retry/backend-request-timeout-200ms";
    const REQUEST: &str = "/retry/request-timeout-200ms";
    all_retried(
        &env,
        "retries-with-timeouts",
        &[
            (
                BACKEND,
                "responseCode=500&succeedAfter=2&delayRetry=300ms",
                200,
            ),
            (
                BACKEND,
                "responseCode=500&succeedAfter=3&delayRetry=300ms",
                504,
            ),
            (REQUEST, "responseCode=500&succeedAfter=1", 200),
            (
                REQUEST,
                "responseCode=500&succeedAfter=4&delayRetry=100ms",
                504,
            ),
        ],
    )
    .await
}

/// The first answer starts a session; every later request carrying it reaches the same pod.
async fn sticky(
    ip: IpAddr,
    path: &str,
    token_of: impl Fn(&Reply) -> Result<(String, String), String>,
) -> Outcome {
    let client = h1_client();
    let first = send(&client, Req::get(path).build(ip))
        .await
        .map_err(|e| format!("{path}: {e}"))?;
    if first.status != 200 {
        return Err(format!("{path}: status {}", first.status));
    }
    let pod = first.pod().ok_or("no pod in the answer")?;
    let (name, value) = token_of(&first)?;
    let mut pods = BTreeSet::new();
    for n in 0..10 {
        let req = Req::get(path).header(&name, &value);
        let reply = send(&client, req.build(ip))
            .await
            .map_err(|e| format!("{path}: sticky request {n}: {e}"))?;
        pods.insert(reply.pod().unwrap_or_default());
    }
    if pods.len() != 1 || !pods.contains(&pod) {
        return Err(format!("{path}: session on {pod} reached {pods:?}"));
    }
    Ok(())
}

/// `Set-Cookie` of `name` as a `Cookie` header, checking its lifetime attributes.
fn cookie(reply: &Reply, name: &str, max_age: bool) -> Result<(String, String), String> {
    let set = reply
        .header("set-cookie")
        .filter(|c| c.starts_with(&format!("{name}=")))
        .ok_or_else(|| format!("no {name} cookie in {:?}", reply.headers))?;
    if set.contains("Expires") || set.contains("Max-Age") != max_age {
        return Err(format!(
            "cookie {set:?}: Max-Age expected {max_age}, no Expires"
        ));
    }
    let pair = set.split(';').next().unwrap_or_default().to_owned();
    Ok(("cookie".into(), pair))
}

pub async fn session_persistence(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "session-persistence", &["same-namespace"]).await?;
    let gw = env.gw("same-namespace");
    // The route serves before the session checks start.
    crate::expect::check(
        gw,
        &Req::get("/session/cookie"),
        &Want::ok("infra-backend-v1"),
    )
    .await?;
    sticky(gw, "/session/cookie", |r| cookie(r, "sticky", false)).await?;
    sticky(gw, "/session/permanent", |r| cookie(r, "kept", true)).await?;
    sticky(gw, "/session/header", |r| {
        let token = r.header("x-session").ok_or("no x-session header")?;
        Ok(("x-session".into(), token))
    })
    .await
}
