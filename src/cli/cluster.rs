//! `serve --kubernetes`: its flags, whose defaults are `KubeOptions`' own, and the wiring of the
//! Kubernetes provider into the shared [`Stack`]. Start-up code, so `anyhow` is fine here.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::flags::{duration_text, parse_duration};
use super::stack::{shutdown_signal, Addresses, Stack};
use super::ServeArgs;
use crate::metrics::Metrics;
use crate::provider::kube::crd_bundle::{DEFAULT_RENEW_BEFORE, DEFAULT_SECRET, DEFAULT_VALIDITY};
use crate::provider::kube::webhook_cert::Rotation;
use crate::provider::kube::{
    KubeOptions, KubeProvider, WebhookCertOptions, DEFAULT_CONTROLLER_NAMESPACE,
};
use crate::reconcile::ReconcileOptions;
use crate::translate::DEFAULT_CONTROLLER_NAME;
use crate::webhook::WebhookCerts;

/// Where the conversion webhook listens by default (the webhook Service's target port).
const DEFAULT_WEBHOOK_ADDR: &str = "0.0.0.0:9443";
/// The Service the CRDs' `clientConfig` names, as `namespace/name`.
const DEFAULT_WEBHOOK_SERVICE: &str = "edgeplane-system/edgeplane-webhook";

/// The options `serve --kubernetes` starts from: each flag's default is read from here.
fn defaults() -> KubeOptions {
    KubeOptions::new(DEFAULT_CONTROLLER_NAME, DEFAULT_CONTROLLER_NAMESPACE, "")
}

/// Flags of `serve --kubernetes`.
#[derive(Debug, Args)]
pub struct KubeArgs {
    /// The controller's namespace (its Lease and the replicas' Service live there); set
    /// POD_NAMESPACE from the downward API. Empty is an error.
    #[arg(long, env = "POD_NAMESPACE", default_value = DEFAULT_CONTROLLER_NAMESPACE,
        value_parser = parse_namespace)]
    pub namespace: String,
    /// Name of the Lease used for leader election.
    #[arg(long, default_value = defaults().lease_name)]
    pub lease_name: String,
    /// This replica's identity in the Lease (defaults to the host name).
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Others take over a Lease its holder has not renewed for this long.
    #[arg(long, env = "LEADER_LEASE_DURATION",
        default_value = duration_text(defaults().lease_duration), value_parser = parse_duration)]
    pub leader_lease_duration: Duration,
    /// The holder steps down (stops status writes, keeps serving) when it could not renew for
    /// this long; shorter than the lease duration.
    #[arg(long, env = "LEADER_RENEW_DEADLINE",
        default_value = duration_text(defaults().lease_renew_deadline), value_parser = parse_duration)]
    pub leader_renew_deadline: Duration,
    /// How often the holder renews and the others try to acquire; shorter than the renew
    /// deadline.
    #[arg(long, env = "LEADER_RETRY_PERIOD",
        default_value = duration_text(defaults().lease_retry_period), value_parser = parse_duration)]
    pub leader_retry_period: Duration,
    /// Full rebuild from the caches this often, even without changes.
    #[arg(long, default_value = duration_text(defaults().resync), value_parser = parse_duration)]
    pub resync: Duration,
    /// Longest wait between retries of a kind's failed list or watch (an API error, or a kind
    /// whose CRD is not installed, which counts as empty meanwhile); waits start at 1s and
    /// double, with jitter, up to this. A CRD installed later is picked up within about this.
    #[arg(long, default_value = duration_text(defaults().watch_retry.max), value_parser = parse_duration)]
    pub watch_retry_max: Duration,
    /// Type of the Service made for each Gateway.
    #[arg(long, default_value = defaults().service_type)]
    pub gateway_service_type: String,
    /// The Service (in `--namespace`) that selects every replica's pod, such as the webhook
    /// Service: its ready endpoints are what each Gateway's Service (selector-less, in the
    /// Gateway's namespace) sends traffic to.
    #[arg(long, default_value = defaults().replicas_service)]
    pub replicas_service: String,
    /// First port handed out to Gateway listeners (each Gateway gets its own ports).
    #[arg(long, default_value_t = defaults().port_base)]
    pub gateway_port_base: u16,
    /// Where the CRD conversion webhook (HTTPS) listens, in every replica (in a pod: its IP,
    /// `$(POD_IP):9443`; an IPv6 address may be written without brackets).
    #[arg(long, default_value = DEFAULT_WEBHOOK_ADDR, value_parser = super::webhook_args::parse_listen_addr)]
    pub webhook_addr: SocketAddr,
    /// The Service (`namespace/name`) the CRDs reach the webhook through; its DNS names are
    /// in the webhook certificate.
    #[arg(long, default_value = DEFAULT_WEBHOOK_SERVICE, value_parser = parse_service)]
    pub webhook_service: (String, String),
    /// Secret (in `--namespace`) holding the webhook certificate, which the leader issues.
    #[arg(long, default_value = DEFAULT_SECRET)]
    pub webhook_secret: String,
    /// Lifetime of each webhook certificate (and of the CA made with it).
    #[arg(long, default_value = duration_text(DEFAULT_VALIDITY), value_parser = parse_duration)]
    pub webhook_cert_validity: Duration,
    /// A new webhook certificate is made this long before the current one expires.
    #[arg(long, default_value = duration_text(DEFAULT_RENEW_BEFORE), value_parser = parse_duration)]
    pub webhook_cert_renew_before: Duration,
    #[command(flatten)]
    pub webhook_limits: super::webhook_args::WebhookArgs,
}

