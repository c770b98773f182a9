//! Standalone mode end to end: the real `edgeplane serve --config-dir` process with N routes
//! (one hostname and one file each) in front of echo backends, for N = 100, 1,000, 5,000 and
//! 10,000 by default (50,000 and more through `STANDALONE_SIZES`). Per size it measures
//!
//! - first load: process start -> `/readyz` 200, and -> the last route written answering 200;
//! - memory: resident set (`VmRSS`) after the first load, in KiB per route;
//! - propagation: a new route file written -> the first 200 from its backend (p50/p99);
//! - churn: K successive single-route edits (each waited for until live; they cycle over 50
//!   routes, each edit giving its route a second rule, so the configuration's size is the
//!   same after the first 50 edits as after the last), then RSS again and its ratio to the
//!   first load, and the mean rebuild time from `/metrics`;
//! - availability: a client on existing routes counting non-2xx answers during all changes;
//! - request time: the median of 200 sequential GETs to the last route written, on one
//!   keep-alive connection, as the client measures it (host lookup included; compare sizes);
//! - the machine's 1-minute load average when the first load and the propagation samples end.
//!
//! `cargo bench --bench standalone`. Environment: `STANDALONE_SIZES=100,1000` (sizes),
//! `STANDALONE_SHAPE=listenersets` (each route on a ListenerSet of its own, with one listener
//! for its hostname, instead of a hostname on the Gateway's listener), `STANDALONE_SAMPLES`
//! (propagation samples, default 50; 20 from 5,000 routes), `STANDALONE_CHANGES` (K, default
//! 1000), `STANDALONE_CHANGE_SECS` (time bound of the K changes, default 900),
//! `STANDALONE_READY_SECS` (time bound of the first load, default 60 s plus 1 s per 200
//! routes), `STANDALONE_LOG=1` (the server's log on stderr), `STANDALONE_BIN=path` (measure
//! another build of `edgeplane`, e.g. to compare two commits).

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

#[path = "standalone/load.rs"]
mod load;
#[path = "standalone/manifests.rs"]
mod manifests;
#[path = "standalone/server.rs"]
mod server;

use std::time::{Duration, Instant};

use manifests::{infrastructure, route, write, Shape};
use server::{load_average, until_served, Server};
use std::net::SocketAddr;

use support::client::{get, h1_client, send, TestClient};

/// How many routes the churn edits, in turn.
const EDITED: usize = 50;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// What one size measured.
struct Row {
    routes: usize,
    ready: Duration,
    first_served: Duration,
    request: Duration,
    load_first: String,
    load_propagation: String,
    first_rss: u64,
    propagation: Vec<Duration>,
    changes: usize,
    rss_50: Option<u64>,
    rss_after: u64,
    mean_rebuild: Option<Duration>,
    sent: u64,
    failed: u64,
}

/// The median time of `REQUESTS` sequential GETs to `host` on one keep-alive client; `None`
/// when one is not a 200.
async fn request_time(client: &TestClient, addr: SocketAddr, host: &str) -> Option<Duration> {
    const REQUESTS: usize = 200;
    let mut times = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let started = Instant::now();
        let reply = send(client, get(addr, host, "/")).await.ok()?;
        times.push(started.elapsed());
        if reply.status != 200 {
            return None;
        }
    }
    times.sort();
    Some(percentile(&times, 0.5))
}

/// Resident memory once deferred frees are done: read after a quiet second.
async fn settled_rss(server: &Server) -> Option<u64> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.rss_kib()
}

