//! Command-line interface: argument parsing and the wiring of provider, reconcile loop, proxy,
//! admin and dashboard servers for each subcommand. The only module (with `main`) that uses `anyhow`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, Parser, Subcommand, ValueEnum};
use tokio::sync::watch;

mod check;
mod checked;
mod cluster;
mod convert;
mod convert_cluster;
mod dev;
mod flags;
mod policy;
mod proxy_args;
mod resilience_args;
mod stack;
mod trace_view;
mod views;
mod webhook_args;

pub use check::{CheckArgs, CheckOutput};
use checked::SERVE_NEEDS_A_SOURCE;
pub use cluster::KubeArgs;
pub use convert::{ConvertArgs, ConvertIngressArgs, ConvertWhat};
pub use dev::{DemoArgs, EchoArgs};
pub use flags::{duration_text, parse_duration};
pub use policy::PathPolicyArgs;
pub use proxy_args::ProxyArgs;
use stack::{shutdown_signal, Addresses, Stack};
pub use trace_view::TraceArgs;
pub use views::{RoutesArgs, StatusArgs, StatusOutput};

use crate::admin::{DEFAULT_ADMIN_ADDR, DEFAULT_DASHBOARD_ADDR};
use crate::admission::Crds;
use crate::metrics::Metrics;
use crate::problem_log::Sources;
use crate::provider::crds::load_crds;
use crate::provider::file::{report_errors, watch_shared, ConfigDir};
use crate::provider::manifest::ManifestError;
use crate::reconcile::ReconcileOptions;
use crate::translate::{PortMap, DEFAULT_CONTROLLER_NAME};

/// What `--version` prints after the name: the crate version and the commit it was built from
/// (`unknown` outside a git checkout), so a running image can be traced to its source.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("EDGEPLANE_COMMIT"),
    ")"
);

/// A Kubernetes Gateway API controller and the edge proxy it programs, in one process.
#[derive(Debug, Parser)]
#[command(name = "edgeplane", version = VERSION, about)]
pub struct Cli {
    /// Log line format (levels come from RUST_LOG, default info,rustls=error). Text lines
    /// are coloured only when stderr is a terminal.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written (always to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

// Parsed once at start-up: the size of the `serve` variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Gateways of a directory of manifests (reloaded on change), or of a cluster.
    Serve(Box<ServeArgs>),
    /// Admit and translate manifests (files or directories) once and print every owned
    /// object's status; exit 1 on problems, 2 on a manifest that does not parse, a rejected
    /// object or an unknown kind of our API groups, 3 when nothing of ours was checked.
    Check(CheckArgs),
    /// Run an echo backend that answers every request with JSON describing it (gRPC calls: the
    /// conformance suite's gRPC echo service, on the same port).
    Echo(EchoArgs),
    /// Run the quickstart: echo backends, example routes, proxy, admin server and dashboard.
    Demo(DemoArgs),
    /// Print every object's conditions (Accepted, Programmed, ResolvedRefs), read from a
    /// running edgeplane's dashboard server; exit 1 when it cannot be reached.
    Status(StatusArgs),
    /// Print a running edgeplane's live route table as a tree: Gateway, listener, hostname,
    /// rule, backends with weights and endpoint health; exit 1 when it cannot be reached.
    Routes(RoutesArgs),
    /// Wait for the next request(s) matching --host, --path and --header at a running
    /// edgeplane and print the way each took: listener, rules tried and why they did not
    /// match, filters and policies, backends and endpoint, timings, status; exit 1 when
    /// fewer than --count came within --timeout or the dashboard cannot be reached.
    Trace(TraceArgs),
    /// Print the CustomResourceDefinitions of the edgeplane.dev kinds (TrafficPolicy,
    /// ProxyConfig) as multi-document YAML, for `kubectl apply -f -`.
    Crds,
    /// Convert Ingresses to Gateway API objects, with a report per Ingress and annotation;
    /// `--verify` replays requests through both and exits 1 on any difference.
    Convert(ConvertArgs),
}

/// Flags every translation takes.
#[derive(Debug, Args)]
pub struct TranslateArgs {
    /// GatewayClasses with this spec.controllerName are served.
    #[arg(long, default_value = DEFAULT_CONTROLLER_NAME)]
    pub controller_name: String,
    /// Address listeners bind on when a Gateway names no IPAddress.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind_address: IpAddr,
    /// Serve our Ingresses on the listeners of this Gateway instead of the implicit Gateway
    /// of each IngressClass.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = parse_gateway_name)]
    pub ingress_gateway: Option<(String, String)>,
    /// Serve Ingresses that name no IngressClass even when no IngressClass of ours is the
    /// default.
    #[arg(long)]
    pub watch_ingress_without_class: bool,
    /// Serve Ingresses without this ingress-nginx quirk (repeatable); each is on by default.
    #[arg(long, value_name = "QUIRK", value_enum)]
    pub no_ingress_quirk: Vec<IngressQuirk>,
}