/// Parses the controller's namespace: a DNS label (RFC 1123), so that an empty
/// `POD_NAMESPACE` stops the start instead of electing a leader in namespace `""`.
fn parse_namespace(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err(
            "the controller's namespace is empty: set --namespace or the environment \
                    variable POD_NAMESPACE (the pod's metadata.namespace, from the downward API)"
                .to_owned(),
        );
    }
    let label = s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if !label {
        return Err(format!(
            "`{s}` is not a namespace name (lower-case letters, digits and `-`, at most 63); \
             set --namespace or POD_NAMESPACE"
        ));
    }
    Ok(s.to_owned())
}

/// Parses `namespace/name`.
fn parse_service(s: &str) -> Result<(String, String), String> {
    match s.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_owned(), name.to_owned()))
        }
        _ => Err(format!("`{s}` is not namespace/name")),
    }
}

impl KubeArgs {
    /// The provider options these flags describe, for a controller named `controller_name`.
    /// The Lease identity is `--pod-name`, else the host name. Fails on election timings
    /// client-go would refuse.
    pub fn options(self, controller_name: &str) -> anyhow::Result<KubeOptions> {
        check_leader_timing(
            self.leader_lease_duration,
            self.leader_renew_deadline,
            self.leader_retry_period,
        )?;
        anyhow::ensure!(
            !self.watch_retry_max.is_zero(),
            "--watch-retry-max must be greater than zero"
        );
        let pod_name = self.pod_name.unwrap_or_else(|| {
            std::env::var("HOSTNAME").unwrap_or_else(|_| "edgeplane".to_owned())
        });
        let mut options = KubeOptions::new(controller_name, &self.namespace, &pod_name);
        options.lease_name = self.lease_name;
        options.lease_duration = self.leader_lease_duration;
        options.lease_renew_deadline = self.leader_renew_deadline;
        options.lease_retry_period = self.leader_retry_period;
        options.resync = self.resync;
        options.watch_retry.max = self.watch_retry_max;
        options.service_type = self.gateway_service_type;
        options.replicas_service = self.replicas_service;
        options.port_base = self.gateway_port_base;
        Ok(options)
    }

    /// Where the webhook certificate is kept and how it rotates. Fails when the renewal
    /// window is not shorter than the validity.
    pub fn webhook_options(&self, namespace: &str) -> anyhow::Result<WebhookCertOptions> {
        let (validity, renew) = (self.webhook_cert_validity, self.webhook_cert_renew_before);
        anyhow::ensure!(
            !renew.is_zero() && renew < validity,
            "--webhook-cert-renew-before ({}) must be greater than zero and shorter than \
             --webhook-cert-validity ({})",
            duration_text(renew),
            duration_text(validity)
        );
        let (svc_ns, svc_name) = &self.webhook_service;
        let mut options = WebhookCertOptions::new(namespace, (svc_ns, svc_name));
        options.secret_name = self.webhook_secret.clone();
        options.rotation = Rotation {
            validity,
            renew_before: renew,
        };
        Ok(options)
    }
}

/// The holder must give up before others may take over (renew deadline < lease duration), and
/// get more than one try within its deadline (retry period < renew deadline); zero would spin.
fn check_leader_timing(lease: Duration, renew: Duration, retry: Duration) -> anyhow::Result<()> {
    for (flag, d) in [
        ("--leader-lease-duration", lease),
        ("--leader-renew-deadline", renew),
        ("--leader-retry-period", retry),
    ] {
        anyhow::ensure!(!d.is_zero(), "{flag} must be greater than zero");
    }
    anyhow::ensure!(
        renew < lease,
        "--leader-renew-deadline ({}) must be shorter than --leader-lease-duration ({})",
        duration_text(renew),
        duration_text(lease)
    );
    anyhow::ensure!(
        retry < renew,
        "--leader-retry-period ({}) must be shorter than --leader-renew-deadline ({})",
        duration_text(retry),
        duration_text(renew)
    );
    Ok(())
}

