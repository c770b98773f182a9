//! The conformance replay: the Gateway API conformance scenarios (profiles GATEWAY-HTTP,
//! GATEWAY-GRPC, GATEWAY-TLS, GATEWAY-TCP and GATEWAY-UDP), each run against its own
//! `edgeplane serve --config-dir` process with echo backends (HTTP and gRPC on one port; TLS and
//! UDP echoes beside) on loopback.
//!
//! The same scenarios also run in Kubernetes mode (`kubernetes_mode_replay`): objects created
//! through the in-process API emulator, the real `serve --kubernetes` binary, statuses read
//! from the API objects, traffic through each Gateway's Service (see `kube_env` and
//! `kube_scenarios`). The two replays take turns, never running at once.
//!
//! `CONFORMANCE_RUN=name,name` runs only scenarios whose names contain one of the words;
//! `CONFORMANCE_REPORT=path` writes the upstream `ConformanceReport` YAML there (of the
//! standalone run; `CONFORMANCE_KUBE_REPORT=path` for the Kubernetes-mode run).

mod support;

#[path = "conformance/backend_tls.rs"]
mod backend_tls;
#[path = "conformance/backends.rs"]
mod backends;
#[path = "conformance/check_cli.rs"]
mod check_cli;
#[path = "conformance/client_certs.rs"]
mod client_certs;
#[path = "conformance/expect.rs"]
mod expect;
#[path = "conformance/extended.rs"]
mod extended;
#[path = "conformance/gateway.rs"]
mod gateway;
#[path = "conformance/grpc.rs"]
mod grpc;
#[path = "conformance/harness.rs"]
mod harness;
#[path = "conformance/httproute.rs"]
mod httproute;
#[path = "conformance/kube_env.rs"]
mod kube_env;
#[path = "conformance/kube_scenarios.rs"]
mod kube_scenarios;
#[path = "conformance/l4_scenarios.rs"]
mod l4_scenarios;
#[path = "conformance/listenerset.rs"]
mod listenerset;
#[path = "conformance/listenerset_routes.rs"]
mod listenerset_routes;
#[path = "conformance/redirects.rs"]
mod redirects;
#[path = "conformance/references.rs"]
mod references;
#[path = "conformance/report.rs"]
mod report;
#[path = "conformance/retries.rs"]
mod retries;
#[path = "conformance/scenarios.rs"]
mod scenarios;
#[path = "conformance/skipped.rs"]
mod skipped;
#[path = "conformance/status.rs"]
mod status;
#[path = "conformance/tcproute.rs"]
mod tcproute;
#[path = "conformance/tls.rs"]
mod tls;
#[path = "conformance/tlsroute.rs"]
mod tlsroute;
#[path = "conformance/udproute.rs"]
mod udproute;

use std::sync::Arc;
use std::time::{Duration, Instant};

use report::{Result as Verdict, ScenarioResult};

/// Namespace of the shared Gateways and the infra backends.
pub const INFRA: &str = "gateway-conformance-infra";
/// Namespace labelled `gateway-conformance: backend` (app-backend-v1/v2).
pub const APP: &str = "gateway-conformance-app-backend";
/// Namespace of web-backend.
pub const WEB: &str = "gateway-conformance-web-backend";

/// Scenarios running at once (each owns a proxy process and a dozen echo pods).
const CONCURRENCY: usize = 6;
/// Upper bound of one scenario, setup included.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_http_and_grpc_profiles() {
    replay(scenarios::all(), false, "CONFORMANCE_REPORT").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubernetes_mode_replay() {
    replay(kube_scenarios::all(), true, "CONFORMANCE_KUBE_REPORT").await;
}

/// Runs `scenarios` (filtered by `CONFORMANCE_RUN`), `CONCURRENCY` at a time, in Kubernetes
/// mode when `kube`; prints the summary, writes the report where `report_var` says, and fails
/// on any failed scenario and, for a whole run, on a claimed feature none of whose scenarios
/// passed.
async fn replay(all: Vec<scenarios::Scenario>, kube: bool, report_var: &str) {
    // One replay at a time: each runs `CONCURRENCY` scenarios with a process each.
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = TURN.lock().await;
    let filter: Vec<String> = std::env::var("CONFORMANCE_RUN")
        .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect())
        .unwrap_or_default();
    let started = Instant::now();
    let limit = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
    let mut tasks = Vec::new();
    for s in all {
        if !filter.is_empty() && !filter.iter().any(|f| s.name.contains(f.as_str())) {
            continue;
        }
        let limit = limit.clone();
        tasks.push((
            s.name,
            s.profile,
            s.feature,
            tokio::spawn(async move {
                let _permit = limit.acquire_owned().await.expect("semaphore open");
                scenarios::run(&s, SCENARIO_TIMEOUT, kube).await
            }),
        ));
    }
    let mut results = Vec::new();
    for (name, profile, feature, task) in tasks {
        let verdict = match task.await {
            Ok(v) => v,
            Err(e) => Verdict::Failed(format!("scenario panicked: {e}")),
        };
        results.push(ScenarioResult {
            name,
            profile,
            feature,
            verdict,
        });
    }
    let summary = report::Summary::new(&results, harness::claimed(kube));
    println!("{}", summary.table());
    let mode = if kube {
        "Kubernetes mode"
    } else {
        "standalone"
    };
    println!(
        "conformance ({mode}): {} scenarios in {:?}",
        results.len(),
        started.elapsed()
    );
    if let Ok(path) = std::env::var(report_var) {
        std::fs::write(&path, summary.yaml()).expect("write the conformance report");
        println!("conformance report written to {path}");
    }
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| match &r.verdict {
            Verdict::Failed(e) => Some(format!("{}: {e}", r.name)),
            _ => None,
        })
        .collect();
    assert!(
        failed.is_empty(),
        "failed scenarios:\n{}",
        failed.join("\n")
    );
    let unclaimed = summary.unclaimed();
    if !unclaimed.is_empty() {
        println!("passing but not in GatewayClass supportedFeatures: {unclaimed:?}");
    }
    if filter.is_empty() {
        // Scenarios the Kubernetes-mode replay cannot order (see `kube_scenarios`) do not
        // count against a claim there; the standalone replay runs them.
        let counted: Vec<ScenarioResult> = results
            .iter()
            .filter(|r| !kube || !kube_scenarios::CREATION_ORDER.contains(&r.name))
            .cloned()
            .collect();
        let overclaimed = report::Summary::new(&counted, harness::claimed(kube)).overclaimed();
        assert!(overclaimed.is_empty(), "{}", overclaimed.join("\n"));
    }
}
