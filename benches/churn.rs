//! Churn in standalone mode: route changes by file writes and rolling endpoint updates behind
//! a Service while clients send continuously to routes that stay valid. Prints the change rate,
//! the requests sent and how many were not 2xx (the target is 0).
//!
//! `cargo bench --bench churn` (`CHURN_ROUTE_CHANGES=1000`, `CHURN_ROTATIONS=100` by default).
//! Each change is waited for until it is live, so the rate is of changes served, not written.

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

#[path = "../tests/reliability/churn.rs"]
#[allow(dead_code)]
mod churn;
#[path = "../tests/reliability/standalone.rs"]
#[allow(dead_code)]
mod standalone;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let route_changes = env("CHURN_ROUTE_CHANGES", 1000);
    let rotations = env("CHURN_ROTATIONS", 100);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let report = runtime.block_on(churn::run_churn(route_changes, rotations));
    println!("standalone churn: {report}");
    for f in &report.failures {
        println!("  failed: {f}");
    }
    if report.failed > 0 {
        std::process::exit(1);
    }
}