/// `serve --kubernetes`: reflectors feed the reconcile loop, which starts once every kind has
/// been listed (so `/readyz` means a full sync was published); the leader writes status.
pub(super) async fn serve_kubernetes(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let webhook_addr = args.kube.webhook_addr;
    let webhook_limits = args.kube.webhook_limits.limits();
    let client_ca = args.kube.webhook_limits.client_ca()?;
    let webhook = args.kube.webhook_options(&args.kube.namespace)?;
    let mut options = args.kube.options(&args.translate.controller_name)?;
    let client = kube::Client::try_default()
        .await
        .context("Kubernetes client (in-cluster or KUBECONFIG)")?;
    let certs = Arc::new(WebhookCerts::new());
    let listener = tokio::net::TcpListener::bind(webhook_addr)
        .await
        .with_context(|| format!("conversion webhook: listen on {webhook_addr}"))?;
    tracing::info!(addr = %webhook_addr, "conversion webhook listening");
    let (stop_webhook, stopped) = tokio::sync::oneshot::channel::<()>();
    let metrics = Metrics::new();
    let webhook_task = tokio::spawn(crate::webhook::serve_with(
        listener,
        certs.clone(),
        webhook_limits,
        client_ca,
        metrics.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    options.webhook = Some((webhook, certs));
    let mut stack = Stack::serve(
        metrics.clone(),
        Addresses {
            admin: args.admin_addr,
            dashboard: args.dashboard_addr,
        },
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
            ingress: args.translate.ingress(),
            controller_name: args.translate.controller_name,
            bind_address: args.translate.bind_address,
            // Gateways bind the ports of their Services; the implicit Ingress Gateways, which
            // have none, bind their own through the map.
            port_map: args.port_map.clone().unwrap_or_default(),
            sources: Default::default(),
            capabilities: crate::translate::Capabilities::KUBERNETES,
        },
    );
    shutdown_signal().await;
    provider.stop().await;
    let _ = stop_webhook.send(());
    stack.stop().await;
    match webhook_task.await {
        Ok(Err(e)) => tracing::warn!(error = %e, "conversion webhook failed"),
        Err(e) => tracing::warn!(error = %e, "conversion webhook task failed"),
        Ok(Ok(())) => {}
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        kube: KubeArgs,
    }

    fn options(args: &[&str]) -> anyhow::Result<KubeOptions> {
        let cli = Cli::try_parse_from(std::iter::once("edgeplane").chain(args.iter().copied()))?;
        cli.kube.options("c")
    }

    #[test]
    fn leader_timing_defaults_are_client_go_s() {
        let o = options(&[]).unwrap();
        assert_eq!(o.lease_duration, Duration::from_secs(15));
        assert_eq!(o.lease_renew_deadline, Duration::from_secs(10));
        assert_eq!(o.lease_retry_period, Duration::from_secs(2));
        let o = options(&[
            "--leader-lease-duration=3s",
            "--leader-renew-deadline",
            "2s",
            "--leader-retry-period=500ms",
        ])
        .unwrap();
        assert_eq!(o.lease_duration, Duration::from_secs(3));
        assert_eq!(o.lease_renew_deadline, Duration::from_secs(2));
        assert_eq!(o.lease_retry_period, Duration::from_millis(500));
    }

    #[test]
    fn webhook_flags_default_and_are_checked() {
        let cli = Cli::try_parse_from(["edgeplane"]).unwrap();
        assert_eq!(cli.kube.webhook_addr.to_string(), "0.0.0.0:9443");
        let o = cli.kube.webhook_options("sys").unwrap();
        assert_eq!(
            o.service,
            ("edgeplane-system".into(), "edgeplane-webhook".into())
        );
        assert_eq!(o.secret_name, "edgeplane-webhook-cert");
        assert_eq!(o.namespace, "sys");
        assert_eq!(o.rotation.validity, Duration::from_secs(365 * 24 * 3600));
        assert_eq!(
            o.crds,
            [
                "proxyconfigs.edgeplane.dev",
                "trafficpolicies.edgeplane.dev"
            ]
        );
        let cli = Cli::try_parse_from([
            "edgeplane",
            "--webhook-service=gw/hook",
            "--webhook-cert-validity=1h",
            "--webhook-cert-renew-before=2h",
        ])
        .unwrap();
        assert_eq!(cli.kube.webhook_service, ("gw".into(), "hook".into()));
        let e = cli.kube.webhook_options("sys").unwrap_err().to_string();
        assert!(e.contains("--webhook-cert-renew-before (2h)"), "{e}");
        assert!(Cli::try_parse_from(["edgeplane", "--webhook-service=hook"]).is_err());
    }

    #[test]
    fn leader_timing_is_checked_and_the_error_names_the_flag() {
        let err = |args: &[&str]| options(args).unwrap_err().to_string();
        let e = err(&["--leader-renew-deadline=15s"]);
        assert!(
            e.contains(
                "--leader-renew-deadline (15s) must be shorter than --leader-lease-duration (15s)"
            ),
            "{e}"
        );
        let e = err(&["--leader-retry-period=10s"]);
        assert!(
            e.contains("--leader-retry-period (10s) must be shorter than --leader-renew-deadline"),
            "{e}"
        );
        let e = err(&["--leader-retry-period=0s"]);
        assert!(
            e.contains("--leader-retry-period must be greater than zero"),
            "{e}"
        );
        let e = err(&["--leader-lease-duration=0"]);
        assert!(
            e.contains("--leader-lease-duration must be greater than zero"),
            "{e}"
        );
        let e = err(&["--leader-retry-period=soon"]);
        assert!(e.contains("--leader-retry-period"), "{e}");
    }
}
