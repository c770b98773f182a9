//! The Kubernetes provider: reflectors of every kind feed the same snapshot channel the
//! reconcile loop consumes; leader election decides which replica writes status and keeps the
//! side objects (Gateway Services, finalizers), each on its own task following what the
//! reconcile loop publishes. Every replica translates and serves.

pub mod binding;
pub mod changes;
pub mod crd_bundle;
pub mod gateway_endpoints;
pub mod gateway_service;
pub mod leader;
pub mod retry;
pub mod service_meta;
pub mod service_spec;
pub mod status;
pub mod stores;
pub mod watch;
pub mod webhook_cert;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube::Client;
use tokio::sync::oneshot;
use tokio::sync::watch as channel;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::published::Published;
use crate::snapshot::Snapshot;
use crate::webhook::WebhookCerts;

pub use crd_bundle::WebhookCertOptions;
pub use leader::LeaseOptions;
pub use retry::RetryPolicy;
pub use service_spec::ServiceOptions;

/// Namespace used when neither `--namespace` nor the pod's namespace is known.
pub const DEFAULT_CONTROLLER_NAMESPACE: &str = "edgeplane-system";
/// The Service selecting every replica (the conversion webhook's, which every replica serves).
pub const DEFAULT_REPLICAS_SERVICE: &str = "edgeplane-webhook";

/// Everything the provider needs besides the client.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    pub controller_name: String,
    /// The controller's namespace: its Lease and the replicas' Service live there.
    pub namespace: String,
    pub lease_name: String,
    /// This replica's identity in the Lease.
    pub pod_name: String,
    /// Leader election timing, as client-go's: others take over a lease unrenewed this long.
    pub lease_duration: Duration,
    /// The holder steps down when it could not renew for this long.
    pub lease_renew_deadline: Duration,
    /// How often the holder renews and the others try to acquire.
    pub lease_retry_period: Duration,
    /// A full snapshot is sent this often even without changes.
    pub resync: Duration,
    /// Waits between a reflector's failed lists or watches (API errors, a kind whose CRD is
    /// not installed).
    pub watch_retry: RetryPolicy,
    /// Delay before a failed status or side-object pass is retried when nothing else changes.
    pub status_retry: Duration,
    pub service_type: String,
    /// The Service (in `namespace`) selecting every replica's pod; see
    /// [`ServiceOptions::replicas_service`].
    pub replicas_service: String,
    pub port_base: u16,
    pub port_count: u16,
    /// The conversion webhook's certificate: where it is kept (the leader issues, rotates and
    /// publishes it in the CRDs' `caBundle`) and the server every replica loads it into.
    /// `None`: no webhook in this process.
    pub webhook: Option<(WebhookCertOptions, Arc<WebhookCerts>)>,
}

impl KubeOptions {
    /// Defaults for a controller named `controller_name` running as `pod_name`.
    pub fn new(controller_name: &str, namespace: &str, pod_name: &str) -> Self {
        Self {
            controller_name: controller_name.to_owned(),
            namespace: namespace.to_owned(),
            lease_name: "edgeplane-leader".to_owned(),
            pod_name: pod_name.to_owned(),
            lease_duration: Duration::from_secs(15),
            lease_renew_deadline: Duration::from_secs(10),
            lease_retry_period: Duration::from_secs(2),
            resync: Duration::from_secs(300),
            watch_retry: RetryPolicy::default(),
            status_retry: Duration::from_secs(2),
            service_type: "LoadBalancer".to_owned(),
            replicas_service: DEFAULT_REPLICAS_SERVICE.to_owned(),
            port_base: 10080,
            port_count: 10000,
            webhook: None,
        }
    }
}

/// A running provider. [`KubeProvider::stop`] shuts it down gracefully, releasing the lease;
/// dropping it aborts every task at once and leaves the lease to expire, as a crash would.
pub struct KubeProvider {
    /// Snapshots for `Reconciler::run`. The first value is a placeholder: the first full
    /// snapshot arrives as the first change, once every store has listed.
    pub snapshots: channel::Receiver<Arc<Snapshot>>,
    /// Whether this replica holds the lease.
    pub leader: channel::Receiver<bool>,
    pub stores: watch::Stores,
    /// The election task and what tells it to step down and release the lease.
    elector: Option<(JoinHandle<()>, oneshot::Sender<()>)>,
    /// Bound on the wait for the release at shutdown.
    release_within: Duration,
    tasks: Vec<JoinHandle<()>>,
}

