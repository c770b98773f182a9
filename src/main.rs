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
    let runtime = match runtime_builder().enable_all().build() {
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

/// The runtime's scheduler. With one worker (`TOKIO_WORKER_THREADS=1`, or a process allowed on
/// one CPU) the current-thread scheduler: the same single thread runs every task, without the
/// work-stealing scheduler's queues and cross-thread wake-ups, which a proxied request pays
/// for several times over. Otherwise the multi-threaded one, with Tokio's worker count.
fn runtime_builder() -> tokio::runtime::Builder {
    let workers = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(Into::into));
    if workers == Some(1) {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    }
}