/// The ingress-nginx quirks `--no-ingress-quirk` turns off (docs/ingress.md, "Quirks").
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IngressQuirk {
    /// Regex paths match when the path starts with a match (not the whole path).
    RegexPrefix,
    /// Regex paths ignore case.
    RegexCaseInsensitive,
    /// use-regex or rewrite-target on one Ingress makes every path of its hosts regex.
    HostWideRegex,
    /// rewrite-target makes the Ingress's paths regex and replaces the whole path.
    RewriteEnablesRegex,
    /// A host's server-level annotations (server-alias, server-snippet) come from its oldest Ingress.
    ServerAnnotationsFromOldest,
}

impl TranslateArgs {
    /// Which Ingresses are ours and which Gateway serves them, as the flags say.
    pub fn ingress(&self) -> crate::translate::ingress::IngressOptions {
        crate::translate::ingress::IngressOptions {
            gateway: self.ingress_gateway.clone(),
            without_class: self.watch_ingress_without_class,
            quirks: {
                let off = |q| self.no_ingress_quirk.contains(&q);
                crate::translate::ingress::regex::Quirks {
                    regex_prefix: !off(IngressQuirk::RegexPrefix),
                    regex_case_insensitive: !off(IngressQuirk::RegexCaseInsensitive),
                    host_wide_regex: !off(IngressQuirk::HostWideRegex),
                    rewrite_enables_regex: !off(IngressQuirk::RewriteEnablesRegex),
                    server_annotations_from_oldest: !off(IngressQuirk::ServerAnnotationsFromOldest),
                }
            },
            ..Default::default()
        }
    }
}

/// `NAMESPACE/NAME`, both non-empty.
fn parse_gateway_name(value: &str) -> Result<(String, String), String> {
    match value.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_owned(), name.to_owned()))
        }
        _ => Err(format!("{value:?} is not NAMESPACE/NAME")),
    }
}

/// Flags of the commands that read manifests from files.
#[derive(Debug, Args)]
pub struct AdmissionArgs {
    /// CustomResourceDefinitions (a file or a directory, repeatable), e.g. the Gateway API
    /// standard-install.yaml: objects of their kinds are defaulted and validated against them
    /// exactly as the API server with those CRDs would (every bound, pattern and CEL rule).
    /// Without it, Gateway API objects are still validated, against built-in schemas: every
    /// field the Gateway API types declare (an unknown field is refused), the CRDs' defaults
    /// and the common cross-field rules (paths, redirects, rewrites, filters, ports, weights).
    #[arg(long = "crds", value_name = "PATH")]
    pub crds: Vec<PathBuf>,
}

impl AdmissionArgs {
    /// The built-in schemas plus the CRDs of `--crds`.
    pub fn load(&self) -> Result<Crds, ManifestError> {
        let (crds, names) = load_crds(&self.crds)?;
        if !names.is_empty() {
            tracing::info!(crds = names.len(), "CustomResourceDefinitions loaded");
        }
        Ok(crds)
    }
}

/// Flags of `serve`, grouped in `--help` by what they are for (the README's tables follow the
/// same groups). `--config-dir` or `--kubernetes` is required ([`Cli::parse_checked`] says so).
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Directory of YAML/JSON manifests, read recursively (standalone mode).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "kubernetes",
        help_heading = "Standalone"
    )]
    pub config_dir: Option<PathBuf>,
    /// Watch a Kubernetes cluster (in-cluster or KUBECONFIG).
    #[arg(long, help_heading = "Kubernetes")]
    pub kubernetes: bool,
    #[command(flatten)]
    pub translate: TranslateArgs,
    #[command(flatten, next_help_heading = "Standalone")]
    pub admission: AdmissionArgs,
    /// Bind listener ports on other local ports, as Service targetPorts do
    /// (`80=18080,443=18443`, e.g. to run unprivileged); status keeps the Gateways' ports.
    /// With --kubernetes it applies to the implicit Ingress Gateways only.
    #[arg(long, value_name = "PORT=LOCAL,...", help_heading = "Standalone")]
    pub port_map: Option<PortMap>,
    #[command(flatten, next_help_heading = "Kubernetes")]
    pub kube: cluster::KubeArgs,
    /// Address of the admin server (metrics, health, readiness). An IPv6 address may be
    /// written without brackets, as `$(POD_IP):9901` expands to.
    #[arg(long, default_value = DEFAULT_ADMIN_ADDR, help_heading = "Admin",
        value_parser = webhook_args::parse_listen_addr)]
    pub admin_addr: SocketAddr,
    /// Address of the dashboard server: the live dashboard at `/`, its API and the debug
    /// views (/debug/config, /debug/status). It answers only connections that arrive over
    /// loopback; in a cluster, reach it with `kubectl port-forward`.
    #[arg(long, default_value = DEFAULT_DASHBOARD_ADDR, help_heading = "Admin",
        value_parser = webhook_args::parse_listen_addr)]
    pub dashboard_addr: SocketAddr,
    /// Time in-flight requests get to finish at shutdown (e.g. 30s, 500ms, 2m).
    #[arg(long, default_value = "30s", value_parser = parse_duration, help_heading = "Proxy")]
    pub drain_timeout: Duration,
    #[command(flatten, next_help_heading = "Proxy")]
    pub proxy: ProxyArgs,
}

