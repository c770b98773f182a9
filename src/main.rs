//! The `edgeplane` binary: parses the command line, sets up logging and runs the subcommand.

use std::process::ExitCode;

use edgeplane::cli::{init_logging, run, Cli};

/// jemalloc instead of the system allocator. glibc keeps an arena per thread that allocates
/// and each arena keeps the peak it reached, so the resident set of a long-running process
/// climbs with every rebuild of the table; jemalloc returns freed pages (its settings are in
/// `.cargo/config.toml`), and translation runs faster on it. The `system-allocator` feature
/// keeps the system's `malloc`, for heap profilers that follow it (heaptrack).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse_checked();
    init_logging(cli.log_format);
    // The control plane (providers, reconciler, admin and dashboard servers, status, webhook)
    // runs here; the data plane's workers run their own runtimes (`proxy::workers`), except
    // with one worker, which serves on this runtime too. Blocking work (translation) goes to
    // the blocking pool, so one thread is enough.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
