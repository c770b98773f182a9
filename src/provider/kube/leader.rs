//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's timing: the holder
//! renews every retry period and steps down when no renewal succeeded within the renew
//! deadline; the others try every retry period and take over once the lease went unrenewed for
//! its duration, or at once when it was released. Writes are a get, then a create or a replace
//! with the read `resourceVersion`, so two replicas never both win. Only the holder writes
//! status and side objects (each a [`LeaderPass`] on its own task); every replica serves
//! traffic regardless.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::{oneshot, watch};

use crate::published::Published;

/// Settings of the election.
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    /// The controller's namespace, where the Lease lives.
    pub namespace: String,
    /// The Lease's name: replicas sharing it elect one leader.
    pub name: String,
    /// This replica's identity (its pod name).
    pub identity: String,
    /// How long others wait, after last seeing the record change, before taking over.
    pub duration: Duration,
    /// The holder steps down when no renewal succeeded for this long; shorter than `duration`
    /// so it stops writing before anyone else may start.
    pub renew_deadline: Duration,
    /// How often the holder renews and the others try to acquire.
    pub retry_period: Duration,
}

/// A Lease operation failed; the holder keeps its role until the renew deadline passes.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("lease {name}: {source}")]
    Api {
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("lease {name}: no answer within {after:?}")]
    Timeout { name: String, after: Duration },
}

/// What the elector last saw of someone else's lease, by local clock (so clock skew between
/// replicas does not matter).
#[derive(Debug, Clone, PartialEq)]
struct Observed {
    record: (Option<String>, Option<String>),
    at: Instant,
}

/// The holder's side of the renew deadline: whether it still leads after a round, given when
/// its last successful renewal started.
#[derive(Debug)]
struct Tenure {
    deadline: Duration,
    renewed: Option<Instant>,
}

impl Tenure {
    /// Records a round that started at `started` and returns whether this replica leads. A
    /// failed round keeps the role only while the last renewal is younger than the deadline;
    /// a round that found another holder ends it at once.
    fn after_round(&mut self, started: Instant, result: &Result<bool, LeaseError>) -> bool {
        match result {
            Ok(true) => {
                self.renewed = Some(started);
                true
            }
            Ok(false) => {
                self.renewed = None;
                false
            }
            Err(_) => {
                let within = self
                    .renewed
                    .is_some_and(|t| started.saturating_duration_since(t) < self.deadline);
                if !within {
                    self.renewed = None;
                }
                within
            }
        }
    }

    /// Time left for the next renewal to succeed (`None` when not leading).
    fn remaining(&self, now: Instant) -> Option<Duration> {
        self.renewed.map(|t| {
            self.deadline
                .saturating_sub(now.saturating_duration_since(t))
        })
    }
}

/// Runs the election for one replica.
pub struct Elector {
    api: Api<Lease>,
    options: LeaseOptions,
    observed: Option<Observed>,
}

impl Elector {
    /// An elector that has seen no record yet, so it waits a whole lease duration before
    /// taking over a lease someone else holds.
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
            // A released lease (no holder) is free at once.
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

    /// Gives the lease up (on shutdown) the way client-go's `ReleaseOnCancel` does: no
    /// holder, a one-second duration, acquire and renew times of now. Others take it at their
    /// next retry. A lease held by someone else is left alone; a conflict means someone wrote
    /// in between, so nothing is released.
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
        let now = MicroTime(jiff::Timestamp::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        let name = self.options.name.clone();
        self.api
            .replace(&name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// One round bounded in time: while leading, by what is left of the renew deadline;
    /// otherwise by the renew deadline, so a hung request never stalls the loop.
    async fn bounded_round(&mut self, limit: Duration) -> Result<bool, LeaseError> {
        match tokio::time::timeout(limit, self.try_acquire_or_renew()).await {
            Ok(r) => r,
            Err(_) => Err(LeaseError::Timeout {
                name: self.options.name.clone(),
                after: limit,
            }),
        }
    }

    /// Runs rounds every retry period, publishing whether this replica leads, until `stop`
    /// fires: then it steps down and releases the lease if it holds it. If `stop` is dropped
    /// unsent, it returns without releasing.
    pub async fn run(mut self, tx: watch::Sender<bool>, mut stop: oneshot::Receiver<()>) {
        let mut tenure = Tenure {
            deadline: self.options.renew_deadline,
            renewed: None,
        };
        let release = loop {
            let started = Instant::now();
            let limit = tenure
                .remaining(started)
                .unwrap_or(self.options.renew_deadline);
            let result = self.bounded_round(limit).await;
            if let Err(e) = &result {
                tracing::warn!(error = %e, "lease round failed");
            }
            let leading = tenure.after_round(started, &result);
            publish(&tx, leading, &self.options.identity);
            let next = tokio::time::Instant::from_std(started + self.options.retry_period);
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                r = &mut stop => break r.is_ok(),
            }
        };
        if !release {
            return;
        }
        publish(&tx, false, &self.options.identity);
        let limit = self.options.renew_deadline;
        match tokio::time::timeout(limit, self.release()).await {
            Ok(Ok(())) => tracing::info!(identity = %self.options.identity, "lease released"),
            Ok(Err(e)) => tracing::warn!(error = %e, "lease not released"),
            Err(_) => tracing::warn!(after = ?limit, "lease not released in time"),
        }
    }
}

/// Sends `leading` if it changed, with a log line.
fn publish(tx: &watch::Sender<bool>, leading: bool, identity: &str) {
    tx.send_if_modified(|l| {
        let changed = *l != leading;
        if changed {
            tracing::info!(identity, leading, "leadership changed");
        }
        *l = leading;
        changed
    });
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
                renew_deadline: Duration::from_millis(20),
                retry_period: Duration::from_millis(10),
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

    fn failed() -> Result<bool, LeaseError> {
        Err(LeaseError::Timeout {
            name: "l".into(),
            after: Duration::from_secs(1),
        })
    }

    #[test]
    fn the_holder_steps_down_when_no_renewal_succeeds_within_the_deadline() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut tenure = Tenure {
            deadline: s(10),
            renewed: None,
        };
        // Failures without a renewal never make a leader.
        assert!(!tenure.after_round(t0, &failed()));
        assert!(tenure.after_round(t0, &Ok(true)));
        assert_eq!(tenure.remaining(t0 + s(4)), Some(s(6)));
        // Failed rounds keep the role while the last renewal is younger than the deadline.
        assert!(tenure.after_round(t0 + s(2), &failed()));
        assert!(tenure.after_round(t0 + s(9), &failed()));
        assert!(!tenure.after_round(t0 + s(10), &failed()));
        assert_eq!(tenure.remaining(t0 + s(11)), None);
        // A later failure does not bring it back; a renewal does, with a fresh deadline.
        assert!(!tenure.after_round(t0 + s(11), &failed()));
        assert!(tenure.after_round(t0 + s(12), &Ok(true)));
        assert!(tenure.after_round(t0 + s(21), &failed()));
        // Another holder ends the role at once.
        assert!(!tenure.after_round(t0 + s(22), &Ok(false)));
        assert!(!tenure.after_round(t0 + s(23), &failed()));
    }
}
