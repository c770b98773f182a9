//! The running data plane every serving command shares: admin and dashboard servers, proxy,
//! the published table and the reconcile loop fed by a provider's snapshots. Start-up code
//! (`anyhow`).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admin::serve_admin;
use crate::dashboard::{serve_dashboard, Dashboard};
use crate::metrics::Metrics;
use crate::proxy::{Proxy, ProxyOptions};
use crate::reconcile::{Published, ReconcileOptions, Reconciler};
use crate::snapshot::Snapshot;

/// Snapshots for the reconcile loop: the receiver once the provider has its first full
/// snapshot (`None`: the provider stopped before that).
pub type Snapshots = watch::Receiver<Arc<Snapshot>>;

/// Where the servers beside the proxy listen.
#[derive(Debug, Clone, Copy)]
pub struct Addresses {
    /// `--admin-addr`: metrics, health, readiness.
    pub admin: SocketAddr,
    /// `--dashboard-addr`: the dashboard, its API and the debug views.
    pub dashboard: SocketAddr,
}

/// The running data plane: reconcile loop, proxy, admin and dashboard servers.
pub struct Stack {
    pub published: Arc<Published>,
    pub proxy: Arc<Proxy>,
    /// The address the dashboard server is bound to (the port chosen for port 0).
    pub dashboard_addr: SocketAddr,
    reconcile: Option<JoinHandle<()>>,
    admin: JoinHandle<()>,
    dashboard: JoinHandle<()>,
}

impl Stack {
    /// Binds the admin and dashboard servers and creates the proxy and the (empty) published
    /// state. Nothing is served until [`Stack::reconcile`] publishes a table.
    pub async fn serve(
        metrics: Arc<Metrics>,
        addresses: Addresses,
        proxy: ProxyOptions,
    ) -> anyhow::Result<Self> {
        let admin_addr = addresses.admin;
        let admin_listener = TcpListener::bind(admin_addr)
            .await
            .with_context(|| format!("admin server: listen on {admin_addr}"))?;
        let dashboard_listener =
            TcpListener::bind(addresses.dashboard)
                .await
                .with_context(|| {
                    format!(
                        "dashboard server: listen on {} (--dashboard-addr)",
                        addresses.dashboard
                    )
                })?;
        let dashboard_addr = dashboard_listener.local_addr()?;
        tracing::info!(addr = %admin_addr, "admin server listening");
        tracing::info!(addr = %dashboard_addr, "dashboard listening");
        let published = Published::new(metrics.clone());
        let proxy = ProxyOptions {
            workers: crate::proxy::workers_from_env(),
            ..proxy
        };
        let proxy = Proxy::new(published.shared_table(), metrics, proxy);
        reopen_access_log_on_sighup(Arc::downgrade(&proxy));
        let p = published.clone();
        let admin = tokio::spawn(async move {
            if let Err(e) = serve_admin(admin_listener, p).await {
                tracing::error!(error = %e, "admin server stopped");
            }
        });
        let view = Dashboard::new(published.clone(), Some(proxy.clone()));
        let dashboard = tokio::spawn(async move {
            if let Err(e) = serve_dashboard(dashboard_listener, view).await {
                tracing::error!(error = %e, "dashboard server stopped");
            }
        });
        Ok(Self {
            published,
            proxy,
            dashboard_addr,
            reconcile: None,
            admin,
            dashboard,
        })
    }

    /// [`Stack::serve`], then [`Stack::reconcile`] on snapshots that are there from the start
    /// (a config directory, the demo).
    pub async fn standalone(
        snapshots: Snapshots,
        metrics: Arc<Metrics>,
        addresses: Addresses,
        proxy: ProxyOptions,
        options: ReconcileOptions,
    ) -> anyhow::Result<Self> {
        let mut stack = Self::serve(metrics, addresses, proxy).await?;
        stack.reconcile(std::future::ready(Some(snapshots)), options);
        Ok(stack)
    }

    /// Starts the reconcile loop on the snapshots `first` resolves to: at once for a config
    /// directory, after the first full sync for a cluster.
    pub fn reconcile<F>(&mut self, first: F, options: ReconcileOptions)
    where
        F: Future<Output = Option<Snapshots>> + Send + 'static,
    {
        let reconciler = Reconciler::new(self.published.clone(), Some(self.proxy.clone()), options);
        self.reconcile = Some(tokio::spawn(async move {
            if let Some(snapshots) = first.await {
                reconciler.run(snapshots).await;
            }
        }));
    }

    /// Waits up to `timeout` for the first table to be published.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.published.is_ready() {
            let stopped = self.reconcile.as_ref().is_none_or(JoinHandle::is_finished);
            if Instant::now() >= deadline || stopped {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Stops publishing, drains the proxy, then stops the admin and dashboard servers.
    pub async fn stop(self) {
        if let Some(r) = &self.reconcile {
            r.abort();
        }
        tracing::info!("draining");
        self.proxy.shutdown().await;
        self.admin.abort();
        self.dashboard.abort();
        tracing::info!("stopped");
    }
}

/// Reopens a file access log on every SIGHUP (what log rotators send), while the proxy lives.
fn reopen_access_log_on_sighup(proxy: std::sync::Weak<Proxy>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(hup) => hup,
        Err(error) => {
            tracing::warn!(%error, "cannot watch SIGHUP: the access log file is reopened only when moved");
            return;
        }
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let Some(proxy) = proxy.upgrade() else { break };
            tracing::info!("SIGHUP: reopening the access log file");
            proxy.reopen_access_log();
        }
    });
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch SIGTERM; Ctrl-C only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutdown requested");
}
