//! Zero failed requests under churn, standalone: 1,000 route additions, edits and deletions by
//! file writes and 100 endpoint rotations behind a Service, while clients send continuously
//! to routes that stay valid.

use std::net::SocketAddr;
use std::time::Instant;

use crate::standalone::{
    gateway, route, service, write, write_atomic, Load, Standalone, HTTP_PORT,
};
use crate::support::echo::{start_echo, Echo};

/// Files the churned routes live in, and routes per file.
const FILES: usize = 10;
const ROUTES_PER_FILE: usize = 5;
/// Route changes to make (each file write adds, edits or deletes `ROUTES_PER_FILE` routes).
const ROUTE_CHANGES: usize = 1000;
const ROTATIONS: usize = 100;

/// The stable routes the clients use: one to the rotating Service, one to a fixed one.
fn stable_routes() -> String {
    format!(
        "{}{}",
        route("stable-rot", "rot.example", "/", "rot"),
        route("stable-web", "web.example", "/", "web")
    )
}

/// The routes of churn file `f` at `version` (`None`: deleted).
fn churn_file(f: usize, version: Option<usize>) -> String {
    let Some(v) = version else {
        return "# no routes\n".to_owned();
    };
    (0..ROUTES_PER_FILE)
        .map(|i| {
            route(
                &format!("churn-{f}-{i}"),
                &format!("churn-{f}.example"),
                &format!("/v{v}/{i}"),
                "web",
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_and_endpoint_churn_fails_no_request() {
    let web = start_echo("web").await;
    let mut rot: Echo = start_echo("rot-0").await;
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    write(
        d,
        "base.yaml",
        &format!("{}{}", gateway(false), service("web", &[web.addr])),
    );
    write(d, "rot.yaml", &service("rot", &[rot.addr]));
    write(d, "stable.yaml", &stable_routes());
    for f in 0..FILES {
        write(d, &format!("churn-{f}.yaml"), &churn_file(f, None));
    }
    let stack = Standalone::start(dir).await;
    stack.wait_status("rot.example", "/", 200).await;
    stack.wait_status("web.example", "/", 200).await;
    let load = Load::start(
        stack.addr(HTTP_PORT),
        &[
            ("rot.example", "/x"),
            ("web.example", "/y"),
            ("rot.example", "/z"),
        ],
    );
    let started = Instant::now();

    // Routes: each write adds, edits or deletes the 5 routes of one file, alternating in-place
    // and atomic writes; each change is waited for so every one of them is served.
    let mut versions: Vec<Option<usize>> = vec![None; FILES];
    let mut changes = 0;
    let mut writes = 0;
    let mut rotations = 0;
    let mut retired: Vec<Echo> = Vec::new();
    while changes < ROUTE_CHANGES {
        let f = writes % FILES;
        versions[f] = match versions[f] {
            None => Some(writes),
            Some(_) if (writes / FILES) % 3 == 2 => None,
            Some(_) => Some(writes),
        };
        let text = churn_file(f, versions[f]);
        let generation = stack.generation();
        let file = format!("churn-{f}.yaml");
        if writes % 2 == 0 {
            write(stack.dir.path(), &file, &text);
        } else {
            write_atomic(stack.dir.path(), &file, &text);
        }
        stack.wait_past(generation).await;
        changes += ROUTES_PER_FILE;
        writes += 1;

        // Every 10 route changes, one rolling update of the rotating Service's endpoint:
        // the new endpoint is added (ready), then the old one removed, then stopped.
        if writes % 2 == 0 && rotations < ROTATIONS {
            rotations += 1;
            let next = start_echo(&format!("rot-{rotations}")).await;
            rotate(&stack, &[rot.addr, next.addr]).await;
            rotate(&stack, &[next.addr]).await;
            retired.push(std::mem::replace(&mut rot, next));
            // The old endpoint stops a moment after it left the table (in-flight requests
            // that picked it finish first).
            if retired.len() > 2 {
                retired.remove(0);
            }
        }
    }
    while rotations < ROTATIONS {
        rotations += 1;
        let next = start_echo(&format!("rot-{rotations}")).await;
        rotate(&stack, &[rot.addr, next.addr]).await;
        rotate(&stack, &[next.addr]).await;
        retired.push(std::mem::replace(&mut rot, next));
        if retired.len() > 2 {
            retired.remove(0);
        }
    }
    let elapsed = started.elapsed();
    // The last state of every churn file is served.
    for (f, v) in versions.iter().enumerate() {
        let host = format!("churn-{f}.example");
        match v {
            Some(v) => stack.wait_status(&host, &format!("/v{v}/4"), 200).await,
            None => stack.wait_status(&host, "/v0/0", 404).await,
        }
    }
    let (sent, failed, failures) = load.finish().await;
    println!(
        "standalone churn: {changes} route changes in {writes} writes and {rotations} endpoint \
         rotations in {:.1} s ({:.0} route changes/s); {sent} requests, {failed} failed",
        elapsed.as_secs_f64(),
        changes as f64 / elapsed.as_secs_f64(),
    );
    assert!(sent > 100, "the clients sent only {sent} requests");
    assert_eq!(failed, 0, "{failures:#?}");
    drop(retired);
    stack.stop().await;
}

/// Rewrites the rotating Service's EndpointSlices to `endpoints` and waits for the table.
async fn rotate(stack: &Standalone, endpoints: &[SocketAddr]) {
    let generation = stack.generation();
    write(stack.dir.path(), "rot.yaml", &service("rot", endpoints));
    stack.wait_past(generation).await;
}
