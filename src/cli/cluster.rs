//! `serve --kubernetes`: the wiring of the Kubernetes provider, reconcile loop, proxy and admin
//! server. Start-up code, so `anyhow` is fine here.

use super::*;

/// Parses `key=value[,key=value]` labels.
pub fn parse_labels(s: &str) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
            _ => bail!("`{p}` is not key=value"),
        })
        .collect()
}

/// `serve --kubernetes`: reflectors feed the reconcile loop, which starts once every kind has
/// been listed (so `/readyz` means a full sync was published); the leader writes status.
pub(super) async fn serve_kubernetes(args: ServeArgs) -> anyhow::Result<ExitCode> {
    use crate::provider::kube::{KubeOptions, KubeProvider};
    let client = kube::Client::try_default()
        .await
        .context("Kubernetes client (in-cluster or KUBECONFIG)")?;
    let pod_name = match args.kube.pod_name {
        Some(p) => p,
        None => std::env::var("HOSTNAME").unwrap_or_else(|_| "edgeplane".to_owned()),
    };
    let mut options = KubeOptions::new(
        &args.translate.controller_name,
        &args.kube.namespace,
        &pod_name,
    );
    options.lease_name = args.kube.lease_name;
    options.resync = args.kube.resync;
    options.service_type = args.kube.gateway_service_type;
    options.service_selector = parse_labels(&args.kube.gateway_service_selector)?;
    options.port_base = args.kube.gateway_port_base;
    let metrics = Metrics::new();
    let admin_listener = TcpListener::bind(args.admin_addr)
        .await
        .with_context(|| format!("admin server: listen on {}", args.admin_addr))?;
    let published = Published::new(metrics.clone());
    let proxy = Proxy::new(
        published.shared_table(),
        metrics.clone(),
        args.proxy.options(args.drain_timeout),
    );
    let p = published.clone();
    let admin = tokio::spawn(async move {
        if let Err(e) = serve_admin(admin_listener, p).await {
            tracing::error!(error = %e, "admin server stopped");
        }
    });
    tracing::info!(addr = %args.admin_addr, namespace = %options.namespace, pod = %pod_name, "watching the cluster");
    let provider = KubeProvider::start(client, options, published.clone(), metrics);
    let mut snapshots = provider.snapshots.clone();
    let reconciler = Reconciler::new(
        published.clone(),
        Some(proxy.clone()),
        ReconcileOptions {
            controller_name: args.translate.controller_name,
            bind_address: args.translate.bind_address,
            port_map: Default::default(),
        },
    );
    let reconcile = tokio::spawn(async move {
        // The channel's first value is a placeholder; the first full snapshot is a change.
        if snapshots.changed().await.is_ok() {
            reconciler.run(snapshots).await;
        }
    });
    let stack = Stack::assemble(published, proxy, reconcile, admin);
    shutdown_signal().await;
    provider.stop().await;
    stack.stop().await;
    Ok(ExitCode::SUCCESS)
}
