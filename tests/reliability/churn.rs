//! Zero failed requests under churn, standalone: 1,000 route additions, edits and deletions by
//! file writes and 100 endpoint rotations behind a Service, while clients send continuously
//! to routes that stay valid.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

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

/// What one churn run did.
#[derive(Debug)]
pub struct ChurnReport {
    pub route_changes: usize,
    pub writes: usize,
    pub rotations: usize,
    /// From the first change to the last one live.
    pub elapsed: Duration,
    pub sent: u64,
    pub failed: u64,
    /// The first failures, for the assertion message.
    pub failures: Vec<String>,
}

impl std::fmt::Display for ChurnReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.elapsed.as_secs_f64();
        write!(
            f,
            "{} route changes in {} file writes and {} endpoint rotations in {secs:.1} s \
             ({:.0} route changes/s, {:.0} file changes live/s); {} requests, {} non-2xx \
             or failed",
            self.route_changes,
            self.writes,
            self.rotations,
            self.route_changes as f64 / secs,
            (self.writes + 2 * self.rotations) as f64 / secs,
            self.sent,
            self.failed
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_and_endpoint_churn_fails_no_request() {
    let report = run_churn(ROUTE_CHANGES, ROTATIONS).await;
    println!("standalone churn: {report}");
    assert!(report.route_changes >= ROUTE_CHANGES);
    assert_eq!(report.rotations, ROTATIONS);
    assert!(report.sent > 100, "the clients sent only {}", report.sent);
    assert_eq!(report.failed, 0, "{:#?}", report.failures);
}

/// Starts a standalone stack with continuous clients on two stable routes (one to a Service
/// whose endpoint rotates), then makes `route_changes` route changes (five per file write,
/// alternating in-place and atomic writes; each waited for until live) and `rotations`
/// rolling endpoint updates (the new endpoint added, then the old removed, then stopped).
pub async fn run_churn(route_changes: usize, rotations: usize) -> ChurnReport {
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
    let mut versions: Vec<Option<usize>> = vec![None; FILES];
    let (mut changes, mut writes, mut rotated) = (0, 0, 0);
    let mut retired: Vec<Echo> = Vec::new();
    while changes < route_changes || rotated < rotations {
        if changes < route_changes {
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
        }
        // One rolling update every other write (every 10 route changes).
        if rotated < rotations && (writes % 2 == 0 || changes >= route_changes) {
            rotated += 1;
            let next = start_echo(&format!("rot-{rotated}")).await;
            rotate(&stack, &[rot.addr, next.addr]).await;
            rotate(&stack, &[next.addr]).await;
            retired.push(std::mem::replace(&mut rot, next));
            // An old endpoint stops two rotations after it left the table, so requests that
            // picked it on an older table finish first.
            if retired.len() > 2 {
                retired.remove(0);
            }
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
    drop(retired);
    stack.stop().await;
    ChurnReport {
        route_changes: changes,
        writes,
        rotations: rotated,
        elapsed,
        sent,
        failed,
        failures,
    }
}

/// Rewrites the rotating Service's EndpointSlices to `endpoints` and waits for the table.
async fn rotate(stack: &Standalone, endpoints: &[SocketAddr]) {
    let generation = stack.generation();
    write(stack.dir.path(), "rot.yaml", &service("rot", endpoints));
    stack.wait_past(generation).await;
}
