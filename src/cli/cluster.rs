//! `serve --kubernetes`: its flags, whose defaults are `KubeOptions`' own, and the wiring of the
//! Kubernetes provider into the shared [`Stack`]. Start-up code, so `anyhow` is fine here.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::flags::{duration_text, labels_text, parse_duration, parse_labels};
use super::stack::{shutdown_signal, Stack};
use super::ServeArgs;
use crate::metrics::Metrics;
use crate::provider::kube::{KubeOptions, KubeProvider, DEFAULT_CONTROLLER_NAMESPACE};
use crate::reconcile::ReconcileOptions;
use crate::translate::DEFAULT_CONTROLLER_NAME;

/// The options `serve --kubernetes` starts from: each flag's default is read from here.
fn defaults() -> KubeOptions {
    KubeOptions::new(DEFAULT_CONTROLLER_NAME, DEFAULT_CONTROLLER_NAMESPACE, "")
}

/// Flags of `serve --kubernetes`.
#[derive(Debug, Args)]
pub struct KubeArgs {
    /// The controller's namespace (its Lease and Gateway Services live there).
    #[arg(long, env = "POD_NAMESPACE", default_value = DEFAULT_CONTROLLER_NAMESPACE)]
    pub namespace: String,
    /// Name of the Lease used for leader election.
    #[arg(long, default_value = defaults().lease_name)]
    pub lease_name: String,
    /// This replica's identity in the Lease (defaults to the host name).
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Full rebuild from the caches this often, even without changes.
    #[arg(long, default_value = duration_text(defaults().resync), value_parser = parse_duration)]
    pub resync: Duration,
    /// Type of the Service made for each Gateway.
    #[arg(long, default_value = defaults().service_type)]
    pub gateway_service_type: String,
    /// Pod labels the Gateway Services select (`key=value[,key=value]`).
    #[arg(long, default_value = labels_text(&defaults().service_selector), value_parser = parse_labels)]
    pub gateway_service_selector: BTreeMap<String, String>,
    /// First port handed out to Gateway listeners (each Gateway gets its own ports).
    #[arg(long, default_value_t = defaults().port_base)]
    pub gateway_port_base: u16,
}

impl KubeArgs {
    /// The provider options these flags describe, for a controller named `controller_name`.
    /// The Lease identity is `--pod-name`, else the host name.
    pub fn options(self, controller_name: &str) -> KubeOptions {
        let pod_name = self.pod_name.unwrap_or_else(|| {
            std::env::var("HOSTNAME").unwrap_or_else(|_| "edgeplane".to_owned())
        });
        let mut options = KubeOptions::new(controller_name, &self.namespace, &pod_name);
        options.lease_name = self.lease_name;
        options.resync = self.resync;
        options.service_type = self.gateway_service_type;
        options.service_selector = self.gateway_service_selector;
        options.port_base = self.gateway_port_base;
        options
    }
}

/// `serve --kubernetes`: reflectors feed the reconcile loop, which starts once every kind has
/// been listed (so `/readyz` means a full sync was published); the leader writes status.
pub(super) async fn serve_kubernetes(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let client = kube::Client::try_default()
        .await
        .context("Kubernetes client (in-cluster or KUBECONFIG)")?;
    let options = args.kube.options(&args.translate.controller_name);
    let metrics = Metrics::new();
    let mut stack = Stack::serve(
        metrics.clone(),
        args.admin_addr,
        args.proxy.options(args.drain_timeout),
    )
    .await?;
    tracing::info!(namespace = %options.namespace, pod = %options.pod_name, "watching the cluster");
    let provider = KubeProvider::start(client, options, stack.published.clone(), metrics);
    let mut snapshots = provider.snapshots.clone();
    // The channel's first value is a placeholder; the first full snapshot is a change.
    let first = async move { snapshots.changed().await.is_ok().then_some(snapshots) };
    stack.reconcile(
        first,
        ReconcileOptions {
            controller_name: args.translate.controller_name,
            bind_address: args.translate.bind_address,
            port_map: Default::default(),
        },
    );
    shutdown_signal().await;
    provider.stop().await;
    stack.stop().await;
    Ok(ExitCode::SUCCESS)
}