/// The log filter without `RUST_LOG`: `info`, but rustls only on errors, since it warns once
/// per handshake about what clients send (an IP address as SNI, say), which any client could
/// use to flood the log.
pub const DEFAULT_LOG_FILTER: &str = "info,rustls=error";

/// Sets up logging to stderr, filtered by `RUST_LOG` (default [`DEFAULT_LOG_FILTER`]).
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    // Escape codes only for a person at a terminal: a pipe, a file or a log collector gets
    // plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Runs one subcommand to completion and returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => serve(*args).await,
        Command::Check(args) => Ok(check::check(&args)),
        Command::Echo(args) => dev::echo(args).await,
        Command::Demo(args) => dev::demo(args).await,
        Command::Status(args) => views::status(args).await,
        Command::Routes(args) => views::routes(args).await,
        Command::Trace(args) => trace_view::trace(args).await,
        Command::Crds => {
            write_stdout(&crate::kinds::crd::generate::crds_yaml()?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Convert(args) => Ok(convert::run(&args).await),
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if args.kubernetes {
        return cluster::serve_kubernetes(args).await;
    }
    let Some(dir) = args.config_dir else {
        bail!("{SERVE_NEEDS_A_SOURCE}");
    };
    let metrics = Metrics::new();
    let crds = args.admission.load().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut config = ConfigDir::new(&dir, Arc::new(crds));
    let loaded = config.load().map_err(|e| {
        metrics.config_errors.with_label_values(&["file"]).inc();
        anyhow::anyhow!("{e}")
    })?;
    report_errors(&loaded.errors, &metrics);
    tracing::info!(dir = %dir.display(), objects = loaded.snapshot.len(), "configuration loaded");
    let port_map = args.port_map.unwrap_or_default();
    if !port_map.is_empty() {
        tracing::info!(%port_map, "listener ports bind mapped local ports");
    }
    let (tx, rx) = watch::channel(Arc::new(loaded.snapshot));
    let config = Arc::new(std::sync::Mutex::new(config));
    let watcher = watch_shared(config.clone(), tx, metrics.clone())?;
    // Problems in the log name the file and line of their object.
    let sources = Sources::new(Arc::new(
        move |group: &str, kind: &str, namespace: Option<&str>, name: &str| {
            config.lock().ok()?.location(group, kind, namespace, name)
        },
    ));
    let stack = Stack::standalone(
        rx,
        metrics,
        Addresses {
            admin: args.admin_addr,
            dashboard: args.dashboard_addr,
        },
        args.proxy.options(args.drain_timeout),
        ReconcileOptions {
            ingress: args.translate.ingress(),
            controller_name: args.translate.controller_name,
            bind_address: args.translate.bind_address,
            port_map,
            sources,
            capabilities: crate::translate::Capabilities::STANDALONE,
        },
    )
    .await?;
    shutdown_signal().await;
    drop(watcher);
    stack.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` to standard output. A reader that stopped early (`| head`) is not an error:
/// the output it wanted was written, and the command should not fail (or panic, as `print!`
/// does) for it.
pub(crate) fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_names_the_default_log_filter() {
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains(DEFAULT_LOG_FILTER), "{help}");
    }

    #[test]
    fn serve_needs_a_source() {
        let e = Cli::try_parse_checked(["edgeplane", "serve"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let text = e.to_string();
        assert!(
            text.contains("--config-dir DIR") && text.contains("or --kubernetes"),
            "{text}"
        );
        assert!(Cli::try_parse_checked([
            "edgeplane",
            "serve",
            "--config-dir",
            "d",
            "--kubernetes"
        ])
        .is_err());
        let cli = Cli::try_parse_from(["edgeplane", "serve", "--config-dir", "d"]).unwrap();
        let Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(s.translate.controller_name, DEFAULT_CONTROLLER_NAME);
        assert_eq!(s.admin_addr, DEFAULT_ADMIN_ADDR.parse().unwrap());
        let cli = Cli::try_parse_from(["edgeplane", "serve", "--kubernetes", "--namespace", "gw"])
            .unwrap();
        let Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert!(s.kubernetes);
        assert_eq!(s.kube.namespace, "gw");
        assert_eq!(s.kube.gateway_port_base, 10080);
        assert_eq!(s.kube.resync, Duration::from_secs(300));
        assert_eq!(s.kube.watch_retry_max, Duration::from_secs(30));
        let e = Cli::try_parse_checked(["edgeplane", "serve", "--kubernetes", "--namespace", ""]);
        let text = e.unwrap_err().to_string();
        assert!(
            text.contains("empty") && text.contains("POD_NAMESPACE"),
            "{text}"
        );
        let e = Cli::try_parse_checked(["edgeplane", "serve", "--kubernetes", "--namespace=A_b"]);
        assert!(e.is_err());
    }
}
