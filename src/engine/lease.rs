//! One engine at a time: a `coordination.k8s.io/v1` Lease decides which wheelhouse (a
//! dashboard or a controller) reconciles. The others observe and send their commands
//! through the spec and annotations, so several operators opening the dashboard during
//! one incident never run two engines against the same releases.
//!
//! Election follows client-go's leaderelection:
//! - Expiry is judged by locally observed time: a candidate notes when it last saw the
//!   lease record change and takes over only after the record's lease duration has passed
//!   on its own clock since then. The holder's `renewTime` is never compared with the
//!   local clock, so a dashboard on a laptop with a skewed clock cannot take over early
//!   (nor wait forever).
//! - The leader renews every `retry`; every call to the API server has a timeout; a
//!   leader that has not renewed for `renew_deadline` (shorter than the lease duration)
//!   steps down, so it stops acting before any other candidate may take over.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub const LEASE_NAME: &str = "wheelhouse-engine";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not decided yet (first attempt in flight).
    Unknown,
    /// This process holds the lease and runs the engine.
    Leader,
    /// Another process holds it; this one works as a client.
    Follower { holder: String },
    /// This process cannot run the engine (e.g. it cannot render charts) and does not
    /// compete for the lease; it works as a client. The reason says how to fix it.
    Unable { reason: String },
}

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub identity: String,
    /// How long a lease lasts without an observed change before another may take it.
    pub duration: Duration,
    /// A leader that has not renewed for this long steps down; shorter than `duration`,
    /// so it has stopped before anyone else may take over.
    pub renew_deadline: Duration,
    /// How often the holder renews and a follower retries.
    pub retry: Duration,
    /// Limit on each call to the API server.
    pub call_timeout: Duration,
}

impl LeaseConfig {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            identity: identity.into(),
            duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry: Duration::from_secs(2),
            call_timeout: Duration::from_secs(5),
        }
    }
}

/// What a candidate has seen of the lease: its record, and when (on the local monotonic
/// clock) that record last changed.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    record: Option<Record>,
    changed_at: Option<Instant>,
}

/// The parts of a lease record whose change shows its holder is alive.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: Option<String>,
    renew_time: Option<String>,
    acquire_time: Option<String>,
    transitions: Option<i32>,
    duration: Option<i32>,
}

impl Record {
    fn of(spec: &LeaseSpec) -> Self {
        let time = |t: &Option<MicroTime>| t.as_ref().map(|t| t.0.to_string());
        Self {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            renew_time: time(&spec.renew_time),
            acquire_time: time(&spec.acquire_time),
            transitions: spec.lease_transitions,
            duration: spec.lease_duration_seconds,
        }
    }
}

/// What to do with the lease as it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Create,
    Renew,
    TakeOver,
    Follow(String),
}

/// The decision, pure: `now` is the local monotonic clock; the record's own times only
/// tell whether it changed.
pub fn decide(
    spec: Option<&LeaseSpec>,
    identity: &str,
    observed: &mut Observation,
    now: Instant,
    default_duration: Duration,
) -> Step {
    let Some(spec) = spec else {
        return Step::Create;
    };
    let record = Record::of(spec);
    if observed.record.as_ref() != Some(&record) {
        observed.record = Some(record.clone());
        observed.changed_at = Some(now);
    }
    match &record.holder {
        Some(h) if h == identity => Step::Renew,
        Some(h) => {
            let duration = record
                .duration
                .and_then(|d| u64::try_from(d).ok())
                .map_or(default_duration, Duration::from_secs);
            let changed_at = observed.changed_at.unwrap_or(now);
            if now.duration_since(changed_at) < duration {
                Step::Follow(h.clone())
            } else {
                Step::TakeOver
            }
        }
        None => Step::TakeOver,
    }
}

/// A unique identity for this process: host, pid and a random suffix.
pub fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}/{}/{nanos:08x}", std::process::id())
}

/// One attempt to take or renew the lease, as judged by what this candidate observed so
/// far (`observed` persists between attempts). Optimistic concurrency (resourceVersion)
/// makes two simultaneous attempts end with one winner.
pub async fn try_acquire(
    api: &Api<Lease>,
    config: &LeaseConfig,
    observed: &mut Observation,
) -> kube::Result<Role> {
    let now = Timestamp::now();
    let ours = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        lease_duration_seconds: Some(config.duration.as_secs() as i32),
        acquire_time: acquired.or(Some(MicroTime(now))),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    };
    let lease = api.get_opt(LEASE_NAME).await?;
    let spec = lease.as_ref().map(|l| l.spec.clone().unwrap_or_default());
    let step = decide(
        spec.as_ref(),
        &config.identity,
        observed,
        Instant::now(),
        config.duration,
    );
    let (mut lease, new_spec) = match (step, lease, spec) {
        (Step::Create, _, _) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(LEASE_NAME.into()),
                    namespace: Some(config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(ours(0, None)),
            };
            return match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Role::Leader),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(Role::Unknown),
                Err(e) => Err(e),
            };
        }
        (Step::Follow(holder), _, _) => return Ok(Role::Follower { holder }),
        (Step::Renew, Some(lease), Some(spec)) => {
            let renewed = ours(spec.lease_transitions.unwrap_or(0), spec.acquire_time);
            (lease, renewed)
        }
        (Step::TakeOver, Some(lease), Some(spec)) => {
            let taken = ours(spec.lease_transitions.unwrap_or(0) + 1, None);
            (lease, taken)
        }
        _ => return Ok(Role::Unknown),
    };
    lease.spec = Some(new_spec);
    match api
        .replace(LEASE_NAME, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(Role::Leader),
        // Someone else wrote it between our read and write; look again next round.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(Role::Unknown),
        Err(e) => Err(e),
    }
}

