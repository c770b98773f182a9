//! Keeps the conversion webhook usable in a cluster. Every replica loads the serving
//! certificate from the webhook Secret of the controller's namespace into its webhook server
//! as the Secret changes. The leader issues and rotates that certificate (see `webhook_cert`)
//! and keeps `spec.conversion.webhook.clientConfig.caBundle` of the edgeplane CRDs equal to the
//! Secret's CA bundle. A CRD that is not installed is logged once and skipped: the rest of the
//! controller does not depend on it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::stream::{self, BoxStream};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde_json::json;
use tokio::sync::watch as channel;

use super::webhook_cert::{
    dns_names, expiry, next_check, plan, CertError, Pair, Rotation, Step, Stored, STAGED_ANNOTATION,
};
use crate::kinds::crd::{ProxyConfig, TrafficPolicy};

/// Default name of the Secret holding the webhook's certificate.
pub const DEFAULT_SECRET: &str = "edgeplane-webhook-cert";
/// Default lifetime of the webhook certificate (one year).
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// Default time before expiry at which a new certificate is staged (30 days).
pub const DEFAULT_RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Where the certificate lives and what it is for.
#[derive(Debug, Clone)]
pub struct WebhookCertOptions {
    /// Namespace of the Secret (the controller's).
    pub namespace: String,
    pub secret_name: String,
    /// The webhook Service (`namespace`, `name`) the certificate names.
    pub service: (String, String),
    /// Names of the CRDs whose `caBundle` is kept (`plural.group`).
    pub crds: Vec<String>,
    pub rotation: Rotation,
    /// Delay before a failed pass is tried again.
    pub retry: Duration,
}

impl WebhookCertOptions {
    /// Defaults for a controller in `namespace` whose webhook Service is `service`.
    pub fn new(namespace: &str, service: (&str, &str)) -> Self {
        Self {
            namespace: namespace.to_owned(),
            secret_name: DEFAULT_SECRET.to_owned(),
            service: (service.0.to_owned(), service.1.to_owned()),
            crds: vec![crd_name::<ProxyConfig>(), crd_name::<TrafficPolicy>()],
            rotation: Rotation {
                validity: DEFAULT_VALIDITY,
                renew_before: DEFAULT_RENEW_BEFORE,
            },
            retry: Duration::from_secs(5),
        }
    }
}

/// `plural.group`, the name of a kind's CRD.
pub fn crd_name<K: Resource<DynamicType = ()>>() -> String {
    format!("{}.{}", K::plural(&()), K::group(&()))
}

/// Puts a certificate into the webhook server; an error leaves the old one serving.
pub type Install = Arc<dyn Fn(&Pair) -> Result<(), String> + Send + Sync>;

/// A pass of the leader failed; it runs again after the retry delay.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: Box<kube::Error>,
    },
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> BundleError {
    let what = what.into();
    move |source| BundleError::Api {
        what,
        source: Box::new(source),
    }
}

enum Seen {
    Secret(Box<Secret>),
    Crd,
}

/// Loads the certificate into every replica's webhook server, and, while `leader` says so,
/// keeps the certificate and the CRDs' bundle. Runs until `leader`'s sender is gone.
pub async fn run(
    client: Client,
    options: WebhookCertOptions,
    mut leader: channel::Receiver<bool>,
    install: Install,
) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &options.namespace);
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let by_name = |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
    let secret_events: BoxStream<'static, Seen> =
        watcher(secrets.clone(), by_name(&options.secret_name))
            .default_backoff()
            .filter_map(|e| async move {
                match e {
                    Ok(Event::Apply(s) | Event::InitApply(s)) => Some(Seen::Secret(Box::new(s))),
                    Ok(_) => None,
                    Err(e) => {
                        tracing::debug!(error = %e, "webhook Secret watch failed; retrying");
                        None
                    }
                }
            })
            .boxed();
    let mut streams = vec![secret_events];
    for name in &options.crds {
        streams.push(
            watcher(crds.clone(), by_name(name))
                .default_backoff()
                .filter_map(|e| async move { e.ok().map(|_| Seen::Crd) })
                .boxed(),
        );
    }
    let mut events = stream::select_all(streams);
    let mut keeper = Keeper {
        secrets,
        crds,
        dns: dns_names(&options.service.0, &options.service.1),
        options,
        missing_logged: BTreeSet::new(),
    };
    let mut loaded: Option<Pair> = None;
    let mut wait = Duration::ZERO;
    loop {
        let leading = *leader.borrow_and_update();
        if leading {
            wait = match keeper.pass().await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook certificate not kept");
                    keeper.options.retry
                }
            };
        }
        tokio::select! {
            seen = events.next() => match seen {
                Some(Seen::Secret(s)) => load(&s, &mut loaded, &install),
                Some(Seen::Crd) => {}
                None => return,
            },
            r = leader.changed() => {
                if r.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep(wait), if leading => {}
        }
    }
}

