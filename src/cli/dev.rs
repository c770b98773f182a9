//! `edgeplane echo` and `edgeplane demo`: the commands that serve something other than a
//! configuration of the user's, an echo backend for tests and conformance (HTTP, TLS or UDP)
//! and a self-contained demo Gateway with its own backends. Apart from `serve`, which they
//! share nothing with but the stack the demo starts.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::checked::echo_namespace;
use super::flags::parse_duration;
use super::proxy_args::ProxyArgs;
use super::stack::{shutdown_signal, Addresses, Stack};
use super::write_stdout;
use crate::admin::{DEFAULT_ADMIN_ADDR, DEFAULT_DASHBOARD_ADDR};
use crate::devtools::echo::{serve_echo, serve_udp_echo, EchoIdentity};
use crate::metrics::Metrics;
use crate::reconcile::ReconcileOptions;
use crate::translate::DEFAULT_CONTROLLER_NAME;

#[derive(Debug, Args)]
pub struct EchoArgs {
    /// Address to listen on.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Pod name reported in responses.
    #[arg(long, env = "POD_NAME", default_value = "echo")]
    pub pod: String,
    /// Namespace reported in responses; without it and POD_NAMESPACE, the environment
    /// variable NAMESPACE (as the Gateway API conformance echo reads it), else `default`.
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: Option<String>,
    /// Answer UDP datagrams instead (each reply: the pod name, `:`, the datagram).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    pub udp: bool,
    /// Serve TLS with this PEM certificate chain (and `--tls-key`): a TLS passthrough backend
    /// or one behind a BackendTLSPolicy; answers then carry `tls.serverName` and
    /// `tls.peerCertificates`.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of `--tls-cert`.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// With `--tls-cert`: require a client certificate signed by a CA of this PEM bundle.
    #[arg(long, requires = "tls_cert")]
    pub client_ca: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Address the demo Gateway listens on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address of the admin server (metrics, health, readiness).
    #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
    pub admin_addr: SocketAddr,
    /// Address of the dashboard server (the live dashboard, its API and the debug views;
    /// answers only over loopback).
    #[arg(long, default_value = DEFAULT_DASHBOARD_ADDR)]
    pub dashboard_addr: SocketAddr,
    /// Time in-flight requests get to finish at shutdown.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    #[command(flatten)]
    pub proxy: ProxyArgs,
}

pub(super) async fn echo(args: EchoArgs) -> anyhow::Result<ExitCode> {
    let identity = EchoIdentity {
        pod: args.pod,
        namespace: echo_namespace(args.namespace, std::env::var("NAMESPACE").ok()),
    };
    if args.udp {
        let socket = tokio::net::UdpSocket::bind(args.listen)
            .await
            .with_context(|| format!("listen on UDP {}", args.listen))?;
        tracing::info!(addr = %args.listen, pod = %identity.pod, "UDP echo backend listening");
        tokio::select! {
            r = serve_udp_echo(socket, identity) => r.context("UDP echo server")?,
            () = shutdown_signal() => {}
        }
        return Ok(ExitCode::SUCCESS);
    }
    let read = |path: &std::path::Path| {
        std::fs::read(path).with_context(|| format!("read {}", path.display()))
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let ca = args.client_ca.as_deref().map(read).transpose()?;
            let config =
                crate::devtools::echo_tls::server_config(&read(cert)?, &read(key)?, ca.as_deref())
                    .context("echo TLS configuration")?;
            Some(config)
        }
        _ => None,
    };
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listen on {}", args.listen))?;
    tracing::info!(addr = %args.listen, pod = %identity.pod, tls = tls.is_some(), "echo backend listening");
    let served = async {
        match tls {
            Some(config) => {
                crate::devtools::echo_tls::serve_echo_tls(listener, identity, None, config).await
            }
            None => serve_echo(listener, identity).await,
        }
    };
    tokio::select! {
        r = served => r.context("echo server")?,
        () = shutdown_signal() => {}
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let backends = crate::devtools::demo::start_backends().await?;
    let snapshot = crate::devtools::demo::snapshot(args.listen, &backends.pods)?;
    let (_tx, rx) = watch::channel(Arc::new(snapshot));
    let stack = Stack::standalone(
        rx,
        Metrics::new(),
        Addresses {
            admin: args.admin_addr,
            dashboard: args.dashboard_addr,
        },
        args.proxy.options(args.drain_timeout),
        ReconcileOptions {
            ingress: Default::default(),
            controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
            bind_address: args.listen.ip(),
            port_map: Default::default(),
            sources: Default::default(),
            capabilities: crate::translate::Capabilities::STANDALONE,
        },
    )
    .await?;
    if !stack.wait_ready(Duration::from_secs(10)).await {
        stack.stop().await;
        bail!("the demo configuration was not published");
    }
    if !stack.proxy.bound().contains(&args.listen) {
        stack.stop().await;
        bail!("cannot listen on {} (see the log above)", args.listen);
    }
    print_demo(&args, stack.dashboard_addr, &backends.pods);
    shutdown_signal().await;
    stack.stop().await;
    drop(backends);
    Ok(ExitCode::SUCCESS)
}

fn print_demo(args: &DemoArgs, dashboard: SocketAddr, pods: &[crate::devtools::demo::EchoPod]) {
    use std::fmt::Write;
    let mut text = format!(
        "edgeplane demo: Gateway default/demo on http://{}\n",
        args.listen
    );
    for p in pods {
        let _ = writeln!(text, "  backend {} pod {} on {}", p.service, p.pod, p.addr);
    }
    let _ = writeln!(
        text,
        "admin (metrics, health) on http://{}",
        args.admin_addr
    );
    let _ = writeln!(text, "dashboard on http://{dashboard}/\n\nTry:");
    for h in crate::devtools::demo::hints(args.listen, args.admin_addr, dashboard) {
        let _ = writeln!(text, "  # {}\n  {}\n", h.what, h.command);
    }
    text.push_str("Press Ctrl-C to stop.\n");
    // The demo keeps serving whoever reads its output; a closed pipe only loses the hints.
    if let Err(error) = write_stdout(&text) {
        tracing::warn!(%error, "cannot print the demo's hints");
    }
}