/// Gives the lease up (on shutdown) so another engine can take over at once.
pub async fn release(api: &Api<Lease>, config: &LeaseConfig) -> kube::Result<()> {
    let Some(mut lease) = api.get_opt(LEASE_NAME).await? else {
        return Ok(());
    };
    let Some(spec) = lease.spec.as_mut() else {
        return Ok(());
    };
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.renew_time = None;
    match api
        .replace(LEASE_NAME, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Keeps trying to hold the lease until `stop` is cancelled, publishing the role. A
/// leader that cannot renew before its lease would expire steps down. The task gives the
/// lease up when stopped; await its handle to be sure that happened.
///
/// `able` runs first: an engine that could not do its work (it cannot render charts)
/// never takes the lease from one that can, and says why once.
pub fn run(
    client: Client,
    config: LeaseConfig,
    able: futures::future::BoxFuture<'static, Result<(), String>>,
    stop: CancellationToken,
) -> (watch::Receiver<Role>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(Role::Unknown);
    let task = tokio::spawn(async move {
        if let Err(reason) = able.await {
            tracing::error!("{reason}");
            tx.send_replace(Role::Unable { reason });
            stop.cancelled().await;
            tx.send_replace(Role::Unknown);
            return;
        }
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        let mut observed = Observation::default();
        // When this process last renewed successfully, while it leads.
        let mut renewed: Option<Instant> = None;
        loop {
            let attempt = tokio::time::timeout(
                config.call_timeout,
                try_acquire(&api, &config, &mut observed),
            );
            let outcome = tokio::select! {
                () = stop.cancelled() => break,
                outcome = attempt => outcome,
            };
            match outcome {
                Ok(Ok(Role::Unknown)) => {}
                Ok(Ok(role)) => {
                    renewed = (role == Role::Leader).then(Instant::now);
                    tx.send_if_modified(|r| std::mem::replace(r, role.clone()) != role);
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot read or renew the engine lease");
                }
                Err(_) => tracing::warn!(
                    timeout_s = config.call_timeout.as_secs_f64(),
                    "the API server did not answer the lease call in time"
                ),
            }
            // A leader that could not renew for the renew deadline stops acting now,
            // before the lease can pass to anyone else.
            if *tx.borrow() == Role::Leader
                && renewed.is_none_or(|t| t.elapsed() >= config.renew_deadline)
            {
                tracing::warn!("lease not renewed within the renew deadline; stepping down");
                tx.send_replace(Role::Unknown);
                renewed = None;
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(config.retry) => {}
            }
        }
        if *tx.borrow() == Role::Leader {
            match tokio::time::timeout(config.call_timeout, release(&api, &config)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "could not release the engine lease"),
                Err(_) => {
                    tracing::warn!("releasing the engine lease timed out; it expires on its own")
                }
            }
        }
        tx.send_replace(Role::Unknown);
    });
    (rx, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: &str, renew: &str) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            renew_time: Some(MicroTime(renew.parse().unwrap())),
            lease_duration_seconds: Some(15),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn expiry_is_judged_by_locally_observed_time_whatever_the_holders_clock_says() {
        let start = Instant::now();
        let d = Duration::from_secs(15);
        let mut seen = Observation::default();
        // The holder's clock runs an hour ahead: its renewTime looks far in the future.
        let skewed = spec("a", "2099-01-01T00:00:00Z");
        assert_eq!(
            decide(Some(&skewed), "b", &mut seen, start, d),
            Step::Follow("a".into())
        );
        // Unchanged for the lease duration on our clock: it has stopped renewing.
        let later = start + Duration::from_secs(16);
        assert_eq!(
            decide(Some(&skewed), "b", &mut seen, later, d),
            Step::TakeOver
        );

        // An hour behind, but still renewing (the record keeps changing): it stays.
        let mut seen = Observation::default();
        let mut at = start;
        for renew in [
            "2000-01-01T00:00:00Z",
            "2000-01-01T00:00:02Z",
            "2000-01-01T00:00:04Z",
        ] {
            at += Duration::from_secs(10);
            assert_eq!(
                decide(Some(&spec("a", renew)), "b", &mut seen, at, d),
                Step::Follow("a".into())
            );
        }
    }

    #[test]
    fn own_free_and_missing_leases() {
        let now = Instant::now();
        let d = Duration::from_secs(15);
        let mut seen = Observation::default();
        assert_eq!(decide(None, "a", &mut seen, now, d), Step::Create);
        assert_eq!(
            decide(
                Some(&spec("a", "2026-01-01T00:00:00Z")),
                "a",
                &mut seen,
                now,
                d
            ),
            Step::Renew
        );
        let released = LeaseSpec::default();
        assert_eq!(
            decide(Some(&released), "b", &mut seen, now, d),
            Step::TakeOver
        );
    }
}