async fn measure(
    shape: Shape,
    routes: usize,
    samples: usize,
    changes: usize,
    change_limit: Duration,
) -> Option<Row> {
    let base = support::echo::start_echo("base").await;
    let fresh = support::echo::start_echo("fresh").await;
    let dir = tempfile::tempdir().ok()?;
    write(
        dir.path(),
        "infrastructure.yaml",
        &infrastructure(shape, base.addr, fresh.addr),
    )
    .ok()?;
    for i in 0..routes {
        write(
            dir.path(),
            &format!("base-{i}.yaml"),
            &route(shape, &format!("base-{i}"), "base", None),
        )
        .ok()?;
    }
    let client = h1_client();
    let limit = Duration::from_secs(env("STANDALONE_READY_SECS", 60 + routes / 200) as u64);
    let started = Instant::now();
    let server = Server::start(dir.path()).ok()?;
    if !server.ready(&client, limit).await {
        eprintln!("{routes} routes: never ready");
        return None;
    }
    let ready = started.elapsed();
    let last = format!("base-{}.example", routes - 1);
    if !until_served(&client, server.proxy, (&last, "/"), "base", started + limit).await {
        eprintln!("{routes} routes: the first table never served");
        return None;
    }
    let first_served = started.elapsed();
    let load_first = load_average();
    let request = request_time(&client, server.proxy, &last).await?;
    let first_rss = settled_rss(&server).await?;
    let (count0, sum0) = server.rebuilds(&client).await.unwrap_or((0, 0.0));

    let watched: Vec<String> = [0, routes / 2, routes - 1]
        .iter()
        .map(|i| format!("base-{i}.example"))
        .collect();
    let load = load::Load::start(server.proxy, watched, Duration::from_secs(3600));

    let mut propagation = Vec::with_capacity(samples);
    for k in 0..samples {
        let name = format!("new-{k}");
        let host = format!("{name}.example");
        let started = Instant::now();
        write(
            dir.path(),
            &format!("{name}.yaml"),
            &route(shape, &name, "fresh", None),
        )
        .ok()?;
        if !until_served(
            &client,
            server.proxy,
            (&host, "/"),
            "fresh",
            started + Duration::from_secs(60),
        )
        .await
        {
            eprintln!("{routes} routes: new route {k} never served");
            return None;
        }
        propagation.push(started.elapsed());
        // Let a follow-up rebuild finish before the next sample.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let load_propagation = load_average();

    // K single-route edits, each waited for until live. An edit gives its route a second
    // rule; the edits cycle over EDITED routes, so that after the first EDITED changes the
    // configuration keeps its size and RSS growth shows what changes leave behind, not the
    // rules they add.
    let churn_started = Instant::now();
    let mut done = 0;
    let mut rss_50 = None;
    while done < changes && churn_started.elapsed() < change_limit {
        let i = ((done % EDITED) * 7919) % routes;
        let name = format!("base-{i}");
        let path = format!("v{done}");
        write(
            dir.path(),
            &format!("{name}.yaml"),
            &route(shape, &name, "base", Some(&path)),
        )
        .ok()?;
        let host = format!("{name}.example");
        let deadline = Instant::now() + Duration::from_secs(60);
        if !until_served(
            &client,
            server.proxy,
            (&host, &format!("/{path}")),
            "fresh",
            deadline,
        )
        .await
        {
            eprintln!("{routes} routes: change {done} never served");
            return None;
        }
        done += 1;
        if done == 50 {
            rss_50 = server.rss_kib();
        }
    }
    let (sent, failed, failures) = load.finish().await;
    for f in failures {
        eprintln!("{routes} routes: failed request: {f}");
    }
    let rss_after = settled_rss(&server).await?;
    let mean_rebuild = server.rebuilds(&client).await.and_then(|(count, sum)| {
        let n = count.checked_sub(count0).filter(|n| *n > 0)?;
        Some(Duration::from_secs_f64((sum - sum0) / n as f64))
    });
    propagation.sort();
    Some(Row {
        routes,
        ready,
        first_served,
        request,
        load_first,
        load_propagation,
        first_rss,
        propagation,
        changes: done,
        rss_50,
        rss_after,
        mean_rebuild,
        sent,
        failed,
    })
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    let sizes: Vec<usize> = std::env::var("STANDALONE_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 1000, 5000, 10000]);
    let changes = env("STANDALONE_CHANGES", 1000);
    let change_limit = Duration::from_secs(env("STANDALONE_CHANGE_SECS", 900) as u64);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let shape = Shape::from_env();
    println!("{}, one file each", shape.label());
    println!("| routes | ready | last route served | load | request p50 | RSS first load | per route | propagation samples | p50 | p99 | max | load | changes | RSS after 50 | RSS after changes | growth | mean rebuild | requests | non-2xx |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for routes in sizes.into_iter().filter(|n| *n > 0) {
        let samples = env("STANDALONE_SAMPLES", if routes >= 5000 { 20 } else { 50 }).max(1);
        let Some(r) = runtime.block_on(measure(shape, routes, samples, changes, change_limit))
        else {
            println!("| {routes} | failed ||||||||||||||||||");
            continue;
        };
        println!(
            "| {} | {} | {} | {} | {:.0} µs | {} | {:.1} KiB | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {} |",
            r.routes,
            secs(r.ready),
            secs(r.first_served),
            r.load_first,
            r.request.as_secs_f64() * 1e6,
            mib(r.first_rss),
            r.first_rss as f64 / r.routes as f64,
            r.propagation.len(),
            ms(percentile(&r.propagation, 0.5)),
            ms(percentile(&r.propagation, 0.99)),
            ms(r.propagation[r.propagation.len() - 1]),
            r.load_propagation,
            r.changes,
            r.rss_50.map_or("-".to_owned(), mib),
            mib(r.rss_after),
            r.rss_after as f64 / r.first_rss as f64,
            r.mean_rebuild.map_or("-".to_owned(), ms),
            r.sent,
            r.failed,
        );
    }
}
