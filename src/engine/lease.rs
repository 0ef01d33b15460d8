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

/// The Lease of the unsharded cluster-wide engine (see [`super::coverage`] for the rest).
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
    pub name: String,
    pub identity: String,
    /// A Lease that has precedence over this one (`(namespace, name)`): while a live
    /// holder has it, this candidate does not act (a namespace engine defers to the
    /// cluster-wide engine of its shard).
    pub superior: Option<(String, String)>,
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
            name: LEASE_NAME.into(),
            identity: identity.into(),
            superior: None,
            duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry: Duration::from_secs(2),
            call_timeout: Duration::from_secs(5),
        }
    }

    /// The Lease of an engine with this coverage.
    pub fn for_coverage(
        coverage: &super::coverage::Coverage,
        lease_namespace: &str,
        identity: impl Into<String>,
    ) -> Self {
        let (namespace, name) = coverage.lease(lease_namespace);
        Self {
            name,
            superior: coverage.superior(lease_namespace),
            ..Self::new(namespace, identity)
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
    let lease = api.get_opt(&config.name).await?;
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
                    name: Some(config.name.clone()),
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
        .replace(&config.name, &PostParams::default(), &lease)
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
    // A conflict is most often this engine's own renewal landing after the read (a
    // renewal cut short on its way out still reaches the API server): read it again.
    for _ in 0..3 {
        let Some(mut lease) = api.get_opt(&config.name).await? else {
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
            .replace(&config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Who holds the Lease `name`, if a live holder does, as judged by what this candidate
/// observed so far (the same rules as taking it over).
pub async fn live_holder(
    api: &Api<Lease>,
    name: &str,
    identity: &str,
    observed: &mut Observation,
    default_duration: Duration,
) -> kube::Result<Option<String>> {
    let lease = api.get_opt(name).await?;
    let spec = lease.map(|l| l.spec.unwrap_or_default());
    Ok(
        match decide(
            spec.as_ref(),
            identity,
            observed,
            Instant::now(),
            default_duration,
        ) {
            Step::Follow(holder) => Some(holder),
            Step::Renew => Some(identity.to_owned()),
            Step::Create | Step::TakeOver => None,
        },
    )
}

/// Keeps trying to hold the lease until `stop` is cancelled, publishing the role. A
/// leader that cannot renew before its lease would expire steps down. The task gives the
/// lease up when stopped; await its handle to be sure that happened.
///
/// `able` runs first: an engine that could not do its work (it cannot render charts)
/// never takes the lease from one that can, and says why once.
///
/// With a superior Lease (a namespace engine under a cluster-wide one), the candidate
/// leads only while the superior has no live holder: it checks before competing and
/// again after winning. When it has to defer while leading, it keeps renewing its own
/// Lease until `idle` says its workers have finished their step, then lets go, so the
/// cluster-wide engine never starts on that namespace beside a running action.
pub fn run(
    client: Client,
    config: LeaseConfig,
    able: futures::future::BoxFuture<'static, Result<(), super::error::Unable>>,
    idle: watch::Receiver<bool>,
    stop: CancellationToken,
) -> (watch::Receiver<Role>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(Role::Unknown);
    let task = tokio::spawn(async move {
        if let Err(unable) = able.await {
            let reason = unable.to_string();
            tracing::error!("{reason}");
            tx.send_replace(Role::Unable { reason });
            stop.cancelled().await;
            tx.send_replace(Role::Unknown);
            return;
        }
        let mut candidate = Candidate {
            api: Api::namespaced(client.clone(), &config.namespace),
            superior: config
                .superior
                .as_ref()
                .map(|(ns, name)| (Api::namespaced(client.clone(), ns), name.clone())),
            config,
            observed: Observation::default(),
            superior_seen: Observation::default(),
            holding: false,
            renewed: None,
            tx,
            idle,
        };
        loop {
            // A leader steps down the moment its renew deadline passes, even in the middle
            // of a round whose calls hang: the deadline runs from when its last successful
            // renew was sent, so it never acts once a standby may have taken over.
            let step_down = candidate.step_down_at();
            let mut expired = false;
            tokio::select! {
                () = stop.cancelled() => break,
                () = candidate.round() => {}
                () = until(step_down) => expired = true,
            }
            if expired {
                candidate.step_down();
            }
            // A standby looks twice as often, so a Lease handed back on shutdown is taken
            // over within about a second.
            let pause = if candidate.holding {
                candidate.config.retry
            } else {
                candidate.config.retry / 2
            };
            let step_down = candidate.step_down_at();
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(pause) => {}
                () = until(step_down) => candidate.step_down(),
            }
        }
        // The workers are done by now (the engine stops this task only then): say we no
        // longer lead before the Lease is let go, so nobody sees two leaders.
        candidate.tx.send_replace(Role::Unknown);
        if candidate.holding {
            candidate.release().await;
        }
    });
    (rx, task)
}

/// Sleeps until `at`, or forever without one.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The state of one candidate between rounds.
struct Candidate {
    api: Api<Lease>,
    superior: Option<(Api<Lease>, String)>,
    config: LeaseConfig,
    observed: Observation,
    superior_seen: Observation,
    /// This process wrote itself as holder and has not let go yet.
    holding: bool,
    /// When this process last renewed successfully, while it leads.
    renewed: Option<Instant>,
    tx: watch::Sender<Role>,
    idle: watch::Receiver<bool>,
}

/// Whether a superior engine keeps this one from acting.
enum Precedence {
    Free,
    Deferring(String),
    /// The superior Lease cannot be read: acting could run a second engine.
    Unknown(Role),
}

impl Candidate {
    async fn round(&mut self) {
        match self.precedence().await {
            Precedence::Free => {
                if self.attempt().await == Some(Role::Leader) {
                    // Written ours, now read theirs: a cluster-wide engine that took its
                    // Lease meanwhile has read ours (or will), and one of us defers.
                    match self.precedence().await {
                        Precedence::Free => self.publish(Role::Leader),
                        Precedence::Deferring(holder) => self.defer(holder).await,
                        Precedence::Unknown(role) => self.stand_by(role).await,
                    }
                }
            }
            Precedence::Deferring(holder) => self.defer(holder).await,
            Precedence::Unknown(role) => self.stand_by(role).await,
        }
        // A leader that could not renew for the renew deadline stops acting now,
        // before the lease can pass to anyone else.
        if *self.tx.borrow() == Role::Leader
            && self
                .renewed
                .is_none_or(|t| t.elapsed() >= self.config.renew_deadline)
        {
            self.step_down();
        }
    }

    /// When a leader must stop acting: its renew deadline after its last successful
    /// renew was sent. None while it does not lead.
    fn step_down_at(&self) -> Option<Instant> {
        if *self.tx.borrow() != Role::Leader {
            return None;
        }
        Some(
            self.renewed
                .map_or_else(Instant::now, |t| t + self.config.renew_deadline),
        )
    }

    fn step_down(&mut self) {
        if *self.tx.borrow() == Role::Leader {
            tracing::warn!("lease not renewed within the renew deadline; stepping down");
            self.tx.send_replace(Role::Unknown);
        }
        self.renewed = None;
    }

    async fn precedence(&mut self) -> Precedence {
        let Some((api, name)) = &self.superior else {
            return Precedence::Free;
        };
        let read = tokio::time::timeout(
            self.config.call_timeout,
            live_holder(
                api,
                name,
                &self.config.identity,
                &mut self.superior_seen,
                self.config.duration,
            ),
        )
        .await;
        let lease = format!("Lease {}/{name}", api.namespace().unwrap_or_default());
        match read {
            Ok(Ok(None)) => Precedence::Free,
            Ok(Ok(Some(holder))) => Precedence::Deferring(holder),
            Ok(Err(kube::Error::Api(e))) if e.code == 403 => Precedence::Unknown(Role::Unable {
                reason: format!(
                    "cannot read {lease} to tell whether a cluster-wide engine covers this \
                     namespace ({}); grant it with `wheelhouse rbac`",
                    e.message
                ),
            }),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot read the cluster-wide engine's {lease}");
                Precedence::Unknown(Role::Unknown)
            }
            Err(_) => {
                tracing::warn!("the API server did not answer the read of {lease} in time");
                Precedence::Unknown(Role::Unknown)
            }
        }
    }

    /// One attempt to take or renew our own Lease; `None` when it did not decide.
    async fn attempt(&mut self) -> Option<Role> {
        // Stamped when the call is sent: the record's renewTime, which a standby goes by,
        // is no older than this.
        let sent = Instant::now();
        let attempt = tokio::time::timeout(
            self.config.call_timeout,
            try_acquire(&self.api, &self.config, &mut self.observed),
        )
        .await;
        match attempt {
            Ok(Ok(Role::Unknown)) => None,
            Ok(Ok(role)) => {
                self.holding = role == Role::Leader;
                self.renewed = self.holding.then_some(sent);
                if !self.holding {
                    self.publish(role.clone());
                }
                Some(role)
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot read or renew the engine lease");
                None
            }
            Err(_) => {
                tracing::warn!(
                    timeout_s = self.config.call_timeout.as_secs_f64(),
                    "the API server did not answer the lease call in time"
                );
                None
            }
        }
    }

    /// A live superior has precedence: act no more, and let go of our Lease once the
    /// workers have finished their step (renewing it until then).
    async fn defer(&mut self, holder: String) {
        self.stand_by(Role::Follower {
            holder: format!("{holder} (cluster-wide)"),
        })
        .await;
    }

    async fn stand_by(&mut self, role: Role) {
        self.publish(role);
        self.renewed = None;
        if !self.holding {
            return;
        }
        if *self.idle.borrow() {
            self.release().await;
        } else {
            let _ = tokio::time::timeout(
                self.config.call_timeout,
                try_acquire(&self.api, &self.config, &mut self.observed),
            )
            .await;
        }
    }

    async fn release(&mut self) {
        match tokio::time::timeout(self.config.call_timeout, release(&self.api, &self.config)).await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "could not release the engine lease"),
            Err(_) => {
                tracing::warn!("releasing the engine lease timed out; it expires on its own")
            }
        }
        self.holding = false;
    }

    fn publish(&self, role: Role) {
        self.tx
            .send_if_modified(|r| std::mem::replace(r, role.clone()) != role);
    }
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
