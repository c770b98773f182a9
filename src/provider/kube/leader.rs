//! Leader election on a `coordination.k8s.io/v1` Lease: get, then create or replace with the
//! read `resourceVersion`, so two replicas never both win. Only the holder writes status and
//! side objects (each a [`LeaderPass`] on its own task); every replica serves traffic
//! regardless.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;

use crate::published::Published;

/// Settings of the election.
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    pub namespace: String,
    pub name: String,
    /// This replica's identity (its pod name).
    pub identity: String,
    /// How long a lease stays valid without renewal.
    pub duration: Duration,
    /// How often the holder renews and the others try to acquire.
    pub renew_every: Duration,
}

/// A Lease operation failed; the replica keeps its current role until the lease would expire.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("lease {name}: {source}")]
    Api {
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// What the elector last saw of someone else's lease, by local clock (so clock skew between
/// replicas does not matter).
#[derive(Debug, Clone, PartialEq)]
struct Observed {
    record: (Option<String>, Option<String>),
    at: Instant,
}

/// Runs the election for one replica.
pub struct Elector {
    api: Api<Lease>,
    options: LeaseOptions,
    observed: Option<Observed>,
}

impl Elector {
    pub fn new(client: Client, options: LeaseOptions) -> Self {
        Self {
            api: Api::namespaced(client, &options.namespace),
            options,
            observed: None,
        }
    }

    fn duration_secs(&self) -> i32 {
        i32::try_from(self.options.duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    fn err(&self, source: kube::Error) -> LeaseError {
        LeaseError::Api {
            name: self.options.name.clone(),
            source: Box::new(source),
        }
    }

    /// The Lease as the API server has it now (`None`: not created yet).
    async fn current(&self) -> Result<Option<Lease>, LeaseError> {
        self.api
            .get_opt(&self.options.name)
            .await
            .map_err(|e| self.err(e))
    }

    /// One round: create, renew or take over the lease. `Ok(true)` while this replica holds it.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaseError> {
        let now = MicroTime(jiff::Timestamp::now());
        let Some(mut lease) = self.current().await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.options.name.clone()),
                    namespace: Some(self.options.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.options.identity.clone()),
                    lease_duration_seconds: Some(self.duration_secs()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return self.write(self.api.create(&PostParams::default(), &lease).await);
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        if holder.as_deref() == Some(self.options.identity.as_str()) {
            spec.renew_time = Some(now);
            spec.lease_duration_seconds = Some(self.duration_secs());
        } else {
            if holder.is_some() && !self.expired(spec) {
                return Ok(false);
            }
            spec.holder_identity = Some(self.options.identity.clone());
            spec.acquire_time = Some(now.clone());
            spec.renew_time = Some(now);
            spec.lease_duration_seconds = Some(self.duration_secs());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        let name = self.options.name.clone();
        self.write(
            self.api
                .replace(&name, &PostParams::default(), &lease)
                .await,
        )
    }

    /// A conflict means another replica wrote first: not an error, just not the leader.
    fn write(&mut self, result: Result<Lease, kube::Error>) -> Result<bool, LeaseError> {
        match result {
            Ok(_) => {
                self.observed = None;
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(self.err(e)),
        }
    }

    /// True when another holder's record has not changed for a whole lease duration, measured
    /// on this replica's clock from when it first saw that record.
    fn expired(&mut self, spec: &LeaseSpec) -> bool {
        let record = (
            spec.holder_identity.clone(),
            spec.renew_time.as_ref().map(|t| t.0.to_string()),
        );
        let duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.options.duration, Duration::from_secs);
        match &self.observed {
            Some(o) if o.record == record => o.at.elapsed() >= duration,
            _ => {
                self.observed = Some(Observed {
                    record,
                    at: Instant::now(),
                });
                false
            }
        }
    }

    /// Gives the lease up (on shutdown) so another replica takes over without waiting.
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        let Some(mut lease) = self.current().await? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.options.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        let name = self.options.name.clone();
        self.api
            .replace(&name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Runs rounds forever, publishing whether this replica leads. After failed rounds the
    /// replica steps down once its last successful renewal is older than the lease duration,
    /// before anyone else may take over.
    pub async fn run(mut self, tx: watch::Sender<bool>) {
        let mut renewed: Option<Instant> = None;
        loop {
            let leading = match self.try_acquire_or_renew().await {
                Ok(true) => {
                    renewed = Some(Instant::now());
                    true
                }
                Ok(false) => false,
                Err(e) => {
                    tracing::warn!(error = %e, "lease round failed");
                    // Keep a margin of one renew interval below the lease duration.
                    let margin = self
                        .options
                        .duration
                        .saturating_sub(self.options.renew_every);
                    renewed.is_some_and(|t| t.elapsed() < margin)
                }
            };
            tx.send_if_modified(|l| {
                let changed = *l != leading;
                if changed {
                    tracing::info!(identity = %self.options.identity, leading, "leadership changed");
                }
                *l = leading;
                changed
            });
            tokio::time::sleep(self.options.renew_every).await;
        }
    }
}

/// Work only the leader does after each publication: status writes, side objects. Each runs on
/// its own task through [`run_leader_pass`], so one never waits for the other.
pub trait LeaderPass: Send {
    /// One pass over the current publication and caches; false when something failed and the
    /// pass should run again after the retry delay even if nothing new is published.
    fn run(&mut self) -> impl Future<Output = bool> + Send;

    /// Leadership is not held: forget what was remembered of earlier writes.
    fn forget(&mut self) {}
}

/// Runs `pass` while this replica leads and a table has been published: after each
/// publication and each change of leadership, and again `retry` after a failed pass. Returns
/// when the publisher or the election is gone.
pub async fn run_leader_pass<P: LeaderPass>(
    mut pass: P,
    published: Arc<Published>,
    mut leader: watch::Receiver<bool>,
    retry: Duration,
) {
    let mut publications = published.subscribe();
    let mut failed = false;
    loop {
        let leading = *leader.borrow_and_update();
        if !leading {
            pass.forget();
        }
        if leading && published.is_ready() {
            failed = !pass.run().await;
        }
        tokio::select! {
            r = publications.changed() => if r.is_err() { return },
            r = leader.changed() => if r.is_err() { return },
            () = tokio::time::sleep(retry), if failed => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn expiry_is_measured_from_the_first_sight_of_a_record() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let mut e = Elector::new(
            client,
            LeaseOptions {
                namespace: "ns".into(),
                name: "l".into(),
                identity: "me".into(),
                duration: Duration::from_millis(30),
                renew_every: Duration::from_millis(10),
            },
        );
        let mut spec = LeaseSpec {
            holder_identity: Some("other".into()),
            renew_time: Some(MicroTime("2020-01-01T00:00:00Z".parse().unwrap())),
            lease_duration_seconds: None,
            ..LeaseSpec::default()
        };
        // An old renewTime alone does not expire a lease: skewed clocks must not matter.
        assert!(!e.expired(&spec));
        assert!(!e.expired(&spec));
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(e.expired(&spec));
        // A renewal seen restarts the clock.
        spec.renew_time = Some(MicroTime("2020-01-01T00:00:01Z".parse().unwrap()));
        assert!(!e.expired(&spec));
    }
}