/// Installs the Secret's served certificate when it is not the one loaded already.
fn load(secret: &Secret, loaded: &mut Option<Pair>, install: &Install) {
    let Some(pair) = Stored::from_secret(secret).serving else {
        return;
    };
    if loaded.as_ref() == Some(&pair) {
        return;
    }
    match install(&pair) {
        Ok(()) => {
            tracing::info!(expires = ?expiry(&pair), "webhook certificate loaded");
            *loaded = Some(pair);
        }
        Err(e) => tracing::warn!(error = %e, "webhook certificate not loaded"),
    }
}

/// The leader's side: the Secret and the CRDs' bundle.
struct Keeper {
    secrets: Api<Secret>,
    crds: Api<CustomResourceDefinition>,
    options: WebhookCertOptions,
    dns: Vec<String>,
    missing_logged: BTreeSet<String>,
}

impl Keeper {
    /// One pass; returns how long until the next one is due when nothing changes.
    async fn pass(&mut self) -> Result<Duration, BundleError> {
        let name = self.options.secret_name.clone();
        let secret = self
            .secrets
            .get_opt(&name)
            .await
            .map_err(api_err(format!("read Secret {name}")))?;
        let stored = secret.as_ref().map(Stored::from_secret).unwrap_or_default();
        let installed = self.installed_crds().await?;
        let trusted = !stored.bundle.is_empty()
            && installed
                .iter()
                .all(|(_, b)| b.as_deref() == Some(stored.bundle.as_bytes()));
        let now = SystemTime::now();
        let stored = match plan(&stored, trusted, self.options.rotation, &self.dns, now)? {
            Step::Keep => stored,
            Step::Write(new) => {
                self.write_secret(secret, &new).await?;
                new
            }
        };
        for (crd, bundle) in &installed {
            if bundle.as_deref() != Some(stored.bundle.as_bytes()) {
                let patch = json!({"spec": {"conversion": {"webhook": {"clientConfig": {
                    "caBundle": ByteString(stored.bundle.as_bytes().to_vec())}}}}});
                self.crds
                    .patch(crd, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(api_err(format!("caBundle of CRD {crd}")))?;
                tracing::info!(crd, "conversion webhook caBundle updated");
            }
        }
        Ok(next_check(&stored, self.options.rotation, now))
    }

    /// The installed CRDs that convert through a webhook, with their current `caBundle`.
    async fn installed_crds(&mut self) -> Result<Vec<(String, Option<Vec<u8>>)>, BundleError> {
        let mut out = Vec::new();
        for name in self.options.crds.clone() {
            let crd = self
                .crds
                .get_opt(&name)
                .await
                .map_err(api_err(format!("read CRD {name}")))?;
            let Some(crd) = crd else {
                if self.missing_logged.insert(name.clone()) {
                    tracing::warn!(crd = %name, "CRD not installed; its kind is not served");
                }
                continue;
            };
            self.missing_logged.remove(&name);
            let Some(conversion) = crd.spec.conversion.filter(|c| c.strategy == "Webhook") else {
                continue;
            };
            let bundle = conversion
                .webhook
                .and_then(|w| w.client_config)
                .and_then(|c| c.ca_bundle)
                .map(|b| b.0);
            out.push((name, bundle));
        }
        Ok(out)
    }

    /// Creates the Secret, or replaces it guarded by the read resourceVersion.
    async fn write_secret(
        &self,
        current: Option<Secret>,
        stored: &Stored,
    ) -> Result<(), BundleError> {
        let name = &self.options.secret_name;
        let mut annotations = current
            .as_ref()
            .and_then(|s| s.metadata.annotations.clone())
            .unwrap_or_default();
        match stored.staged_at {
            Some(t) => annotations.insert(STAGED_ANNOTATION.to_owned(), t.to_string()),
            None => annotations.remove(STAGED_ANNOTATION),
        };
        let mut labels = current
            .as_ref()
            .and_then(|s| s.metadata.labels.clone())
            .unwrap_or_default();
        labels.insert(
            "app.kubernetes.io/managed-by".to_owned(),
            "edgeplane".to_owned(),
        );
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.options.namespace.clone()),
                resource_version: current
                    .as_ref()
                    .and_then(|s| s.metadata.resource_version.clone()),
                labels: Some(labels),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".to_owned()),
            data: Some(stored.data()),
            ..Secret::default()
        };
        let pp = PostParams::default();
        let (what, result) = if current.is_some() {
            ("replace", self.secrets.replace(name, &pp, &secret).await)
        } else {
            ("create", self.secrets.create(&pp, &secret).await)
        };
        result.map_err(api_err(format!("{what} Secret {name}")))?;
        let phase = match (&stored.next, current.is_some()) {
            (_, false) => "issued",
            (Some(_), true) => "staged for rotation",
            (None, true) => "now served",
        };
        tracing::info!(secret = %name, phase, "webhook certificate written");
        Ok(())
    }
}