impl KubeProvider {
    /// Starts reflectors, the snapshot loop, the election, the status writer and the keeper of
    /// side objects (both follow what the reconcile loop publishes into `published`, and act
    /// only while this replica leads).
    pub fn start(
        client: Client,
        options: KubeOptions,
        published: Arc<Published>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let trigger = watch::Trigger::reporting(metrics.clone());
        let reflectors =
            watch::reflectors::<Snapshot>(&client, options.watch_retry, &trigger, &metrics);
        let stores = reflectors.stores.clone();
        let mut tasks: Vec<JoinHandle<()>> =
            reflectors.tasks.into_iter().map(tokio::spawn).collect();
        let (tx, snapshots) = channel::channel(Arc::new(Snapshot::default()));
        tasks.push(tokio::spawn(watch::run_snapshots(
            stores.clone(),
            trigger,
            tx,
            options.resync,
            watch::bind_gateways,
        )));
        let lease = LeaseOptions {
            namespace: options.namespace.clone(),
            name: options.lease_name.clone(),
            identity: options.pod_name.clone(),
            duration: options.lease_duration,
            renew_deadline: options.lease_renew_deadline,
            retry_period: options.lease_retry_period,
        };
        // The round in progress finishes (within the renew deadline) before the release, which
        // gets the renew deadline again; a little slack on top.
        let release_within = options.lease_renew_deadline * 2 + Duration::from_secs(1);
        let (leader_tx, leader) = channel::channel(false);
        let (release_tx, release_rx) = oneshot::channel();
        let elector = leader::Elector::new(client.clone(), lease);
        let elector = (tokio::spawn(elector.run(leader_tx, release_rx)), release_tx);
        let keeper = gateway_service::Keeper::new(
            client.clone(),
            stores.clone(),
            ServiceOptions {
                namespace: options.namespace.clone(),
                service_type: options.service_type.clone(),
                replicas_service: options.replicas_service.clone(),
                port_base: options.port_base,
                port_count: options.port_count,
            },
            options.controller_name.clone(),
        );
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "edgeplane".to_owned(),
                instance: Some(options.pod_name.clone()),
            },
        );
        let mut leading = leader.clone();
        let gauge = metrics.control.leader.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                gauge.set(i64::from(*leading.borrow_and_update()));
                if leading.changed().await.is_err() {
                    return;
                }
            }
        }));
        tasks.push(tokio::spawn(leader::run_leader_pass(
            keeper,
            published.clone(),
            leader.clone(),
            options.status_retry,
        )));
        let writer = status::StatusWriter::new(
            client.clone(),
            stores.clone(),
            published,
            leader.clone(),
            options.controller_name.clone(),
            recorder,
        );
        tasks.push(tokio::spawn(writer.run(options.status_retry)));
        if let Some((cert_options, certs)) = options.webhook {
            let install: crd_bundle::Install = Arc::new(move |pair| {
                certs
                    .set_pem(&pair.cert_pem, &pair.key_pem)
                    .map_err(|e| e.to_string())
            });
            tasks.push(tokio::spawn(crd_bundle::run(
                client.clone(),
                cert_options,
                leader.clone(),
                install,
            )));
        }
        Self {
            snapshots,
            leader,
            stores,
            elector: Some(elector),
            release_within,
            tasks,
        }
    }

    /// Whether this replica currently holds the lease.
    pub fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    /// Stops watching and writing, then steps down and gives the lease up if held, so another
    /// replica takes over at its next retry. The last published table keeps serving until the
    /// proxy stops.
    pub async fn stop(mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        let Some((mut handle, release)) = self.elector.take() else {
            return;
        };
        if release.send(()).is_err() {
            return;
        }
        if tokio::time::timeout(self.release_within, &mut handle)
            .await
            .is_err()
        {
            tracing::warn!(after = ?self.release_within, "lease release did not finish");
            handle.abort();
        }
    }
}

impl Drop for KubeProvider {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Some((handle, _)) = &self.elector {
            handle.abort();
        }
    }
}
